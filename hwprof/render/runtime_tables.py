"""The report's runtime sections: what ran the forward, its output against torch fp32, and what
ONNX Runtime / OpenVINO executed per layer (kernel, ISA and precision, fused groups)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwprof.render.fmt import ms, pct, sig
from hwprof.render.tables import Col, TableSpec
from hwprof.schema.run import RuntimeDoc
from hwprof.schema.runtime_checks import BLIND, OutputDiff, verdict_text

if TYPE_CHECKING:
    from hwprof.analysis.layers.stats import LayerStat
    from hwprof.analysis.run_analysis import Analysis
    from hwprof.analysis.runtime_nodes import LayerNodes, RuntimeView

RUNTIME_LAYERS = 12
FUSED_GROUPS = 8
ERROR_LAYERS = 8


def output_diff_text(diff: OutputDiff | None) -> str:
    """The output check a reduced-precision result is never shown without."""
    if not diff:
        return "output vs torch fp32: not measured"
    if diff.detections is None:
        return diff.reference or ""
    raw = (
        f", raw maps max |Δ| {sig(diff.max_abs_raw)} of values up to {sig(diff.max_abs_raw_reference)}"
        if diff.max_abs_raw is not None
        else ""
    )
    sqnr = f" (SQNR {diff.sqnr_raw_db:.0f} dB)" if diff.sqnr_raw_db is not None else ""
    seen = verdict_text(diff.verdict, diff.max_abs_head, diff.sensitivity_head)
    return (
        f"output vs torch fp32: {seen + '; ' if seen else ''}head max |Δ| {sig(diff.max_abs_head)} of values up to "
        f"{sig(diff.max_abs_reference)}{raw}{sqnr}, detections {diff.detections} vs {diff.detections_reference}"
    )


def runtime_line(info: RuntimeDoc | None) -> tuple[str, str] | None:
    """The report header's "runtime" line, from run.json's "runtime"."""
    if not info:
        return None
    name = info.name or info.runtime or "?"
    executed = info.executed_precision or "?"
    asked = info.precision or "?"
    precision = executed if executed == asked else f"{executed} (asked {asked})"
    where = f", {info.model_file} sha256 {(info.model_sha256 or '')[:12]}" if info.model_file else ""
    provider = f" ({info.provider})" if info.provider else ""
    glue = (
        f"; torch glue (preprocess, NMS) on {info.glue_threads} thread(s): torch's idle OpenMP threads would spin "
        "into the forward"
        if info.glue_threads is not None
        else ""
    )
    return (
        "runtime",
        f"{name} {info.version or ''}{provider}, {precision}{where}; {output_diff_text(info.output_diff)}{glue}",
    )


def _clock_note(info: RuntimeDoc) -> str:
    clock = info.clock
    for entry in (info.profiled_passes or {}).values():
        clock = clock or entry.clock
    if clock is None or clock.error_bound_us is None:
        return ""
    return f"layer spans placed on the run's clock: {clock.method}; error bound {sig(clock.error_bound_us)} µs"


def runtime_layers_spec(a: Analysis) -> TableSpec | None:
    view = a.runtime
    if view is None:
        return None
    cols = [
        Col("layer", "left", max_width=14),
        Col("node ms"),
        Col("nodes", priority=2),
        Col("kernel", "left", max_width=40),
        Col("share", priority=1),
        Col("precision", "left", max_width=22),
        Col("fused with", "left", priority=2, max_width=24),
    ]
    stats = {layer.name: layer for layer in a.layers.layers}
    ranked = sorted(view.layers.values(), key=lambda n: -n.time_ms)[:RUNTIME_LAYERS]
    rows = [_runtime_layer_row(view, nodes, stats.get(nodes.layer)) for nodes in ranked]
    title = f"runtime nodes per layer ({view.runtime}, {view.precision})"
    return TableSpec(title, cols, rows, _runtime_layers_notes(a, view))


def _runtime_layer_row(view: RuntimeView, nodes: LayerNodes, stat: LayerStat | None) -> list[str]:
    """A layer's runtime nodes: their time, the kind that took most of it, the layers fused with it."""
    label = f"{nodes.layer.removeprefix('model.')} {stat.type}" if stat else nodes.layer
    kernel, share = nodes.kernels[0] if nodes.kernels else ("(only fused nodes)", 0.0)
    fused = {layer for g in view.fused if g.node in nodes.fused_groups for layer in g.layers} - {nodes.layer}
    return [
        label,
        ms(nodes.time_ms),
        str(nodes.nodes),
        kernel,
        pct(share) if nodes.kernels else "",
        nodes.precision,
        ", ".join(sorted(fused)),
    ]


def _runtime_layers_notes(a: Analysis, view: RuntimeView) -> list[str]:
    """How the node times were measured, which layers have no node of their own, how spans were placed."""
    notes = [
        f"node ms = median per iteration of the runtime's own node times ({view.source_pass} pass, "
        f"{view.info.profiler or 'its profiler'}); kernel = the node kind that took most of the layer; "
        f"nodes of no layer: {ms(view.unattributed_ms)} ms of {ms(view.total_ms)} ms",
        "per-layer counters: unavailable under this runtime (it runs the graph without a callback per layer; "
        "its layer spans are replayed from its profiler, so no counter is read at them); per-stage counters, "
        "sysstat, RAPL, py-spy and perf samples still fall into these spans by time",
    ]
    absent = [layer.name for layer in a.layers.top_level if layer.name not in view.layers]
    if absent:
        notes.append(
            f"no node of their own ({len(absent)}): "
            + ", ".join(name.removeprefix("model.") for name in absent)
            + " (folded away by the runtime's graph optimisations)"
        )
    only_fused = [n.layer.removeprefix("model.") for n in view.layers.values() if not n.nodes and n.fused_groups]
    if only_fused:
        notes.append(f"fused away into nodes of other layers: {', '.join(only_fused)} (see 'fused across layers')")
    clock = _clock_note(a.doc.runtime or RuntimeDoc())
    if clock:
        notes.append(clock)
    return notes


def fused_spec(a: Analysis) -> TableSpec | None:
    view = a.runtime
    if view is None or not view.fused:
        return None
    cols = [Col("node", "left", max_width=44), Col("layers", "left", max_width=24), Col("kernel", "left"), Col("ms")]
    rows = [
        [g.node, ", ".join(x.removeprefix("model.") for x in g.layers), g.kernel, ms(g.time_ms)]
        for g in view.fused[:FUSED_GROUPS]
    ]
    total = sum(g.time_ms for g in view.fused)
    notes = [
        f"{len(view.fused)} runtime nodes fused from several layers, {ms(total)} ms per iteration: "
        "not charged to any one layer (their layers' times exclude them)"
    ]
    return TableSpec(f"fused across layers ({view.runtime})", cols, rows, notes)


def layer_errors_spec(a: Analysis) -> TableSpec | None:
    """The layers whose outputs moved most from fp32 torch under this run's runtime and precision."""
    doc = a.layer_errors
    if not doc:
        return None
    errors = doc.layers
    stats = {layer.name: layer for layer in a.layers.layers}
    ranked = sorted(errors.items(), key=lambda kv: -kv[1].relative)[:ERROR_LAYERS]
    sensed = any(e.sensitivity is not None for e in errors.values())
    cols = [Col("layer", "left", max_width=14), Col("max |Δ|"), Col("max |ref|"), Col("relative")]
    cols += [Col("input sens."), Col("check", "left")] if sensed else []
    rows = [
        [
            f"{name.removeprefix('model.')} {stats[name].type}" if name in stats else name,
            f"{e.max_abs:.3g}",
            f"{e.max_abs_reference:.3g}",
            pct(e.relative),
            *([sig(e.sensitivity), e.verdict or ""] if sensed else []),
        ]
        for name, e in ranked
    ]
    worst = max((e.relative for e in errors.values()), default=0.0)
    notes = [f"{len(errors)} layers compared; {doc.method or ''}; relative = max |Δ| / max |ref|; worst {pct(worst)}"]
    blind = [name.removeprefix("model.") for name, e in errors.items() if e.verdict == BLIND]
    if blind:
        notes.append(
            f"blind: {len(blind)} layers' outputs do not depend on their input (input sens. below "
            f"1e-4 of max |ref|), so their check could not have failed: {', '.join(blind[:12])}"
        )
    title = f"layer outputs vs torch fp32 ({doc.runtime}, {doc.precision}), largest first"
    return TableSpec(title, cols, rows, notes)
