"""Runtime graph nodes back to model layers, and their spans back to layer markers (pure).

`torch.onnx.export` keeps module scopes in node names (`/model.2/cv1/conv/Conv`), and the
runtimes keep those names (ORT: `/model.2/cv1/conv/Conv_output_0_nchwc`; OpenVINO lists the
ONNX names a node was fused from). A node whose originals span several layers is a fused group
and belongs to all of them. Nodes the runtime inserted (layout reorders) carry no scope of
their own and are charged to the layer that runs next, marked as inserted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from hwprof.core.markers import Marker

_SCOPE = re.compile(r"(?:^|/|_)model\.(\d+)(?:/([A-Za-z_][\w.]*?))?(?=/|$)")


@dataclass(frozen=True)
class Scope:
    layer: str
    """"model.7"."""
    child: str | None
    """"model.7.cv1", or None when the node sits directly in the layer."""


def scope_of(node_name: str) -> Scope | None:
    """The model layer (and depth-2 child) an exported node name belongs to, if any."""
    match = _SCOPE.search(node_name)
    if match is None:
        return None
    layer = f"model.{match.group(1)}"
    child = match.group(2)
    if child is None or not _is_module_name(child):
        return Scope(layer, None)
    return Scope(layer, f"{layer}.{child.split('.')[0]}")


def _is_module_name(part: str) -> bool:
    """Module attribute names are lower-case (cv1, m.0, conv); op names are CamelCase (Conv, Mul_1)."""
    return part[:1].islower()


@dataclass
class NodeSpan:
    """One executed node in one run, on the run's clock."""

    name: str
    start_ns: int
    end_ns: int
    layers: tuple[str, ...] = ()
    children: tuple[str, ...] = ()
    inserted: bool = False


@dataclass
class RunSpans:
    """The nodes of one runtime call, with the iteration it belongs to."""

    iteration: int
    warmup: bool
    nodes: list[NodeSpan] = field(default_factory=list)


def layers_of(names: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(layers, children) of a node made from these original node names, in first-seen order."""
    layers: list[str] = []
    children: list[str] = []
    for name in names:
        scope = scope_of(name)
        if scope is None:
            continue
        if scope.layer not in layers:
            layers.append(scope.layer)
        if scope.child and scope.child not in children:
            children.append(scope.child)
    return tuple(layers), tuple(children)


def charge_inserted(nodes: Sequence[NodeSpan]) -> None:
    """Give nodes of no layer the layer of the next node that has one (in execution order), marked inserted."""
    following: tuple[str, ...] = ()
    for node in reversed(nodes):
        if node.layers:
            following = node.layers[:1]
        elif following:
            node.layers, node.inserted = following, True


def replay_markers(run: RunSpans, depth: int = 1, index_of: Mapping[str, int] | None = None) -> list[Marker]:
    """Layer markers for one run: one span per stretch of consecutive nodes of the same single layer.

    Fused groups across layers get no layer span (their time is shown as the group's, not charged
    to one layer). At depth 2, stretches of one child nest inside their layer's span. `index_of`: the layers'
    top-level indices, for names that do not carry it ("model.backbone"); else read from "model.<i>".
    """
    out: list[Marker] = []
    stretch: list[NodeSpan] = []

    def close() -> None:
        if not stretch:
            return
        layer = stretch[0].layers[0]
        index = index_of[layer] if index_of is not None else int(layer.split(".")[1])
        out.append(_marker("B", layer, stretch[0].start_ns, run, index))
        if depth >= 2:
            out.extend(_child_markers(stretch, run, index))
        out.append(_marker("E", layer, stretch[-1].end_ns, run, index))
        stretch.clear()

    for node in run.nodes:
        single = len(node.layers) == 1
        if stretch and (not single or node.layers != stretch[0].layers):
            close()
        if single:
            stretch.append(node)
    close()
    return out


def _child_markers(stretch: list[NodeSpan], run: RunSpans, index: int) -> list[Marker]:
    out: list[Marker] = []
    group: list[NodeSpan] = []

    def close() -> None:
        if group and len(group[0].children) == 1:
            child = group[0].children[0]
            out.append(_marker("B", child, group[0].start_ns, run, index))
            out.append(_marker("E", child, group[-1].end_ns, run, index))
        group.clear()

    for node in stretch:
        if group and node.children != group[0].children:
            close()
        group.append(node)
    close()
    return out


def _marker(phase: str, name: str, t_ns: int, run: RunSpans, index: int) -> Marker:
    return Marker("layer", "B" if phase == "B" else "E", name, t_ns, run.iteration, run.warmup, index, replayed=True)
