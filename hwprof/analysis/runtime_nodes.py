"""What a non-torch runtime executed, per model layer: pure functions over `runtime_nodes.json`.

A runtime (ONNX Runtime, OpenVINO) runs a graph of its own nodes. Each pass that profiled it
writes `passes/<pass>/runtime_nodes.json`: every executed node with its kernel (ORT's op and
NCHWc variant, OpenVINO's exec type such as `brgconv_avx512_bf16`), provider, precision, the
model layers its original ONNX nodes came from, and its median time per iteration. A node fused
from several layers keeps all of them and is shown as a fused group, never charged to one layer.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from hwprof.schema.pass_files import RuntimeFile
from hwprof.schema.records import NODES_FILE, NodeRow

if TYPE_CHECKING:
    from hwprof.rundir.reader import RunData

TOP_NODE_KERNELS = 3
PASS_PREFERENCE = ("layers", "kernels", "trace", "scalene")


@dataclass
class LayerNodes:
    """One model layer as the runtime ran it."""

    layer: str
    time_ms: float
    """Sum of the median times of its own nodes (fused groups across layers excluded)."""
    nodes: int
    kernels: list[tuple[str, float]]
    """(kernel, share of the layer's node time), most first."""
    precision: str
    """"bf16", or "mixed: bf16 80%, fp32 20%" by node time."""
    provider: str
    fused_groups: list[str] = field(default_factory=list)
    """Names of cross-layer fused nodes this layer takes part in."""

    @property
    def top_kernel(self) -> str:
        return self.kernels[0][0] if self.kernels else ""


@dataclass
class FusedGroup:
    """A runtime node made from the nodes of several model layers."""

    node: str
    layers: list[str]
    kernel: str
    time_ms: float


@dataclass
class RuntimeView:
    runtime: str
    precision: str
    """What executed (runtime.json's executed_precision)."""
    source_pass: str
    layers: dict[str, LayerNodes]
    fused: list[FusedGroup]
    unattributed_ms: float
    """Nodes of no layer (graph input/output handling)."""
    total_ms: float
    info: RuntimeFile = field(default_factory=RuntimeFile)
    """The pass's runtime.json."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _precision_text(times: dict[str, float]) -> str:
    total = sum(times.values())
    if not times or total <= 0:
        return next(iter(times), "")
    ranked = sorted(times.items(), key=lambda kv: -kv[1])
    if len(ranked) == 1 or ranked[0][1] / total > 0.99:
        return ranked[0][0]
    return "mixed: " + ", ".join(f"{p} {100 * t / total:.0f}%" for p, t in ranked if t / total >= 0.01)


def layer_nodes(rows: list[NodeRow]) -> tuple[dict[str, LayerNodes], list[FusedGroup], float]:
    """Per-layer node tables, the cross-layer fused groups, and the ms of nodes of no layer."""
    own: dict[str, list[NodeRow]] = defaultdict(list)
    fused: list[FusedGroup] = []
    groups_of: dict[str, list[str]] = defaultdict(list)
    unattributed = 0.0
    for row in rows:
        if not row.layers:
            unattributed += row.median_us / 1e3
        elif len(row.layers) == 1:
            own[row.layers[0]].append(row)
        else:
            fused.append(FusedGroup(row.name, list(row.layers), row.kernel, row.median_us / 1e3))
            for layer in row.layers:
                groups_of[layer].append(row.name)
    out: dict[str, LayerNodes] = {}
    for layer in sorted(set(own) | set(groups_of), key=_layer_key):
        nodes = own.get(layer, [])
        total = sum(r.median_us for r in nodes)
        by_kernel: dict[str, float] = defaultdict(float)
        by_precision: dict[str, float] = defaultdict(float)
        providers: dict[str, float] = defaultdict(float)
        for r in nodes:
            by_kernel[r.kernel] += r.median_us
            by_precision[r.precision] += r.median_us
            providers[r.provider] += r.median_us
        kernels = sorted(by_kernel.items(), key=lambda kv: -kv[1])[:TOP_NODE_KERNELS]
        out[layer] = LayerNodes(
            layer=layer,
            time_ms=total / 1e3,
            nodes=len(nodes),
            kernels=[(k, t / total if total else 0.0) for k, t in kernels],
            precision=_precision_text(dict(by_precision)),
            provider=max(providers, key=lambda p: providers[p]) if providers else "",
            fused_groups=groups_of.get(layer, []),
        )
    fused.sort(key=lambda g: -g.time_ms)
    return out, fused, unattributed


def _layer_key(name: str) -> tuple[int, str]:
    parts = name.split(".")
    return (int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 1 << 30, name)


def load_runtime_view(data: RunData) -> RuntimeView | None:
    """The runtime's per-layer view from the first profiled pass (layers pass first), or None for torch."""
    names = [p for p in PASS_PREFERENCE if p in data.pass_names]
    names += [p for p in data.pass_names if p not in names]
    for name in names:
        doc = data.pass_json(name, NODES_FILE)
        if doc is None:
            continue
        info = data.runtime_file(name) or RuntimeFile()
        rows = [NodeRow.from_dict(d) for d in doc.get("nodes", [])]
        layers, fused, unattributed = layer_nodes(rows)
        return RuntimeView(
            runtime=str(doc.get("runtime", info.runtime or "")),
            precision=info.executed_precision or "",
            source_pass=name,
            layers=layers,
            fused=fused,
            unattributed_ms=unattributed,
            total_ms=sum(r.median_us for r in rows) / 1e3,
            info=info,
        )
    return None
