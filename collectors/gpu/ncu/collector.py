"""Nsight Compute kernel replay under the NVTX layer ranges of one forward (see live.py)."""

from __future__ import annotations

from hwprof.collectors.gpu.ncu.live import MEASURED, NcuPassCollector
from hwprof.collectors.gpu.ncu.per_layer import KERNEL_METRICS, TENSOR_MATH


class NcuKernelCollector(NcuPassCollector):
    name = "ncu"
    title = "Nsight Compute per kernel (kernel replay), charged to NVTX layer ranges"
    pass_name = "ncu"
    replay_args = ("--nvtx", "--nvtx-include", f"{MEASURED}/")
    metrics = KERNEL_METRICS
    optional_metrics = TENSOR_MATH
    report_stem = "ncu.kernel"


COLLECTOR = NcuKernelCollector
