"""What the GPU collectors (and the import of a recorded GPU run) write into run.json, under
collectors.<name>.summary. See summaries_cpu.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from hwprof.schema.codec import JsonObject, Record
from hwprof.schema.summaries_cpu import Summary


@dataclass(kw_only=True)
class KinetoClock(Record):
    """How the Kineto trace's clock maps onto the run's: mono = kineto + offset_ns (None: not aligned)."""

    offset_ns: float | None = None
    error_ns: float | None = None
    pairs: int | None = None
    method: str | None = None


@dataclass(kw_only=True)
class GpuKinetoSummary(Summary):
    """gpu_kineto: GPU kernel time per forward and per layer (the torch profiler's Kineto trace)."""

    NAME: ClassVar[str] = "gpu_kineto"
    device: str | None = None
    forwards: int | None = None
    forward_cpu_us: float | None = None
    gpu_busy_us: float | None = None
    gpu_idle_share: float | None = None
    kernels_per_forward: float | None = None
    layer_sum_over_busy: float | None = None
    clock: KinetoClock | None = None


@dataclass(kw_only=True)
class CudaGraphSummary(Summary):
    """cuda_graph: the forward replayed as one CUDA graph against eager, i.e. the launch overhead."""

    NAME: ClassVar[str] = "cuda_graph"
    iters: int | None = None
    eager_ms_p50: float | None = None
    graph_ms_p50: float | None = None
    launch_overhead_share: float | None = None
    method: str | None = None


@dataclass(kw_only=True)
class NvmlSummary(Summary):
    """nvml: the GPU's power, clocks and energy sampled through NVML (live, or imported from a recording)."""

    NAME: ClassVar[str] = "nvml"
    samples: int | None = None
    interval_ms: float | None = None
    energy_j: float | None = None
    window_s: float | None = None
    columns: list[Any] | None = None
    counter_update_ms: float | None = None
    j_per_iteration: float | None = None
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
    rows: int | None = None
    rows_without_layer: int | None = None
    layers: int | None = None
