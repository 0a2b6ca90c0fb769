"""Linux perf sampling: `perf record` samples every thread's native code (oneDNN JIT kernels named through perf
maps) on CLOCK_MONOTONIC, the markers' clock, so each sample is charged to the layer open at its instant.
"""
