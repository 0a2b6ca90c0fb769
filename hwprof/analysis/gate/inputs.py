"""What the performance gate reads of a run directory (hwprof.analysis.gate.judge): the timing pass's forward and
iteration per measured iteration, the layer-time pass's self time per layer and iteration, and callgrind's
counts per layer and for the forward."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.analysis.gate.judge import GateRun, LayerSamples
from hwprof.analysis.gate.verdict import GateError
from hwprof.analysis.layers.times import time_scale
from hwprof.analysis.run_head import head, layer_kernel
from hwprof.core.spans import durations_ms, forward_ms_by_iteration, measured_spans

if TYPE_CHECKING:
    from hwprof.analysis.run_analysis import Analysis
    from hwprof.rundir.reader import RunData

CALLGRIND = "callgrind"


def check_finished(data: RunData, side: str) -> None:
    """A run still running (or left running by a killed collect) cannot be gated: GateError."""
    status = data.shown_status or str(data.doc.status or "?")
    if data.doc.status == "running":
        raise GateError(f"{side} ({data.root}) is {status}: a run still being collected cannot be gated")


def timing_samples(data: RunData) -> tuple[list[float], list[float]]:
    """Forward and whole-iteration ms per measured iteration of the clean timing pass (empty without one)."""
    if "timing" not in data.pass_names:
        return [], []
    markers = data.markers("timing")
    forward = forward_ms_by_iteration(markers)
    iteration = durations_ms(measured_spans(markers), "iteration").get("iteration", [])
    return [forward[i] for i in sorted(forward)], list(iteration)


def layer_samples(data: RunData, a: Analysis) -> tuple[dict[str, LayerSamples], str | None]:
    """Each layer's self ms per measured iteration of the layer-time pass (the pass the report's layer times
    come from), its share of forward as the report states it, and its kernel."""
    ts = time_scale(data)
    its = ts.its
    if ts.source is None or not its:
        return {}, None
    out = {}
    for stat in a.layers.layers:
        ns = [ts.times.self_ns[i].get(stat.name, 0) for i in its]
        if not any(ns):
            continue
        shares = [n / ts.times.forward_ns[i] for n, i in zip(ns, its, strict=True)]
        out[stat.name] = LayerSamples(stat.type, [n / 1e6 for n in ns], stat.share, layer_kernel(a, stat)[0], shares)
    return out, ts.source


def callgrind_counts(data: RunData) -> dict[str, dict[str, float]] | None:
    """callgrind's mean counts per measured iteration: "forward" and each layer -> event -> count; None when the
    run has no callgrind tables (collect with --counters callgrind)."""
    tables = data.metrics().get(CALLGRIND)
    if tables is None or not data.entry(CALLGRIND).ran:
        return None
    out = {name: dict(row) for name, row in tables.layers.items()}
    forward = tables.stage("forward")
    if forward:
        out["forward"] = dict(forward)
    return out


def gate_run(data: RunData, a: Analysis, side: str) -> GateRun:
    check_finished(data, side)
    h = head(a, Path(data.root))
    forward, iteration = timing_samples(data)
    layers, source = layer_samples(data, a)
    identity = {
        "model": str(h.model),
        "imgsz": str(h.imgsz),
        "batch": str(h.batch),
        "runtime": h.runtime,
        "precision": h.executed_precision or h.precision,
        "threads": str(h.threads),
    }
    counts = callgrind_counts(data)
    return GateRun(str(data.root), forward, iteration, layers, source, counts, identity, dict(a.health.unfit))
