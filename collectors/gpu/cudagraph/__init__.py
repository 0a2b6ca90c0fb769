"""The forward captured as a CUDA graph and replayed: the evidence of how much of the eager forward is launch overhead."""
