"""The "layers by input shape" table: the top layers' times (and rates) at each input shape the forwards had,
where there was more than one (hwprof.analysis.layers.shapes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwprof.render.fmt import ms, sig
from hwprof.render.tables import MISSING, Col, TableSpec

if TYPE_CHECKING:
    from hwprof.analysis.layers.shapes import LayerShapes
    from hwprof.analysis.run_analysis import Analysis

MAX_SHAPES = 3
"""Shapes given columns (the most frequent); the others are named in a note."""


def layer_shapes_spec(a: Analysis, top: int) -> TableSpec | None:
    shapes_view = a.layer_shapes
    if shapes_view is None or not shapes_view.layers:
        return None
    shown = sorted(shapes_view.shapes, key=lambda s: -shapes_view.iterations.get(s, 0))[:MAX_SHAPES]
    shown = [s for s in shapes_view.shapes if s in shown]  # first-seen order
    rate = shapes_view.flops_counted
    cols = [Col("layer", "left"), Col("type", "left", priority=3, max_width=14)]
    labels = _labels(shown)
    for shape in shown:
        cols.append(Col(f"{labels[shape]} ms"))
        if rate:
            cols.append(Col(f"{labels[shape]} GFLOP/s", priority=2))
    rows = [_forward_row(shapes_view, shown, rate)]
    for layer in shapes_view.top(top):
        row = [layer.name, layer.type]
        for shape in shown:
            cell = layer.cells.get(shape)
            row.append(ms(cell.ms) if cell is not None and cell.ms is not None else MISSING)
            if rate:
                row.append(sig(cell.gflops_s) if cell is not None and cell.gflops_s is not None else MISSING)
        rows.append(row)
    return TableSpec(f"top {len(rows) - 1} layers by input shape", cols, rows, _notes(shapes_view, shown))


def _labels(shapes: list[str]) -> dict[str, str]:
    """A column's shape, short: "320x256" where every shape has the same leading dimensions (batch, channels)."""
    parts = [s.split("x") for s in shapes]
    if all(len(p) == 4 for p in parts) and len({tuple(p[:2]) for p in parts}) == 1:
        return {s: "x".join(p[2:]) for s, p in zip(shapes, parts, strict=True)}
    return {s: s for s in shapes}


def _forward_row(view: LayerShapes, shown: list[str], rate: bool) -> list[str]:
    row = ["forward", "(stage)"]
    for shape in shown:
        row.append(ms(view.forward_ms.get(shape)))
        if rate:
            row.append("")
    return row


def _notes(view: LayerShapes, shown: list[str]) -> list[str]:
    counts = ", ".join(f"{s} {view.iterations.get(s, 0)}" for s in view.shapes)
    notes = [
        f"the {view.time_pass} pass's forwards had {len(view.shapes)} input shapes; its measured iterations per "
        f"shape: {counts}",
        "each layer: its mean share of forward over one shape's iterations x that shape's clean forward (the "
        "timing pass's at that shape where it saw it): the layer table's method, which mixes the shapes",
    ]
    own = [s for s in shown if view.forward_from.get(s, "timing") != "timing"]
    if own:
        notes.append(
            f"the timing pass saw no forward at {', '.join(own)}: its clean forward there is the {view.time_pass} "
            "pass's own, scaled as the layer table's (an estimate)"
        )
    others = [s for s in view.shapes if s not in shown]
    if others:
        notes.append(f"shapes without a column (fewer iterations): {', '.join(others)}")
    if not view.flops_counted:
        notes.append("GFLOP/s per shape: unavailable (the flops collector did not count the other shapes)")
    return notes
