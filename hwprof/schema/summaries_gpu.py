"""What the GPU collectors (and the import of a recorded GPU run) write into run.json, under
collectors.<name>.summary. See summaries_cpu.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from hwprof.schema.bounds import Count, NonNegative, Share
from hwprof.schema.codec import JsonObject, Record
from hwprof.schema.summaries_cpu import Summary


@dataclass(kw_only=True)
class KinetoClock(Record):
    """How the Kineto trace's clock maps onto the run's: mono = kineto + offset_ns (None: not aligned)."""

    offset_ns: float | None = None
    error_ns: NonNegative | None = None
    pairs: Count | None = None
    method: str | None = None


@dataclass(kw_only=True)
class GpuKinetoSummary(Summary):
    """gpu_kineto: GPU kernel time per forward and per layer (the torch profiler's Kineto trace)."""

    NAME: ClassVar[str] = "gpu_kineto"
    device: str | None = None
    forwards: Count | None = None
    forward_cpu_us: NonNegative | None = None
    gpu_busy_us: NonNegative | None = None
    gpu_idle_share: Share | None = None
    kernels_per_forward: NonNegative | None = None
    layer_sum_over_busy: NonNegative | None = None
    clock: KinetoClock | None = None


@dataclass(kw_only=True)
class CudaGraphSummary(Summary):
    """cuda_graph: the forward replayed as one CUDA graph against eager, i.e. the launch overhead."""

    NAME: ClassVar[str] = "cuda_graph"
    iters: Count | None = None
    eager_ms_p50: NonNegative | None = None
    graph_ms_p50: NonNegative | None = None
    launch_overhead_share: float | None = None
    method: str | None = None


@dataclass(kw_only=True)
class NvmlSummary(Summary):
    """nvml: the GPU's power, clocks and energy sampled through NVML (live, or imported from a recording)."""

    NAME: ClassVar[str] = "nvml"
    samples: Count | None = None
    interval_ms: NonNegative | None = None
    energy_j: NonNegative | None = None
    window_s: NonNegative | None = None
    columns: list[Any] | None = None
    counter_update_ms: NonNegative | None = None
    j_per_iteration: NonNegative | None = None
    iterations_with_energy: str | None = None
    stage_energy_j: JsonObject | None = None
    stage_visits: JsonObject | None = None
    means: JsonObject | None = None
    energy_method: str | None = None
    energy_unavailable: str | None = None
    bench_windows: list[Any] | None = None
    trace: str | None = None


@dataclass(kw_only=True)
class NcuSummary(Summary):
    """ncu and ncu_range: Nsight Compute's kernel metrics per layer (the GPU roofline)."""

    NAME: ClassVar[str] = "ncu"
    replay: str | None = None
    rows: Count | None = None
    rows_without_layer: Count | None = None
    layers: Count | None = None
