"""Nsight Compute (ncu): hardware counters per kernel and per layer range, charged to NVTX layer ranges."""
