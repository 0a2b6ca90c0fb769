"""The sweep's table: one row per point, read from the point's run directory, and its JSON/CSV files.

A row is pure analysis of a finished run directory (plus machine peaks measured by the sweep for a
run whose run.json has none); what a point runs and how is hwprof/sweep/points.py's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.analysis.availability import collector_missing
from hwprof.analysis.sweep.advice import (
    ADVISE_FLAG,
    NOT_RUN,
    SUMMARY_CSV_FIELDS,
    advice_summary,
    set_advice,
    summary_csv_rows,
)
from hwprof.core.csvtext import csv_text
from hwprof.core.host_kinds import host_kind, software, software_text
from hwprof.rundir.names import SWEEP_JSON
from hwprof.rundir.writer import SweepFiles
from hwprof.schema.check import Field, RunDirError, check_fields, found, read_json_object
from hwprof.schema.codec import JsonObject
from hwprof.schema.host import HostDoc, PeaksDoc
from hwprof.schema.run import RunDoc, RuntimeDoc
from hwprof.schema.summaries_gpu import CudaGraphSummary, NvmlSummary

if TYPE_CHECKING:
    from hwprof.analysis.run_analysis import Analysis

FP32_BYTES = 4
DEFAULT_RUNTIME = "torch"
DEFAULT_PRECISION = "fp32"
CSV_FIRST = ("model", "runtime", "precision", "executed_precision", "threads", "batch")


NODE_THREADS = -1
"""A point's thread count when the sweep names none and its points run on other machines (Ray): each
collect then uses the thread count of the node it lands on, and its row says which."""


@dataclass(frozen=True)
class SweepPoint:
    model: str
    runtime: str
    precision: str
    threads: int
    """NODE_THREADS: no --threads for its collect, which then uses the machine's own default."""
    batch: int

    @property
    def name(self) -> str:
        """The point's run directory: runtime and precision appear when either is not the default."""
        return point_name(self.model, self.threads, self.batch, self.runtime, self.precision)


@dataclass
class SweepRow:
    model: str
    threads: int
    batch: int
    run_dir: str
    status: str
    """"complete", "partial", "failed", "timeout" or "reused" (an earlier complete run)."""
    error: str = ""
    runtime: str = DEFAULT_RUNTIME
    precision: str = DEFAULT_PRECISION
    """Asked for."""
    executed_precision: str = ""
    """What executed, as the runtime reported it ("" where run.json does not say)."""
    max_abs_head: float | None = None
    """Largest |difference| of the raw detection head against torch fp32 on the same input."""
    max_abs_reference: float | None = None
    """Largest |value| of torch fp32's head: the scale max_abs_head is to be read against."""
    sensitivity_head: float | None = None
    """How far torch fp32's head moves on another input: what says whether the check could see (None: older run)."""
    detections: int | None = None
    detections_reference: int | None = None
    """Detections after NMS: this point's, and torch fp32's on the same input."""
    output_note: str = ""
    """"reference" for torch fp32, or why the output difference is missing."""
    random_init: bool | None = None
    """The model had seeded random weights (run.json model.random_init)."""
    imgsz: int | None = None
    forward_ms: float | None = None
    """Forward p50 of one batch, clean timing pass."""
    latency_ms: float | None = None
    """Forward p50 per image (forward_ms / batch), as the seed reports' latency."""
    iteration_ms: float | None = None
    fps: float | None = None
    """End to end: images per second over whole pipeline iterations (p50)."""
    forward_fps: float | None = None
    params_m: float | None = None
    size_mb: float | None = None
    """The model as executed in MiB: run.json's runtime.model_bytes (torch: parameter bytes in the executed
    dtype; other runtimes: the model file they loaded, int8 quantized for int8), else FP32 parameters."""
    size_source: str = ""
    gflops: float | None = None
    """Per image, torch.utils.flop_counter."""
    pct_peak: float | None = None
    intensity: float | None = None
    bound: str | None = None
    j_per_image: float | None = None
    energy_note: str = ""
    peaks_source: str = ""
    wall_s: float | None = None
    device: str = "cpu"
    graph_forward_ms: float | None = None
    """GPU points: the forward replayed as one CUDA graph (cuda_graph collector), against forward_ms eager."""
    host: str = ""
    """The hostname that ran the point (run.json host.hostname)."""
    host_kind: str = ""
    """Its kind of machine: CPU model, logical CPUs, widest ISA (hwprof.core.host_kinds.HostKind.label)."""
    host_slug: str = ""
    cpu_model: str = ""
    cores: int | None = None
    isa: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    """torch, the runtime (when not torch), Python and hwprof versions of the run."""
    node_id: str = ""
    """Ray: the id of the node whose run the row is (its last attempt's); "" for a local sweep."""
    attempts: list[JsonObject] = field(default_factory=list)
    """Ray: every attempt of the point, in order: node_id, host, start, end (time.time()), outcome (the CSV
    has their count), kept as sweep.json holds them (the table reads each as hwprof.schema.sweep_attempt's
    SweepAttempt). More than one: Ray ran the point again after its worker or node died."""
    advice: str = ""
    """`sweep --advise`: the key of the point's top ranked change (hwprof.analysis.sweep.advice)."""
    advice_forward: float | None = None
    """Its forward speed-up (baseline / variant), its spread and its method."""
    advice_spread: str = ""
    advice_method: str = ""
    advice_status: str = ""
    """ranked, no change measured faster, advice not run, advice failed or advice unreadable."""
    advice_note: str = ""
    """Why the point has no top change, in one line."""
    advice_ranked: dict[str, float] = field(default_factory=dict)
    """Every change ranked at this point: its forward speed-up."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def name(self) -> str:
        return Path(self.run_dir).name

    @property
    def is_reference(self) -> bool:
        return (self.runtime, self.precision) == (DEFAULT_RUNTIME, DEFAULT_PRECISION)


@dataclass
class SweepResult:
    rows: list[SweepRow]
    out_root: Path
    command: list[str] = field(default_factory=list)
    """The collect arguments every point shared (beside --model, --runtime, --precision, --threads, --batch, --out)."""
    notes: list[str] = field(default_factory=list)
    resume: str = ""
    """The command that runs the points a stopped sweep did not finish ("" when none is left)."""

    @property
    def advised(self) -> bool:
        """Every point's collect ran --advise."""
        return ADVISE_FLAG in self.command

    def to_dict(self) -> dict[str, Any]:
        out = {
            "rows": [r.to_dict() for r in self.rows],
            "out_root": str(self.out_root),
            "command": self.command,
            "notes": self.notes,
        }
        if self.resume:
            out["resume"] = self.resume
        if self.advised:
            out["advice_summary"] = [k.to_dict() for k in advice_summary(self.rows)]
        return out


def point_name(
    model: str, threads: int, batch: int, runtime: str = DEFAULT_RUNTIME, precision: str = DEFAULT_PRECISION
) -> str:
    t = "node" if threads == NODE_THREADS else threads
    if (runtime, precision) == (DEFAULT_RUNTIME, DEFAULT_PRECISION):
        return f"{model}-t{t}-b{batch}"
    return f"{model}-{runtime}-{precision}-t{t}-b{batch}"


def point_row(point: SweepPoint, run_dir: Path, status: str, error: str = "") -> SweepRow:
    """The row of a point before its run is read (a point that left no run keeps it: its advice was not run)."""
    return SweepRow(
        point.model,
        point.threads,
        point.batch,
        str(run_dir),
        status,
        error,
        runtime=point.runtime,
        precision=point.precision,
        advice_status=NOT_RUN,
        advice_note=f"the point's collect did not finish ({status})",
    )


def _runtime_fields(row: SweepRow, run: RunDoc, params: int | None) -> None:
    """What executed, the model's size as executed, and the output against torch fp32."""
    info = run.runtime or RuntimeDoc()
    row.executed_precision = str(info.executed_precision or "")
    if info.model_bytes:
        row.size_mb = info.model_bytes / 2**20
        row.size_source = f"{info.model_file} (file)" if info.model_file else "parameters as executed"
    elif params:
        row.size_mb = params * FP32_BYTES / 2**20
        row.size_source = "FP32 parameters"
    diff = info.output_diff
    if row.is_reference and row.executed_precision in ("", DEFAULT_PRECISION):
        row.output_note = "reference"
    elif not diff or diff.max_abs_head is None:
        row.output_note = "not measured"
    else:
        row.max_abs_head = diff.max_abs_head
        row.max_abs_reference = diff.max_abs_reference
        row.sensitivity_head = diff.sensitivity_head
        row.detections = diff.detections
        row.detections_reference = diff.detections_reference


def set_host(row: SweepRow, host: HostDoc, runtime: RuntimeDoc | None = None) -> None:
    """The row's host columns from a run.json "host" record."""
    if not host:
        return
    kind = host_kind(host.to_json())
    row.host = str(host.hostname or "")
    row.host_kind, row.host_slug = kind.label, kind.slug
    row.cpu_model, row.cores, row.isa = kind.cpu_model, kind.cores, " ".join(kind.isa)
    row.versions = software(host.to_json(), runtime.to_json() if runtime is not None else None)


def row_from_run(
    run_dir: Path,
    point: SweepPoint,
    status: str,
    peaks: Callable[[int], JsonObject] | None = None,
) -> SweepRow:
    """The sweep row of one finished run directory (pure analysis, plus the peaks fallback)."""
    from hwprof.analysis.run_analysis import analyse
    from hwprof.rundir.reader import RunData

    row = point_row(point, run_dir, status)
    set_advice(row, run_dir)
    try:
        data = RunData.load(run_dir)
    except ValueError as exc:
        row.status, row.error = "failed", str(exc)
        return row
    run = data.doc
    threads = point.threads
    if threads == NODE_THREADS:
        threads = row.threads = int(run.config.threads or NODE_THREADS)
    row.peaks_source = "run.json"
    if run.peaks is None and peaks is not None:
        run.peaks = PeaksDoc.from_json(peaks(threads), "the sweep's peaks")
        row.peaks_source = "measured by the sweep (run.json had none)"
    a = analyse(data)
    _speed_fields(row, run, a, point.batch)
    row.random_init = run.model.random_init
    params = run.model.params_fused or run.model.params
    if params:
        row.params_m = params / 1e6
    _runtime_fields(row, run, params)
    set_host(row, run.host, run.runtime)
    _roofline_fields(row, run, a, point.batch)
    if a.stages.j_per_image is not None:
        row.j_per_image = a.stages.j_per_image
    else:
        row.energy_note = collector_missing(run, ["rapl"], "energy").short()
    row.device = run.config.device or "cpu"
    if row.device != "cpu":
        _gpu_fields(row, run, point.batch)
    return row


def _speed_fields(row: SweepRow, run: RunDoc, a: Analysis, batch: int) -> None:
    """The forward's and the iteration's median, the latency per image, the frame rates."""
    row.imgsz = run.config.imgsz
    fwd = a.stages.get("forward")
    whole = a.stages.get("iteration")
    if fwd is not None:
        row.forward_ms = fwd.p50_ms
        row.latency_ms = fwd.p50_ms / batch
        row.forward_fps = batch * 1e3 / fwd.p50_ms if fwd.p50_ms else None
    if whole is not None:
        row.iteration_ms = whole.p50_ms
    row.fps = run.fps


def _roofline_fields(row: SweepRow, run: RunDoc, a: Analysis, batch: int) -> None:
    """GFLOPs per image (the model's, else its layers' sum) and the run's place on the roofline."""
    flops = run.model.flops
    if not flops:
        layer_flops = [r.flops for r in a.layers.top_level if r.flops is not None]
        flops = sum(layer_flops) if layer_flops else None
    if flops:
        row.gflops = flops / 1e9 / batch
    if a.roofline is not None:
        row.pct_peak = a.roofline.pct_peak
        row.intensity = a.roofline.intensity
        row.bound = a.roofline.bound
    elif "roofline" in a.layers.missing:
        row.peaks_source = a.layers.missing["roofline"].short()


def _gpu_fields(row: SweepRow, run: RunDoc, batch: int) -> None:
    """A GPU point: energy from NVML's counter, the CUDA-graph forward; the CPU roofline does not apply."""
    row.pct_peak = row.intensity = row.bound = None
    row.peaks_source = "GPU point: CPU peaks do not apply (GPU roofline per layer: collect --counters ncu)"
    nvml = run.summary(NvmlSummary)
    if nvml.j_per_iteration is not None:
        row.j_per_image = nvml.j_per_iteration / batch
        row.energy_note = "estimate: NVML total-energy counter, interpolated between its updates"
    elif nvml.energy_unavailable:
        row.energy_note = f"unavailable: nvml: {nvml.energy_unavailable}"
    else:
        row.energy_note = collector_missing(run, ["nvml"], "energy").short()
    row.graph_forward_ms = run.summary(CudaGraphSummary).graph_ms_p50


def sweep_files(result: SweepResult) -> SweepFiles:
    """sweep.json, sweep.csv and, for an advised sweep, sweep_advice.csv, as content (hwprof.rundir.writer
    writes them: hwprof.sweep.points.write_sweep)."""
    fields = [*CSV_FIRST, *(f for f in SweepRow.__dataclass_fields__ if f not in CSV_FIRST)]
    rows = [{k: _csv_cell(v) for k, v in row.to_dict().items()} for row in result.rows]
    advice = None
    if result.advised:
        lines = [{k: _csv_cell(v) for k, v in line.items()} for line in summary_csv_rows(advice_summary(result.rows))]
        advice = csv_text(list(SUMMARY_CSV_FIELDS), lines)
    return SweepFiles(json.dumps(result.to_dict(), indent=1) + "\n", csv_text(fields, rows), advice)


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict):
        return software_text({k: _csv_cell(v) for k, v in value.items()})
    if isinstance(value, list):  # a row's attempts: their count (sweep.json has each)
        return len(value)
    return value


SWEEP_FIELDS = (
    Field("rows", (list,), "a list", required=True),
    Field("command", (list,), "a list"),
    Field("notes", (list,), "a list"),
)
SWEEP_ROW_FIELDS = (
    Field("model", (str,), "a string", required=True),
    Field("threads", (int,), "an integer", required=True),
    Field("batch", (int,), "an integer", required=True),
    Field("run_dir", (str,), "a path", required=True),
    Field("status", (str,), "a string", required=True),
)
"""What load_sweep relies on in sweep.json."""


def load_sweep(out_root: Path | str) -> SweepResult:
    path = Path(out_root) / SWEEP_JSON
    if not path.is_file():
        raise ValueError(f"{out_root} has no {SWEEP_JSON}")
    doc = read_json_object(path)
    check_fields(doc, SWEEP_FIELDS, str(path))
    for i, r in enumerate(doc["rows"]):
        if not isinstance(r, dict):
            raise RunDirError(f'{path}: field "rows[{i}]" must be an object, found {found(r)}')
        check_fields(r, SWEEP_ROW_FIELDS, str(path), f"rows[{i}].")
    known = SweepRow.__dataclass_fields__
    return SweepResult(
        [SweepRow(**{k: v for k, v in r.items() if k in known}) for r in doc["rows"]],
        Path(out_root),
        doc.get("command", []),
        doc.get("notes", []),
        str(doc.get("resume") or ""),
    )
