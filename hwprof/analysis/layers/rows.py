"""The layer table joined with every per-layer measurement: one row per layer."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hwprof.core.spans import layer_self_ns, pair_spans

if TYPE_CHECKING:
    from hwprof.rundir.reader import RunData
    from hwprof.schema.pass_files import LayerEntry

BASE_COLUMNS = ("index", "name", "type", "from", "params", "flops", "in_bytes", "out_bytes", "weight_bytes")
FLOPS_COLLECTOR = "flops"
"""Its metrics are the table's own columns; other collectors' metrics are prefixed with their name."""
TABLE_COLUMNS = ("index", "name", "type", "from", "params", "in_bytes", "out_bytes", "weight_bytes", "out_shape")
"""The layer table's own columns, in order; a metric of the same name does not replace one."""


@dataclass
class LayerRow:
    """One layer: its model.json entry, every collector's per-layer metric and its median self time."""

    index: int
    name: str
    type: str
    from_edges: str
    """The input layers' indices, space-separated ("-1 6")."""
    params: int | None
    in_bytes: int | None
    out_bytes: int | None
    weight_bytes: int | None
    out_shape: str
    metrics: dict[str, float] = field(default_factory=dict)
    """Column -> value, in the collectors' name order: flops' own metrics bare ("flops", "min_bytes"),
    the others' as "<collector>.<metric>"."""
    time_ms: float | None = None
    """Median self time over the layers pass's measured iterations (None without a layers pass)."""

    @classmethod
    def of(cls, layer: LayerEntry) -> LayerRow:
        return cls(
            layer.index,
            layer.name,
            layer.type,
            " ".join(str(f) for f in layer.from_edges),
            layer.params,
            layer.in_bytes,
            layer.out_bytes,
            layer.weight_bytes,
            _shape_text(layer.out_shapes),
        )

    def columns(self) -> Iterator[tuple[str, object]]:
        """Every column and its value in table order (the table's own, the metrics, then time_ms), as the
        trace's layer slices show them."""
        yield from (
            ("index", self.index), ("name", self.name), ("type", self.type), ("from", self.from_edges),
            ("params", self.params), ("in_bytes", self.in_bytes), ("out_bytes", self.out_bytes),
            ("weight_bytes", self.weight_bytes), ("out_shape", self.out_shape),
        )  # fmt: skip
        for key, value in self.metrics.items():
            yield key, (self.time_ms if key == "time_ms" and self.time_ms is not None else value)
        if self.time_ms is not None and "time_ms" not in self.metrics:
            yield "time_ms", self.time_ms


def layer_rows(run: RunData) -> list[LayerRow]:
    rows = [LayerRow.of(layer) for layer in run.model_file.layers]
    by_name = {row.name: row for row in rows}
    for collector, tables in sorted(run.metrics().items()):
        for name, metrics in tables.layers.items():
            target = by_name.get(name)
            if target is None:
                continue
            for metric, value in metrics.items():
                key = metric if collector == FLOPS_COLLECTOR else f"{collector}.{metric}"
                if key not in TABLE_COLUMNS:
                    target.metrics.setdefault(key, value)
    if "layers" in run.pass_names:
        self_ns = layer_self_ns(pair_spans(run.markers("layers")))
        for name, values in self_ns.items():
            if name in by_name and values:
                by_name[name].time_ms = statistics.median(values) / 1e6
    return rows


def _shape_text(shapes: list[list[int]]) -> str:
    """The first output's shape, e.g. "1x64x80x80", with "+N" when the layer returns more tensors."""
    if not shapes:
        return ""
    text = "x".join(map(str, shapes[0]))
    return f"{text} +{len(shapes) - 1}" if len(shapes) > 1 else text
