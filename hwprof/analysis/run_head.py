"""One run as a comparison heads it (RunHead): what ran (model, sizes, runtime, precision, machine, software),
its headline figures, what executed and its output against torch fp32, and where its layer times and per-layer
kernels come from. The comparison (hwprof.analysis.compare) puts one per run above its rows; the performance gate
(hwprof.analysis.gate.inputs) takes a run's identity and its layers' kernels from here."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from hwprof.analysis.layers.stats import LayerStat
from hwprof.analysis.program.facts import INFERENCE, program_facts
from hwprof.analysis.run_analysis import Analysis
from hwprof.core.host_kinds import host_kind, software
from hwprof.core.kernels import KIND_OPENMP
from hwprof.schema.run import RunDoc, RuntimeDoc
from hwprof.schema.runtime_checks import OutputDiff

REFERENCE = ("torch", "fp32")
"""The (runtime, precision) every output difference is measured against."""


@dataclass
class RunHead:
    run_id: str
    path: str
    model: str | None
    imgsz: int | None
    batch: int | None
    threads: int | None
    cpu_model: str | None
    forward_ms: float | None
    iteration_ms: float | None
    fps: float | None
    gflops: float | None
    params_fused: int | None
    pct_peak: float | None
    intensity: float | None
    bound: str | None
    j_per_image: float | None
    runtime: str = "torch"
    runtime_version: str | None = None
    precision: str = "fp32"
    """Asked for (config.precision)."""
    executed_precision: str | None = None
    """What executed, as the runtime reported it (run.json runtime.executed_precision)."""
    precision_detail: str | None = None
    output_diff: OutputDiff | None = None
    """run.json runtime.output_diff: max_abs_head, detections, detections_reference against torch fp32."""
    model_bytes: int | None = None
    """torch: parameter bytes as executed; other runtimes: the model file they loaded."""
    model_file: str | None = None
    kernel_source: str = ""
    """Where the per-layer kernel of this run comes from, or why there is none."""
    random_init: bool = False
    """Seeded random weights: detections are meaningless and the head barely depends on the precision."""
    host_kind: str = ""
    """The kind of machine (CPU model, logical CPUs, widest ISA): hwprof.core.host_kinds.HostKind.label."""
    versions: dict[str, str] = field(default_factory=dict)
    """torch, the runtime (when not torch), Python and hwprof versions."""
    status: str = "complete"
    """run.json's status: a run that is not complete is marked in the header."""
    layer_times: str = ""
    """Which pass the layer times come from ("layers pass"), or why there are none."""
    warnings: list[str] = field(default_factory=list)
    """The run's warnings (passes whose figures are unavailable, torn files): Analysis.warnings."""
    inference_fps: float | None = None
    """Batch / forward p50: the forward alone (seed 004's "inference speed" beside the end-to-end FPS)."""
    source: str = "images"
    """What the frames were read from: "images", or "video NAME"; with "+ annotated" when they were written."""
    unfit: dict[str, str] = field(default_factory=dict)
    """The run's passes whose figures may not carry a verdict, with why (hwprof.analysis.health)."""
    time_pass: str | None = None
    """The pass its layer times come from."""
    measured: str = INFERENCE
    """What its forwards were (hwprof.analysis.program.facts): inference, or a program's forward + backward or
    forward with grad on."""
    step_fps: float | None = None
    """A program's training step: batch / (forward p50 + backward p50); None for any other run."""
    program_threads: str | None = None
    """The torch thread counts a program set itself for its measured calls ("1,2"), where not `threads`."""

    @property
    def is_reference(self) -> bool:
        return (self.runtime, self.precision) == REFERENCE and self.executed_precision in (None, "fp32")

    def to_dict(self) -> dict[str, Any]:
        """compare's JSON: the fields, with output_diff as run.json holds it."""
        out = asdict(replace(self, output_diff=None))
        out["output_diff"] = self.output_diff.to_json() if self.output_diff is not None else None
        return out


def kernel_source(a: Analysis) -> str:
    """Where a run's per-layer kernels come from, or why it has none."""
    view = a.runtime
    if view is not None:
        profiler = view.info.profiler or f"{view.runtime}'s profiler"
        return f"the runtime's node kinds ({profiler}, {view.source_pass} pass)"
    runtime = (a.doc.runtime.name if a.doc.runtime else None) or a.doc.config.runtime or "torch"
    if runtime != "torch":
        return f"not recorded: no pass profiled {runtime} (its profiler runs in the layers pass)"
    if any(r.native is not None for r in a.layers.layers):
        return "perf samples (kernels pass): the layer's most sampled native kernel outside the OpenMP runtime"
    missing = a.layers.missing.get("native")
    return f"not recorded: {missing.short() if missing else 'no kernels pass'}"


def layer_kernel(a: Analysis, stat: LayerStat) -> tuple[str, list[str]]:
    """The kernel that ran most of a layer in this run, and the fused nodes the layer takes part in."""
    view = a.runtime
    if view is not None:
        nodes = view.layers.get(stat.name)
        if nodes is None:
            return "", []
        kernel = nodes.top_kernel or next((g.kernel for g in view.fused if g.node in nodes.fused_groups), "")
        return kernel, list(nodes.fused_groups)
    busy = next((k for k in stat.native.kernels if k.kind != KIND_OPENMP), None) if stat.native else None
    return (busy.name if busy else ""), []


def head(a: Analysis, path: Path) -> RunHead:
    run = a.doc
    model, cfg = run.model, run.config
    fwd = a.stages.get("forward")
    whole = a.stages.get("iteration")
    roof = a.roofline
    runtime = run.runtime or RuntimeDoc()
    facts = program_facts(run, a.stages)
    return RunHead(
        run_id=str(run.run_id if run.run_id is not None else path.name),
        path=str(path),
        model=model.name or cfg.model,
        imgsz=a.workload.imgsz,
        batch=a.workload.batch,
        threads=cfg.threads,
        cpu_model=run.host.cpu_model,
        forward_ms=fwd.p50_ms if fwd else None,
        iteration_ms=whole.p50_ms if whole else None,
        fps=run.fps,
        gflops=model.gflops,
        params_fused=model.params_fused,
        pct_peak=roof.pct_peak if roof else None,
        intensity=roof.intensity if roof else None,
        bound=roof.bound if roof else None,
        j_per_image=a.stages.j_per_image,
        runtime=str(runtime.name or cfg.runtime or REFERENCE[0]),
        runtime_version=runtime.version,
        precision=str(runtime.precision or cfg.precision or REFERENCE[1]),
        executed_precision=runtime.executed_precision,
        precision_detail=runtime.precision_detail,
        output_diff=runtime.output_diff,
        model_bytes=runtime.model_bytes,
        model_file=runtime.model_file,
        kernel_source=kernel_source(a),
        random_init=bool(model.random_init),
        host_kind=host_kind(run.host.to_json()).label if run.host else "",
        inference_fps=a.stages.inference_fps,
        source=input_source(run),
        versions=software(run.host.to_json(), runtime.to_json()) if run.host else {},
        status=a.shown_status or str(run.status or "?"),
        layer_times=layer_times_source(a),
        warnings=list(a.warnings),
        unfit=dict(a.health.unfit),
        time_pass=a.layers.time_pass,
        measured=facts.mode,
        step_fps=facts.step_fps(a.stages.batch, fwd.p50_ms) if fwd else None,
        program_threads=",".join(map(str, sorted(facts.threads))) if facts.threads_set else None,
    )


def layer_times_source(a: Analysis) -> str:
    """The pass a run's layer times come from, or why it has none (never "None")."""
    if a.layers.time_pass is not None and a.layers.time_iterations:
        return f"{a.layers.time_pass} pass"
    missing = a.layers.missing.get("time")
    return missing.short() if missing else "unavailable: no layer times"


def input_source(run: RunDoc) -> str:
    """A run's input in a word or two ("video clip.mp4 + annotated", "images", "the program's own", "the service's
    traffic")."""
    program = run.config.program
    if program is not None:
        return "the service's traffic" if program.attached is not None else "the program's own"
    video = run.video
    text = f"video {Path(video.path or '?').name}" if video is not None else "images"
    return text + (" + annotated" if run.config.annotate else "")
