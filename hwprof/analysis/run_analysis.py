"""Everything the report shows, computed once from a run directory (pure: no measuring)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from hwprof.analysis.advice.table import Advice, load_advice
from hwprof.analysis.availability import Missing
from hwprof.analysis.finding import GPU, Finding
from hwprof.analysis.findings import findings
from hwprof.analysis.gpu.view import GpuView, gpu_findings, load_gpu_view
from hwprof.analysis.health import RunHealth, run_health
from hwprof.analysis.layers.memory import MemoryView, memory_view
from hwprof.analysis.layers.report import build_layer_report
from hwprof.analysis.layers.shapes import LayerShapes, layer_shapes
from hwprof.analysis.layers.stats import LayerReport
from hwprof.analysis.overhead import Overheads, overheads
from hwprof.analysis.roofline import COMPUTE, MEMORY
from hwprof.analysis.runtime_nodes import RuntimeView, load_runtime_view
from hwprof.analysis.stages import Stages, stage_table
from hwprof.analysis.types import TypeStat, by_type
from hwprof.analysis.validity import checked
from hwprof.analysis.whole_program import WholeProgram, whole_program
from hwprof.analysis.workload import WorkloadView, workload_view
from hwprof.schema.run import RunDoc
from hwprof.schema.runtime_checks import LayerErrors
from hwprof.schema.summaries_cpu import PerfEventsSummary

if TYPE_CHECKING:
    from hwprof.rundir.reader import RunData


@dataclass
class RooflineSummary:
    peak_gflops: float
    peak_gbps: float
    ridge: float
    flops: float | None
    min_bytes: float | None
    intensity: float | None
    """Whole forward: FLOPs / sum of the top-level layers' minimum bytes."""
    gflops_s: float | None
    pct_peak: float | None
    bound: str | None
    layers_by_bound: dict[str, dict[str, float | None]] = field(default_factory=dict)
    """"memory"/"compute" -> {"layers": count, "share": share of forward, None without layer times}. Empty
    when no layer has a bound (no FLOPs): then `unavailable["flops"]` says why, never a count of 0."""
    measured_bytes: float | None = None
    measured_intensity: float | None = None
    bound_measured: str | None = None
    compute_probe: str = "matmul"
    unavailable: dict[str, str] = field(default_factory=dict)
    """"flops" / "time" -> why the figures that need it are unavailable (FLOPs, intensity, bound counts;
    achieved GFLOP/s, shares of forward)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Analysis:
    stages: Stages
    layers: LayerReport
    types: list[TypeStat]
    overheads: Overheads
    roofline: RooflineSummary | None
    findings: list[Finding]
    unavailable: dict[str, dict[str, str]]
    """Collector name -> {status, reason, fix} for every collector that did not run fully."""
    runtime: RuntimeView | None = None
    """What ONNX Runtime / OpenVINO executed per layer (None for torch runs)."""
    layer_errors: LayerErrors | None = None
    """model/layer_errors.json: each layer's output against fp32 torch (None for torch fp32 runs)."""
    gpu: GpuView | None = None
    """The GPU collectors' view (None for CPU runs)."""
    warnings: list[str] = field(default_factory=list)
    """Damage the readers read past (a torn last line) and passes whose figures are unavailable, with why."""
    advice: Advice | None = None
    """advice.json (`hwprof advise`): candidate changes measured against this run; None when absent or
    unreadable (then a warning says why)."""
    doc: RunDoc = field(default_factory=RunDoc)
    """run.json typed (hwprof.schema.run): what renderers read instead of digging into `run`."""
    shown_status: str = ""
    """The run's status as the report shows it (RunData.shown_status: a run left "running" by a killed
    collect says so); "" = run.json's."""
    whole_program: WholeProgram | None = None
    """A user's program that called no model: its whole run's figures (None for any other run)."""
    layer_shapes: LayerShapes | None = None
    """The top-level layers per input shape, where the time pass's forwards had more than one."""
    health: RunHealth = field(default_factory=RunHealth)
    """The passes whose figures may not carry a verdict, with why (hwprof.analysis.health): what every verdict
    asks, the findings here, the gate and the advice's answers on read."""
    memory: MemoryView = field(default_factory=MemoryView)
    """Memory per layer and per forward (hwprof.analysis.layers.memory)."""
    root: str = ""
    """The run directory as it was given (the next steps' commands name it); "" for an analysis made otherwise."""

    @cached_property
    def workload(self) -> WorkloadView:
        """What the run's workload says of itself (hwprof.analysis.workload): what the renderers ask instead of
        which workload ran."""
        return workload_view(self.doc)


def roofline_summary(report: LayerReport) -> RooflineSummary | None:
    roof = report.roof.roof
    if roof is None:
        return None
    top = report.top_level
    flops = sum(r.flops for r in top if r.flops is not None) if any(r.flops is not None for r in top) else None
    nbytes = sum(r.min_bytes for r in top if r.min_bytes is not None) or None
    ai = flops / nbytes if (flops is not None and nbytes) else None
    gflops = flops / report.forward_ms / 1e6 if (flops is not None and report.forward_ms) else None
    timed = any(r.share is not None for r in top)
    by_bound: dict[str, dict[str, float | None]] = {}
    if any(r.bound is not None for r in top):
        for bound in (MEMORY, COMPUTE):
            rows = [r for r in top if r.bound == bound]
            share = sum(r.share or 0.0 for r in rows) if timed else None
            by_bound[bound] = {"layers": len(rows), "share": share}
    unavailable: dict[str, str] = {k: report.missing[k].short() for k in ("flops", "time") if k in report.missing}
    summary = RooflineSummary(
        roof.peak_gflops,
        roof.peak_gbps,
        roof.ridge,
        flops,
        nbytes,
        ai,
        gflops,
        100 * gflops / roof.peak_gflops if gflops is not None else None,
        roof.bound(ai) if ai is not None else None,
        by_bound,
        compute_probe=roof.compute_probe,
        unavailable=unavailable,
    )
    measured = [r.measured_bytes for r in top if r.measured_bytes is not None]
    if measured and flops is not None:
        summary.measured_bytes = sum(measured)
        summary.measured_intensity = flops / summary.measured_bytes if summary.measured_bytes else None
        if summary.measured_intensity is not None:
            summary.bound_measured = roof.bound(summary.measured_intensity)
    return summary


def unavailable_collectors(run: RunDoc) -> dict[str, dict[str, str]]:
    out = {}
    for name, entry in sorted(run.collectors.items()):
        if entry.status != "ok" or entry.reason:
            out[name] = {
                "status": entry.status,
                "reason": str(entry.reason if entry.reason is not None else ""),
                "fix": str(entry.fix if entry.fix is not None else ""),
            }
    return out


def analyse(data: RunData, max_findings: int = 10) -> Analysis:
    data = checked(data)
    layers = build_layer_report(data)
    stages = stage_table(data)
    types = by_type(layers)
    over = overheads(data, layers)
    # on a GPU the torch threads only launch kernels: how many of them are busy is no finding, and the layer
    # hooks time the host launching each layer's kernels; counters of the model's thread alone cannot say it
    on_gpu = data.doc.device != "cpu"
    threads = None if on_gpu or data.doc.summary(PerfEventsSummary).model_thread_only else data.doc.config.threads
    health = run_health(data.doc, layers)
    found = findings(layers, types, stages, over, threads, max_findings, on_gpu, health)
    advice, advice_error = load_advice(data.root)
    gpu = load_gpu_view(data)
    if gpu is not None:
        gpu.types = {r.name: r.type for r in layers.layers}
        found = [replace(f, sources=(GPU,)) for f in gpu_findings(gpu)] + found
    return Analysis(
        stages,
        layers,
        types,
        over,
        roofline_summary(layers),
        found,
        unavailable_collectors(data.doc),
        load_runtime_view(data),
        data.layer_errors(),
        gpu,
        run_warnings(data) + ([advice_error] if advice_error else []),
        advice,
        data.doc,
        data.shown_status,
        whole_program(data),
        layer_shapes(data, layers),
        health,
        memory_view(layers, data),
        str(data.root),
    )


def run_warnings(data: RunData) -> list[str]:
    """What the user must know before trusting any figure: passes whose figures are unavailable, and the
    damage the readers read past (called after the analysis, which is what reads the markers)."""
    out: list[str] = []
    out += [f"{reason}: its figures are unavailable" for reason in data.missing_passes.values()]
    return out + list(data.warnings)


def missing_dict(missing: dict[str, Missing]) -> dict[str, dict[str, str]]:
    return {k: v.to_dict() for k, v in missing.items()}
