"""Recorded GPU files (Nsight Compute, Kineto) imported as a run directory."""
