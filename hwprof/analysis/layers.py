"""The layer table joined with every per-layer measurement: one row per layer."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from hwprof.core.spans import layer_self_ns, pair_spans

if TYPE_CHECKING:
    from hwprof.rundir.reader import RunData

BASE_COLUMNS = ("index", "name", "type", "from", "params", "flops", "in_bytes", "out_bytes", "weight_bytes")
FLOPS_COLLECTOR = "flops"
"""Its metrics are the table's own columns; other collectors' metrics are prefixed with their name."""


def layer_rows(run: RunData) -> list[dict[str, Any]]:
    info = run.model_info
    rows: list[dict[str, Any]] = []
    by_name: dict[str, dict[str, Any]] = {}
    for layer in info.get("layers", []):
        row = {
            "index": layer["index"],
            "name": layer["name"],
            "type": layer["type"],
            "from": " ".join(str(f) for f in layer["from"]),
            "params": layer["params"],
            "in_bytes": layer["in_bytes"],
            "out_bytes": layer["out_bytes"],
            "weight_bytes": layer["weight_bytes"],
            "out_shape": _shape_text(layer["out_shapes"]),
        }
        rows.append(row)
        by_name[row["name"]] = row
    for collector, tables in sorted(run.metrics().items()):
        for name, metrics in tables.layers.items():
            target = by_name.get(name)
            if target is None:
                continue
            for metric, value in metrics.items():
                key = metric if collector == FLOPS_COLLECTOR else f"{collector}.{metric}"
                target.setdefault(key, value)
    if "layers" in run.pass_names:
        self_ns = layer_self_ns(pair_spans(run.markers("layers")))
        for name, values in self_ns.items():
            if name in by_name and values:
                by_name[name]["time_ms"] = statistics.median(values) / 1e6
    return rows


def _shape_text(shapes: list[list[int]]) -> str:
    """The first output's shape, e.g. "1x64x80x80", with "+N" when the layer returns more tensors."""
    if not shapes:
        return ""
    text = "x".join(map(str, shapes[0]))
    return f"{text} +{len(shapes) - 1}" if len(shapes) > 1 else text
