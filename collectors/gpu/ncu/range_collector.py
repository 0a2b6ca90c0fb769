"""Nsight Compute application-range replay over each NVTX layer range of one forward: warm-cache DRAM
traffic per layer (see live.py)."""

from __future__ import annotations

from hwprof.collectors.gpu.ncu.live import NcuPassCollector
from hwprof.collectors.gpu.ncu.per_layer import RANGE_METRICS


class NcuRangeCollector(NcuPassCollector):
    name = "ncu_range"
    title = "Nsight Compute application-range replay per layer range (warm caches)"
    pass_name = "ncu_range"
    replay_args = ("--replay-mode", "app-range", "--nvtx", "--nvtx-include", "regex:layer .*/")
    metrics = RANGE_METRICS
    report_stem = "ncu.range"


COLLECTOR = NcuRangeCollector
