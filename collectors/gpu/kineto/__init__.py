"""torch.profiler with CUDA activities: each kernel charged to the layer range that launched it."""
