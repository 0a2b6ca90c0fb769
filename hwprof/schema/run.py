"""run.json as a typed document: what ran (config, host, model), each pass (hwprof.schema.run_passes) and
collector with its typed summary, the stages' latency, the machine's peaks and the runtime.

`RunDoc.from_json(doc, where)` checks every field it knows (RunDirError naming the file and the field) and
`to_json()` gives back the same object, key for key and in order (see codec.py), so readers take the typed
document while the file stays what it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from hwprof.schema.bounds import Count, NonNegative, Share
from hwprof.schema.check import SCHEMA_VERSION, RunDirError, found, read_json
from hwprof.schema.codec import JsonObject, Record
from hwprof.schema.detections import DetectionsDoc
from hwprof.schema.frames import AnnotatedDoc, VideoDoc
from hwprof.schema.host import HostDoc, PeaksDoc
from hwprof.schema.model_identity import ModelIdentity
from hwprof.schema.probes import PROBE_TYPES, ProbeDetails
from hwprof.schema.program import ProgramDoc
from hwprof.schema.run_passes import PassDoc
from hwprof.schema.runtime_checks import ClockDoc, OutputDiff, ProfiledPass
from hwprof.schema.summaries_cpu import (
    CallgrindSummary,
    FlopsSummary,
    PapiSummary,
    PerfEventsSummary,
    RaplSummary,
    StageLatency,
    Summary,
    SysstatSummary,
    TimingSummary,
)
from hwprof.schema.summaries_gpu import CudaGraphSummary, GpuKinetoSummary, NcuSummary, NvmlSummary
from hwprof.schema.summaries_tools import (
    PerfSamplingSummary,
    PyspySummary,
    ScaleneSummary,
    TorchMemorySummary,
    TorchProfilerSummary,
)

S = TypeVar("S", bound=Summary)

SUMMARY_TYPES: dict[str, type[Summary]] = {
    cls.NAME: cls
    for cls in (
        TimingSummary, FlopsSummary, RaplSummary, SysstatSummary, PerfEventsSummary, PapiSummary, CallgrindSummary,
        PerfSamplingSummary, PyspySummary, ScaleneSummary, TorchProfilerSummary, TorchMemorySummary,
        GpuKinetoSummary, CudaGraphSummary, NvmlSummary, NcuSummary,
    )
}  # fmt: skip
SUMMARY_TYPES["ncu_range"] = NcuSummary
"""Collector name -> its summary's type (ncu_range writes what ncu writes)."""


@dataclass(kw_only=True)
class RunConfigDoc(Record):
    """The run's options (hwprof.core.config.RunConfig as written)."""

    model: str | None = None
    runtime: str | None = None
    precision: str | None = None
    device: str | None = None
    channels_last: bool | None = None
    weights: str | None = None
    images: str | None = None
    annotate: str | None = None
    """Where the annotated frames were asked to go (`--annotate`); absent in older runs."""
    imgsz: Count | None = None
    batch: Count | None = None
    threads: Count | None = None
    warmup: Count | None = None
    iters: Count | None = None
    depth: Count | None = None
    conf: Share | None = None
    iou: Share | None = None
    seed: int | None = None
    only: list[Any] | None = None
    skip: list[Any] | None = None
    events: list[Any] | None = None
    counters: str | None = None
    counter_reads: str | None = None
    counter_threads: str | None = None
    interval_ms: NonNegative | None = None
    pyspy_rate: Count | None = None
    pyspy_native: bool | None = None
    pyspy_nonblocking: bool | None = None
    """Written by older runs."""
    perf_rate: Count | None = None
    scalene_memory: bool | None = None
    profiler_stack: bool | None = None
    pass_timeout_s: NonNegative | None = None
    budget_s: NonNegative | None = None
    paired_extend_ratio: NonNegative | None = None
    paired_extend_max_s: NonNegative | None = None
    extra: JsonObject | None = None
    program: ProgramDoc | None = None
    """The user's own program (`collect -- python SCRIPT ...`); absent for the built-in pipeline."""

    @property
    def attached(self) -> int | None:
        """The running service's PID of an `hwprof attach` run (as RunConfig.attached); None for any other run."""
        return self.program.attached if self.program is not None else None

    @property
    def outside(self) -> bool:
        """`hwprof attach --no-agent`: the service was sampled from outside, whole-process."""
        return self.program is not None and bool(self.program.outside)


@dataclass(kw_only=True)
class ModelDoc(ModelIdentity):
    """The model that ran: its name, family, weights and size (its identity copied from model.json when the run
    finishes, hwprof.session.finish)."""

    layers: Count | None = None
    input_shape: list[Any] | None = None
    flops: NonNegative | None = None
    gflops: NonNegative | None = None


@dataclass(kw_only=True)
class RuntimeDoc(Record):
    """The inference runtime that executed the forward (hwprof.workload.runtime's info)."""

    name: str | None = None
    runtime: str | None = None
    precision: str | None = None
    version: str | None = None
    executed_precision: str | None = None
    precision_detail: str | None = None
    model_file: str | None = None
    model_sha256: str | None = None
    model_bytes: Count | None = None
    output_diff: OutputDiff | None = None
    """The output against torch fp32 (hwprof.workload.runtime_artifacts.output_difference)."""
    profiled_passes: dict[str, ProfiledPass] | None = None
    """pass -> the profiler that profiled the runtime in it."""
    provider: str | None = None
    """ONNX Runtime's execution provider, OpenVINO's device (hwprof.workload.runtime's export)."""
    clock: ClockDoc | None = None
    """runtime.json: the runtime's clock alignment; run.json keeps it under profiled_passes."""
    export: JsonObject | None = None
    """The run's ONNX export as written (hwprof.workload.onnx_export.ExportedModel; the runtime keeps the
    dataclass)."""
    quantized: JsonObject | None = None
    """ONNX Runtime int8: the quantized model as written, with its method."""
    compile_options: dict[str, str] | None = None
    """OpenVINO's compile_model options."""
    channels_last: bool | None = None
    device: str | None = None
    """The CUDA runtime's: its device, name, SMs, CUDA and cuDNN versions and TF32 settings."""
    device_name: str | None = None
    sms: Count | None = None
    cuda: str | None = None
    cudnn: int | None = None
    tf32_cudnn: bool | None = None
    tf32_matmul: bool | None = None
    compile_mode: str | None = None
    """hwprof advise: the torch.compile mode the side ran with."""
    cuda_graph: bool | None = None
    """hwprof advise: the side replayed a CUDA graph."""
    layer_errors_failed: str | None = None
    """Why the per-layer output check failed (it is not fatal)."""
    glue_threads: Count | None = None
    """torch's intra-op threads in the stages around the forward, where not the run's --threads: one for a
    runtime with its own thread pool (hwprof.workload.runtime.Runtime.glue_keeps_threads)."""


@dataclass(kw_only=True)
class CollectorEntry(Record):
    """One collector in run.json: its status (and why), its pass, and its typed summary."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("status",)
    status: str = ""
    reason: str | None = None
    fix: str | None = None
    summary: Summary | None = None
    artifacts: list[Any] | None = None
    pass_name: str | None = field(default=None, metadata={"key": "pass"})
    details: ProbeDetails | None = None
    """What the collector's probe found (written for an unavailable collector), read as its PROBE_TYPES type."""

    @classmethod
    def read(cls, name: str, doc: Any, where: str) -> CollectorEntry:
        """The entry of collector `name`, its summary and probe details read as that collector's types."""
        entry = cls.from_json(doc, where, f"collectors.{name}.")
        raw = doc.get("summary")
        if raw is not None:
            entry.summary = SUMMARY_TYPES.get(name, Summary).from_json(raw, where, f"collectors.{name}.summary.")
        details = doc.get("details")
        if details is not None:
            entry.details = PROBE_TYPES.get(name, ProbeDetails).from_json(details, where, f"collectors.{name}.details.")
        return entry

    @property
    def ran(self) -> bool:
        return self.status in ("ok", "partial")


@dataclass(kw_only=True)
class ImportConfiguration(Record):
    """An imported run's forwards as gpu-import was told they ran (a Kineto trace does not state it)."""

    batch: Count | None = None
    precision: str | None = None
    channels_last: bool | None = None
    source: str | None = None
    """Where the figures came from (the gpu-import options)."""


@dataclass(kw_only=True)
class ImportedDoc(Record):
    """run.json "imported" (hwprof gpu-import): the recorded files the run was made from, and their machine."""

    files: list[Any] | None = None
    device: str | None = None
    """The GPU the recording ran on."""
    recorded_on: str | None = None
    configuration: ImportConfiguration | None = None
    experiments: list[Any] | None = None
    """The recorded experiments copied into the run (paths relative to it)."""


@dataclass(kw_only=True)
class RunDoc(Record):
    """run.json (see the module's docstring)."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("schema_version", "status")
    schema_version: int = SCHEMA_VERSION
    run_id: str | None = None
    status: str = ""
    created: str | None = None
    command: list[Any] | None = None
    """The command line of the collect (argv)."""
    config_file: JsonObject | None = None
    """The `--config` file the options came from: its path, format (toml, yaml) and text; absent without one."""
    imported: ImportedDoc | None = None
    config: RunConfigDoc = field(default_factory=RunConfigDoc)
    host: HostDoc = field(default_factory=HostDoc)
    images: JsonObject | None = None
    """The images the collect read: paths, skipped (with the reason), source; a video's probe under "video"
    (hwprof.workload.video.VideoInfo)."""
    annotated: AnnotatedDoc | None = None
    """The annotated output kept at --annotate's path (hwprof.session.annotated); absent without --annotate."""
    clock: JsonObject | None = None
    collectors: dict[str, CollectorEntry] = field(default_factory=dict)
    passes: dict[str, PassDoc] = field(default_factory=dict)
    disk_estimate: JsonObject | None = None
    peaks: PeaksDoc | None = None
    runtime: RuntimeDoc | None = None
    error: str | None = None
    """What stopped the collection (a full disk: the path)."""
    interrupted: JsonObject | None = None
    """The stop signal: which, how often, and which passes ran, were stopped or never started."""
    finished: str | None = None
    finish_error: str | None = None
    model: ModelDoc = field(default_factory=ModelDoc)
    stages: dict[str, StageLatency] = field(default_factory=dict)
    stages_source: str | None = None
    fps: NonNegative | None = None
    detections: DetectionsDoc | None = None
    """The boxes NMS kept per image (or over a video's frames), by class, in the measured iterations of the pass
    the stages come from; absent in runs from before it was recorded, and for a program's run."""
    render_errors: list[Any] | None = None
    """Renderings of a complete collection that could not be written for lack of space: what, path, error."""

    @property
    def batch(self) -> int | None:
        """Images per forward: --batch, or for a program's run (which has none) its model's sample input's first
        dimension; None where the run does not say."""
        if self.config.program is not None:
            shape = self.model.input_shape
            return int(shape[0]) if shape else None
        return self.config.batch

    @classmethod
    def read(cls, doc: Any, where: str) -> RunDoc:
        """run.json's value `doc`, read from `where`, checked and typed; RunDirError (one line) if damaged.
        The schema version is checked first: a run of another version is named as such, not by a field."""
        if not isinstance(doc, dict):
            raise RunDirError(f"{where}: must be a JSON object, found {found(doc)}")
        version = doc.get("schema_version")
        if isinstance(version, int) and not isinstance(version, bool) and version != SCHEMA_VERSION:
            raise RunDirError(f"{where}: has schema_version {version}; this hwprof reads {SCHEMA_VERSION}")
        run = cls.from_json(doc, where)
        if run.collectors:
            run.collectors = {name: CollectorEntry.read(name, e, where) for name, e in doc["collectors"].items()}
        return run

    @classmethod
    def load(cls, path: Path) -> RunDoc:
        """The run.json at `path`, read and checked; RunDirError (one line) when it is missing or damaged."""
        return cls.read(read_json(path), str(path))

    def entry(self, name: str) -> CollectorEntry:
        """Collector `name`'s entry (an empty one, status "", when the run does not name it)."""
        return self.collectors.get(name) or CollectorEntry()

    def summary(self, kind: type[S], name: str = "") -> S:
        """The typed summary of collector `name` (kind.NAME by default); an empty one when there is none."""
        summary = self.entry(name or kind.NAME).summary
        return summary if isinstance(summary, kind) else kind()

    @property
    def video(self) -> VideoDoc | None:
        """The video the run read its frames from (images.video), or None for images; RunDirError if damaged."""
        doc = self.images.get("video") if self.images else None
        return None if doc is None else VideoDoc.from_json(doc, "run.json", "images.video.")

    @property
    def device(self) -> str:
        """cpu or cuda[:N]: where the run's forward ran (runs recorded before --device: cpu)."""
        return str(self.config.device or "cpu")
