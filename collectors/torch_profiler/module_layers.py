"""A TorchScript model's layers from its ops' module hierarchy: each forward op charged to its layer, and the
layer spans made from them, replayed into the pass's markers.

The live layer ranges cannot exist for a traced model (its layers run inside TorchScript, where hwprof's
wrappers never run), so the collector asks torch.profiler for `with_modules` and resolves each op's
`Module Hierarchy` to a layer (hwprof.program.scopes). A layer span is a stretch of consecutive outermost ops
of one layer, from the first one's start to the last one's end, as the ONNX Runtime and OpenVINO node spans
are (hwprof.workload.node_layers.replay_markers, which makes the markers for both): the TorchScript
interpreter's own time between two ops of different layers, and ops of no layer (the model's own code
between its layers), are in the forward but in no layer, so the layers never add up to more than it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol

from hwprof.collectors.torch_profiler.kineto import KEvent

from hwprof.core.markers import Marker
from hwprof.program.scopes import METHOD, LayerScopes, OpScope
from hwprof.schema.summaries_tools import ModuleLayers
from hwprof.workload.node_layers import NodeSpan, RunSpans, replay_markers

HIERARCHY_ARG = "Module Hierarchy"
"""The chrome trace's argument that holds an op's module hierarchy (torch.profiler with_modules=True)."""
UNRESOLVED_KEPT = 5


class Op(Protocol):
    """What is read of an op (convert.OpRecord): its event, its start on the monotonic clock, where it ran."""

    event: KEvent
    start: int
    layer: str | None
    stage: str | None
    iteration: int | None


def op_scope(op: Op, scopes: LayerScopes) -> OpScope | None:
    hierarchy = op.event.args.get(HIERARCHY_ARG)
    return scopes.scope_of(hierarchy) if isinstance(hierarchy, str) else None


def charge_ops(ops: Sequence[Op], scopes: LayerScopes) -> ModuleLayers:
    """Each forward op of a measured iteration with no live layer range gets the layer (the depth-2 child
    where the table has one) its hierarchy resolves to; what was resolved, as the summary says it."""
    forward = [op for op in ops if op.stage == "forward" and op.iteration is not None]
    hierarchies: set[str] = set()
    unresolved: set[str] = set()
    charged = 0
    for op in forward:
        hierarchy = op.event.args.get(HIERARCHY_ARG)
        if isinstance(hierarchy, str):
            hierarchies.add(hierarchy)
        scope = op_scope(op, scopes)
        if scope is None:
            if isinstance(hierarchy, str):
                unresolved.add(hierarchy)
            continue
        if op.layer is None:
            op.layer = scope.child or scope.layer
        charged += 1
    return ModuleLayers.of(
        method=METHOD,
        forward_ops=len(forward),
        ops_in_layers=charged,
        hierarchies=len(hierarchies),
        unresolved=sorted(unresolved)[:UNRESOLVED_KEPT],
    )


def layer_markers(ops: Sequence[Op], scopes: LayerScopes, depth: int) -> list[Marker]:
    """The replayed layer markers of every measured iteration, from its forward's outermost ops."""
    by_iteration: dict[int, list[Op]] = defaultdict(list)
    for op in ops:
        if op.stage == "forward" and op.iteration is not None:
            by_iteration[op.iteration].append(op)
    index_of: dict[str, int] = {}
    out: list[Marker] = []
    for iteration in sorted(by_iteration):
        nodes = _outermost(by_iteration[iteration], scopes, index_of)
        out.extend(replay_markers(RunSpans(iteration, False, nodes), depth, index_of))
    return out


def _outermost(ops: list[Op], scopes: LayerScopes, index_of: dict[str, int]) -> list[NodeSpan]:
    """One node per outermost op of a layer (the ops it calls lie inside it), and one per op of no layer that
    is not inside a layer's op (it ends the stretch of the layer before it); the op around the whole
    forward (TorchScript's `forward`) contains everything and so ends nothing."""
    nodes: list[NodeSpan] = []
    reach: int | None = None
    for op in sorted(ops, key=lambda o: (o.start, -o.event.dur)):
        if reach is not None and op.start < reach:
            continue
        end = op.start + op.event.dur
        scope = op_scope(op, scopes)
        if scope is None:
            nodes.append(NodeSpan(op.event.name, op.start, end))
            continue
        index_of[scope.layer] = scope.index
        children = (scope.child,) if scope.child else ()
        nodes.append(NodeSpan(op.event.name, op.start, end, (scope.layer,), children))
        reach = end
    return [n for n in nodes if n.layers or not _around(n, nodes)]


def _around(node: NodeSpan, nodes: list[NodeSpan]) -> bool:
    """An op of no layer that holds ops of a layer (TorchScript's `forward`, a fork's wait) ends nothing."""
    return any(n.layers and node.start_ns <= n.start_ns and n.end_ns <= node.end_ns for n in nodes)
