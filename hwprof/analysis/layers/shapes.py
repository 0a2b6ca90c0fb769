"""The layer table per input shape, where the time pass's forwards had more than one (a program such as
YOLOv7's detect.py letterboxes each image to its own stride-aligned shape): each top-level layer's time at each
shape, with its FLOPs and rate at that shape.

The layer table itself takes each layer's share of forward over every iteration, whatever its shape: with two
shapes of different sizes that figure is neither's. Here the iterations are split by the shape the pass's tally
recorded for each (run.json `passes.<pass>.inputs.measured`), and a layer's time at a shape is its mean share
over that shape's iterations times that shape's clean forward (the timing pass's, at that shape, where it saw
it): the layer table's method (hwprof.analysis.layers.report), per shape.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hwprof.core.spans import forward_ms_by_iteration, layer_self_spans, measured_spans
from hwprof.schema.summaries_cpu import FlopsSummary

if TYPE_CHECKING:
    from hwprof.analysis.layers.stats import LayerReport
    from hwprof.rundir.reader import RunData


@dataclass(frozen=True)
class ShapeCell:
    """One layer at one input shape."""

    ms: float | None
    """The layer's mean share of forward over the shape's measured iterations x the shape's clean forward (the
    layer table's method, per shape); None where no iteration of the shape timed it."""
    flops: float | None
    """The layer's FLOPs at this shape (hwprof's flops collector), None where not counted."""

    @property
    def gflops_s(self) -> float | None:
        return self.flops / self.ms / 1e6 if self.flops and self.ms else None


@dataclass
class ShapeLayer:
    index: int
    name: str
    type: str
    cells: dict[str, ShapeCell] = field(default_factory=dict)
    """Input shape -> the layer's figures at it."""

    @property
    def mean_ms(self) -> float:
        """For ranking: the mean of its times at the shapes that timed it."""
        values = [c.ms for c in self.cells.values() if c.ms is not None]
        return sum(values) / len(values) if values else 0.0


@dataclass
class LayerShapes:
    time_pass: str
    shapes: list[str]
    """Input shapes in the order the pass first saw them."""
    iterations: dict[str, int]
    """Shape -> its measured iterations in the time pass."""
    forward_ms: dict[str, float]
    """Shape -> the clean forward its layers' times are shares of (_clean_forward)."""
    layers: list[ShapeLayer]
    """Top-level layers, most time first."""
    flops_counted: bool
    forward_from: dict[str, str] = field(default_factory=dict)
    """Shape -> the pass its clean forward is from: "timing", or the time pass's own (scaled as the layer
    table's) where the timing pass did not see the shape."""

    def top(self, n: int) -> list[ShapeLayer]:
        return self.layers[:n]


def layer_shapes(data: RunData, report: LayerReport) -> LayerShapes | None:
    """The per-shape layer table; None where the time pass saw one input shape (or recorded none)."""
    name = report.time_pass
    by_iteration = _shapes_by_iteration(data, name) if name is not None else {}
    if name is None or len(set(by_iteration.values())) < 2:
        return None
    spans = measured_spans(data.markers(name))
    forward_ns = {s.iteration: s.dur_ns for s in spans if s.kind == "stage" and s.name == "forward"}
    shares: dict[tuple[str, str], list[float]] = defaultdict(list)
    for span, ns in layer_self_spans(spans):
        shape = by_iteration.get(span.iteration)
        if shape is not None and forward_ns.get(span.iteration):
            shares[(span.name, shape)].append(ns / forward_ns[span.iteration])
    entry = data.doc.passes[name]
    shapes = [s for s in (entry.inputs.shapes if entry.inputs else {}) if s in set(by_iteration.values())]
    forward = _clean_forward(data, name, by_iteration, forward_ns, report)
    flops = _layer_flops(data)
    rows = []
    for stat in report.top_level:
        row = ShapeLayer(stat.index, stat.name, stat.type)
        for shape in shapes:
            values, fwd = shares.get((stat.name, shape)), forward.get(shape, (0.0, ""))[0]
            counted = flops.get(shape)  # a layer that does no arithmetic is absent from the count: 0 FLOPs
            row.cells[shape] = ShapeCell(
                statistics.fmean(values) * fwd if values and fwd else None,
                counted.get(stat.name, 0.0) if counted is not None else None,
            )
        rows.append(row)
    rows.sort(key=lambda r: (-r.mean_ms, r.index))
    counts = Counter(by_iteration.values())
    return LayerShapes(
        name,
        shapes,
        {s: counts[s] for s in shapes},
        {s: ms for s, (ms, _) in forward.items()},
        rows,
        bool(flops),
        {s: from_pass for s, (_, from_pass) in forward.items()},
    )


def _shapes_by_iteration(data: RunData, pass_name: str) -> dict[int, str]:
    """The pass's measured iteration -> its input shape; empty where it recorded one shape (or none)."""
    entry = data.doc.passes.get(pass_name)
    inputs = entry.inputs if entry is not None else None
    return inputs.by_iteration()[0] if inputs is not None and inputs.mixed else {}


def _clean_forward(
    data: RunData, source: str, by_iteration: dict[int, str], forward_ns: dict[int, int], report: LayerReport
) -> dict[str, tuple[float, str]]:
    """Shape -> (the clean forward (ms) its layers' shares are taken of, the pass it is from), as the layer table's
    are: the timing pass's forward p50 at that shape; without one, the source pass's own there, scaled likewise."""
    timing: dict[str, list[float]] = defaultdict(list)
    if "timing" in data.pass_names and source != "timing":
        timing_shapes = _shapes_by_iteration(data, "timing")
        for iteration, fwd_ms in forward_ms_by_iteration(data.markers("timing")).items():
            if iteration in timing_shapes:
                timing[timing_shapes[iteration]].append(fwd_ms)
    own: dict[str, list[float]] = defaultdict(list)
    for iteration, ns in forward_ns.items():
        if iteration in by_iteration:
            own[by_iteration[iteration]].append(ns / 1e6)
    scale = report.scale if report.scale is not None else 1.0
    return {
        shape: (statistics.median(timing[shape]), "timing")
        if timing.get(shape)
        else (statistics.median(values) * scale, source)
        for shape, values in own.items()
    }


def _layer_flops(data: RunData) -> dict[str, dict[str, float]]:
    """Shape -> top-level layer -> FLOPs, from the flops collector's summary (empty where it did not count)."""
    summary = data.doc.summary(FlopsSummary)
    by_shape = summary.layer_flops_by_shape or {}
    return {
        str(shape): {str(k): float(v) for k, v in layers.items() if isinstance(v, int | float)}
        for shape, layers in by_shape.items()
        if isinstance(layers, dict)
    }
