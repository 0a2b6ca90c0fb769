"""torch.profiler: aten operators and oneDNN primitives per layer from Kineto's Chrome trace, whose wall-clock
microseconds are put on CLOCK_MONOTONIC by sync ranges whose monotonic times were recorded in-process.
"""
