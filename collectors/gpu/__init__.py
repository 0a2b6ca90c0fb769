"""GPU collectors, one folder per source: kineto/ (torch.profiler with CUDA activities: kernels per
layer by launch correlation), ncu/ (Nsight Compute counters per layer), nvml/ (power, energy,
utilisation, clocks). On a host without an NVIDIA GPU, or with --device cpu, each is unavailable
with the reason; their parsing and attribution are pure functions tested on recorded H100 data.
"""
