"""The forward captured as a CUDA graph and replayed: how much of the eager forward is launch overhead."""
