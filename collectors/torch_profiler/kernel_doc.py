"""torch_profiler.kernels.json: each layer's aten ops ranked by self time, per measured iteration, with the
oneDNN primitives matched to them; and the summary's five ops with the most self time inside layers."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from hwprof.schema.codec import JsonObject
from hwprof.schema.summaries_tools import TopOp

TOP_KERNELS = 10
"""Ops kept per stage outside the layers (every op of a layer is kept)."""


@dataclass
class PrimitiveSums:
    """One oneDNN kernel label's primitives matched to an op: calls, exec time, problem descriptors."""

    label: str
    calls: int = 0
    exec_ms: float = 0.0
    problems: Counter[str] = field(default_factory=Counter)


@dataclass
class OpSums:
    """One aten op's calls in a layer (or a stage outside layers), summed over every iteration."""

    name: str
    calls: int = 0
    self_ns: int = 0
    inclusive_ns: int = 0
    flops: int = 0
    shapes: Counter[str] = field(default_factory=Counter)
    """Input dims as JSON text -> calls."""
    onednn: dict[str, PrimitiveSums] = field(default_factory=dict)


def kernel_doc_json(kernels: dict[str, dict[str, OpSums]], iterations: int, n_iter: int, n_onednn: int) -> JsonObject:
    """The kernels file: each layer's ops ranked by self time (and each stage's top ones outside layers)."""
    ranked: dict[str, list[JsonObject]] = {}
    for key, rows in kernels.items():
        out_rows = [_kernel_row_json(row, n_iter, n_onednn) for row in sorted(rows.values(), key=lambda r: -r.self_ns)]
        ranked[key] = out_rows[:TOP_KERNELS] if key.startswith("stage:") else out_rows
    return {
        "iterations": iterations,
        "units": {
            "self_us": "us per iteration",
            "inclusive_us": "us per iteration",
            "flops": "per iteration",
        },
        "layers": {k: v for k, v in ranked.items() if not k.startswith("stage:")},
        "outside_layers": {k.removeprefix("stage:"): v for k, v in ranked.items() if k.startswith("stage:")},
    }


def _kernel_row_json(row: OpSums, n_iter: int, n_onednn: int) -> JsonObject:
    prims = sorted(row.onednn.values(), key=lambda p: -p.exec_ms)
    return {
        "name": row.name,
        "label": next((p.label for p in prims if not p.label.startswith("reorder")), None),
        "calls": row.calls,
        "calls_per_iter": row.calls / n_iter,
        "self_us": row.self_ns / 1000 / n_iter,
        "inclusive_us": row.inclusive_ns / 1000 / n_iter,
        "flops": row.flops / n_iter,
        "shapes": [json.loads(s) for s, _ in row.shapes.most_common(3)],
        "onednn": [
            {
                "label": p.label,
                "calls": p.calls,
                "exec_ms_per_iter": p.exec_ms / n_onednn,
                "problems": [s for s, _ in p.problems.most_common(3)],
            }
            for p in prims
        ],
    }


def top_kernels_json(layer_ops: Iterable[tuple[str, int]], n_iter: int) -> list[TopOp]:
    """The five ops with the most self time inside layers, per iteration and as a share, from each op's (name,
    self ns) inside a layer."""
    overall: dict[str, float] = defaultdict(float)
    for name, self_ns in layer_ops:
        overall[name] += self_ns
    total = sum(overall.values()) or 1
    return [
        TopOp.of(name=n, self_ms_per_iter=v / 1e6 / n_iter, share=v / total)
        for n, v in sorted(overall.items(), key=lambda kv: -kv[1])[:5]
    ]
