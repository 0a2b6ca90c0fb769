"""What `hwprof gpu-import` measures from a recording, as its tables print it and its --format json writes it
(hwprof.gpu.importer: import_kineto, import_ncu, import_nvml). Not a run directory file: the importer's
summaries, read as records (codec.py) so the tables take typed fields instead of digging into dicts; and the
recording's gpu_results.json it reads (GpuRecording: the device, measured peaks and benchmark windows).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from hwprof.schema.bounds import Count, NonNegative, Share
from hwprof.schema.check import read_json
from hwprof.schema.codec import JsonObject, Record
from hwprof.schema.gpu_files import KinetoKernel


@dataclass(kw_only=True)
class KinetoImportLayer(Record):
    """One layer of a Kineto trace, per forward (kernels charged by launch correlation)."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("layer", "type", "gpu_us", "kernels", "cpu_us", "launch_us")
    layer: str = ""
    type: str = ""
    gpu_us: NonNegative = 0.0
    kernels: NonNegative = 0.0
    cpu_us: NonNegative = 0.0
    launch_us: NonNegative = 0.0
    api_us: NonNegative | None = None
    top_kernels: list[KinetoKernel] = field(default_factory=list)


@dataclass(kw_only=True)
class KernelClassRow(Record):
    """GPU time of one kernel class (hwprof.analysis.gpu.kernels.ClassShare as written)."""

    cls: str = field(default="", metadata={"key": "class"})
    gpu_us: NonNegative = 0.0
    kernels: NonNegative = 0.0
    share: Share = 0.0
    top: Any = None
    """(name, ns per forward) of the class's largest kernels: pairs (tuples in the importer, lists in JSON)."""


@dataclass(kw_only=True)
class KinetoImport(Record):
    """import_kineto: a torch.profiler CUDA trace's forwards, per layer and per kernel class."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("forwards", "cpu_us", "gpu_busy_us", "kernels", "idle_share")
    forwards: Count = 0
    cpu_us: NonNegative = 0.0
    gpu_busy_us: NonNegative = 0.0
    gpu_sum_us: NonNegative | None = None
    window_us: NonNegative | None = None
    kernels: NonNegative = 0.0
    idle_share: Share = 0.0
    first_kernel_delay_us: float | None = None
    layer_sum_over_busy: NonNegative | None = None
    layers: list[KinetoImportLayer] = field(default_factory=list)
    top_layers: list[Any] = field(default_factory=list)
    kernel_classes: list[KernelClassRow] = field(default_factory=list)
    file: str | None = None
    device: str | None = None
    unmatched_launch_calls: Count | None = None


@dataclass(kw_only=True)
class TensorCoreDoc(Record):
    """hwprof.analysis.gpu.kernels.TensorCoreUse as written: the two times, or why they are unknown."""

    conv_gemm_tensor_ns: NonNegative | None = None
    conv_gemm_no_tensor_ns: NonNegative | None = None
    unavailable: str | None = None
    fix: str | None = None


@dataclass(kw_only=True)
class LaunchFillDoc(Record):
    """hwprof.analysis.gpu.kernels.LaunchFill as written."""

    kernels: Count = 0
    sm_count: NonNegative = 0.0
    under_one_wave: NonNegative = 0.0
    sub_sm_grid: NonNegative = 0.0
    achieved_occupancy_pct: NonNegative | None = None
    theoretical_occupancy_pct: NonNegative | None = None


@dataclass(kw_only=True)
class RoofPointDoc(Record):
    """One layer at one cache state on the roofline (hwprof.analysis.gpu.roofline.RoofPoint as written)."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("cache", "bytes", "bytes_source", "time_source", "bound")
    cache: str = ""
    bytes: NonNegative = 0.0
    bytes_source: str = ""
    ns: NonNegative | None = None
    time_source: str = ""
    intensity: NonNegative | None = None
    achieved_tflops: NonNegative | None = None
    achieved_gbps: NonNegative | None = None
    attainable_tflops: NonNegative | None = None
    bound: str = ""
    roof_share: NonNegative | None = None


@dataclass(kw_only=True)
class RoofRowDoc(Record):
    """One layer of the GPU roofline (hwprof.analysis.gpu.roofline.GpuRoofRow as written, with lower_bound)."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("layer", "flops")
    layer: str = ""
    flops: NonNegative = 0.0
    tensor_math_inst: NonNegative | None = None
    warm: RoofPointDoc | None = None
    cold: RoofPointDoc | None = None
    sm_pct: NonNegative | None = None
    mem_pct: NonNegative | None = None
    lower_bound: bool | None = None


@dataclass(kw_only=True)
class NcuImport(Record):
    """import_ncu: Nsight Compute's per-layer table, tensor-core use, launch sizes and the roofline."""

    layers: dict[str, dict[str, float]] = field(default_factory=dict)
    """Layer -> its metrics (a metric table's rows: name -> figure)."""
    types: dict[str, str] = field(default_factory=dict)
    units: JsonObject | None = None
    methods: JsonObject | None = None
    kernels: JsonObject | None = None
    tensor_cores: TensorCoreDoc = field(default_factory=TensorCoreDoc)
    launch_fill: LaunchFillDoc | None = None
    warm_time: str | None = None
    roofline: list[RoofRowDoc] | None = None
    """GpuRoofRow as written, plus lower_bound (render/gpu/tables rebuilds the rows)."""
    roofline_summary: JsonObject | None = None
    peaks: dict[str, float] | None = None


@dataclass(kw_only=True)
class NvmlWindow(Record):
    """Energy per inference over one recorded benchmark window, or why it could not be measured."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("model", "precision")
    model: str = ""
    precision: str = ""
    unavailable: str | None = None
    j_per_inference: NonNegative | None = None
    power_w: NonNegative | None = None
    method: str | None = None
    recorded_j_per_inference: NonNegative | None = None
    means: JsonObject = field(default_factory=dict)
    """NVML column -> its mean over the window (None where not sampled)."""


@dataclass(kw_only=True)
class NvmlImport(Record):
    """import_nvml: the NVML series and the energy of each recorded benchmark window."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("samples", "span_s", "columns")
    file: str | None = None
    samples: Count = 0
    columns: list[Any] = field(default_factory=list)
    span_s: NonNegative = 0.0
    power_average_s: NonNegative | None = None
    power_average_source: str | None = None
    windows: list[NvmlWindow] = field(default_factory=list)


@dataclass(kw_only=True)
class RecordedDevice(Record):
    """gpu_results.json "device" (or the GPU peaks cache's): the machine the recording was made on, as it
    states it. Fields hwprof reads; the others (sms, nvidia_smi, ...) are kept as they are."""

    name: str | None = None
    cc: str | None = None
    """Compute capability, "9.0"."""
    torch: str | None = None
    cuda: str | None = None
    python: str | None = None
    cpu: str | None = None
    """/proc/cpuinfo's "model name" line."""
    nproc: Count | None = None


@dataclass(kw_only=True)
class BenchRow(Record):
    """One gpu_results.json "bench" row: a timed benchmark window of one model at one precision."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("model", "precision", "window_ns")
    model: str = ""
    precision: str = ""
    window_ns: list[Any] = field(default_factory=list)
    """[begin, end] on the recording machine's CLOCK_MONOTONIC."""
    iters: Count | None = None
    """Inferences timed in the window (rows that do not say: gpu_record.py's 150)."""
    joules_per_inference: NonNegative | None = None


@dataclass(kw_only=True)
class GpuRecording(Record):
    """gpu_results.json (a recording's device, measured peaks and benchmark windows), or hwprof's GPU peaks
    cache file (hwprof.hardware.gpu_peaks: its device and peaks)."""

    device: RecordedDevice = field(default_factory=RecordedDevice)
    peaks: dict[str, float] | None = None
    bench: list[BenchRow] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> GpuRecording:
        """The file at `path`, read and checked; RunDirError (one line) when it is missing or damaged."""
        return cls.from_json(read_json(path), str(path))

    def peak_table(self) -> dict[str, float]:
        """The measured peaks: "peaks", or the whole file where it holds the peaks alone."""
        return dict(self.peaks if self.peaks is not None else self.to_json())
