"""A TorchScript model's layers from its ops' module hierarchy: each forward op charged to its layer, and the
layer spans made from them, replayed into the pass's markers.

The live layer ranges cannot exist for a traced model (its layers run inside TorchScript, where hwprof's
wrappers never run), so the collector asks torch.profiler for `with_modules` and resolves each op's
`Module Hierarchy` to a layer (hwprof.workload.script_scopes).

`with_modules` builds that string for every op as it runs: on yolov8n at 128 with one thread it made the
profiled forward 1.31-1.32x the bare one, against 1.07-1.08x for the profiler without it (the calling thread's
CPU time, 40 ABBA blocks in one process, two runs: scripts/traced_layers_compare.py --cost-only). So, as the
input dims are (shapes.py), it is recorded in the last warm-up forward only, and each measured forward's ops
borrow the hierarchies of the warm-up forward's ops (`borrow_hierarchies`): one for one where the forward ran
the same ops in the same order. A traced graph does not always: TorchScript's profiling executor runs an
unoptimised graph at the first call for each input shape and an optimised one from the second call on (the
official YOLOv7 yolov7-tiny at 160: 964 ops, then 865), and each shape has its own aten implementations
(thnn_conv2d where a small input makes oneDNN's convolution not pay). So detect.py's images of two shapes,
bus and zidane in turn, keep the graph unoptimised with two op sequences, and a forward at a shape change
runs the unoptimised graph once. Such a forward is aligned with the warm-up's ops by name (difflib's longest
matching blocks, in start order): an aligned op takes its counterpart's hierarchy; an op left over takes the
hierarchy that the aligned ops just before and after it share (an op of the graph between two ops of one
layer), else its innermost enclosing op's (an aten op's own implementation calls). A forward with no op in
common borrows nothing and is counted. Where there is no warm-up profile (extra profiler_shapes_measured, or
its export failed), the measured iterations record the hierarchy themselves.

A layer span is a stretch of consecutive outermost ops of one layer, from the first one's start to the last
one's end, as the ONNX Runtime and OpenVINO node spans are (hwprof.workload.node_layers.replay_markers, which
makes the markers for both): the TorchScript interpreter's own time between two ops of different layers, and
ops of no layer (the model's own code between its layers), are in the forward but in no layer, so the layers
never add up to more than it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Final, Protocol

from hwprof.collectors.torch_profiler.kineto import KEvent

from hwprof.core.markers import Marker
from hwprof.schema.summaries_tools import ModuleLayers
from hwprof.workload.node_layers import NodeSpan, RunSpans, replay_markers
from hwprof.workload.script_scopes import METHOD, LayerScopes, OpScope

HIERARCHY_ARG: Final = "Module Hierarchy"
"""The chrome trace's argument that holds an op's module hierarchy (torch.profiler with_modules=True)."""
UNRESOLVED_KEPT = 5
FROM_WARMUP = "the last warm-up forward's, op by op (with_modules on there only)"
FROM_MEASURED = "recorded in the measured iterations (with_modules on there)"


class Op(Protocol):
    """What is read of an op (convert.OpRecord): its event, its start on the monotonic clock, where it ran."""

    event: KEvent
    start: int
    layer: str | None
    stage: str | None
    iteration: int | None
    hierarchy: str | None


def module_layers(
    ops: Sequence[Op], warmup_ops: Sequence[Op] | None, scopes: LayerScopes, depth: int
) -> tuple[ModuleLayers, list[Marker]]:
    """The forward ops charged to their layers (their hierarchies borrowed from the warm-up forward's where they
    recorded none) and the replayed layer markers; the summary of how."""
    borrowed = warmup_ops is not None and not any(op.hierarchy for op in ops)
    borrow = borrow_hierarchies(ops, warmup_ops) if borrowed and warmup_ops is not None else Borrowed()
    charged = charge_ops(ops, scopes)
    replayed = layer_markers(ops, scopes, depth)
    charged.update(
        hierarchy_from=FROM_WARMUP if borrowed else FROM_MEASURED,
        forwards_unmatched=borrow.unmatched,
        forwards_aligned=borrow.aligned,
        ops_unaligned=borrow.ops_unaligned,
        layer_spans=len(replayed) // 2,
    )
    return charged, replayed


def recorded_hierarchy(event: KEvent) -> str | None:
    """The module hierarchy the profiler recorded for this op (with_modules on), else None."""
    value = event.args.get(HIERARCHY_ARG)
    return value if isinstance(value, str) else None


@dataclass
class Borrowed:
    """How the measured forwards took the warm-up forward's hierarchies."""

    unmatched: int = 0
    """Forwards with no op in common with the warm-up's: no hierarchy, no layer span."""
    aligned: int = 0
    """Forwards whose op sequence differed from the warm-up's, aligned with it by op name."""
    ops_unaligned: int = 0
    """Ops of the aligned forwards with no counterpart (their hierarchy taken from their neighbours or their
    enclosing op, where one has it)."""


def borrow_hierarchies(ops: Sequence[Op], warmup_ops: Sequence[Op]) -> Borrowed:
    """Each measured forward's ops take the hierarchies of the warm-up forward's: one for one where the two ran
    the same ops in the same order (by name, in start order), else as aligned by name (`_align`)."""
    warm = _in_order([op for op in warmup_ops if op.stage == "forward"])
    names = [op.event.name for op in warm]
    out = Borrowed()
    for forward in _forwards(ops).values():
        mine = _in_order(forward)
        if [op.event.name for op in mine] == names:
            for op, counterpart in zip(mine, warm, strict=True):
                op.hierarchy = counterpart.hierarchy
            continue
        left = _align(mine, warm)
        if left == len(mine):
            out.unmatched += 1
            continue
        out.aligned += 1
        out.ops_unaligned += left
    return out


def _align(mine: list[Op], warm: list[Op]) -> int:
    """A forward's ops (start order) given the hierarchies of the warm-up's ops aligned with them by name, then
    the left-over ops theirs from their neighbours or enclosing ops; the number of ops with no counterpart."""
    matcher = SequenceMatcher(None, [op.event.name for op in mine], [op.event.name for op in warm], autojunk=False)
    aligned = [False] * len(mine)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            mine[block.a + k].hierarchy = warm[block.b + k].hierarchy
            aligned[block.a + k] = True
    if not any(aligned):
        return len(mine)
    known = [i for i, ok in enumerate(aligned) if ok]
    left = [i for i, ok in enumerate(aligned) if not ok]
    for i in left:
        at = bisect_left(known, i)
        prev, after = (known[at - 1] if at else None), (known[at] if at < len(known) else None)
        if prev is not None and after is not None and mine[prev].hierarchy == mine[after].hierarchy:
            mine[i].hierarchy = mine[prev].hierarchy
    stack: list[Op] = []
    for i, op in enumerate(mine):
        while stack and stack[-1].start + stack[-1].event.dur < op.start + op.event.dur:
            stack.pop()
        if not aligned[i] and op.hierarchy is None and stack:
            op.hierarchy = stack[-1].hierarchy
        stack.append(op)
    return len(left)


def _in_order(ops: list[Op]) -> list[Op]:
    """Start order, an op before the ops it calls (which may start in the same ns)."""
    return sorted(ops, key=lambda o: (o.start, -o.event.dur))


def _forwards(ops: Sequence[Op]) -> dict[int, list[Op]]:
    """The ops of each measured iteration's forward."""
    by_iteration: dict[int, list[Op]] = defaultdict(list)
    for op in ops:
        if op.stage == "forward" and op.iteration is not None:
            by_iteration[op.iteration].append(op)
    return by_iteration


def op_scope(op: Op, scopes: LayerScopes) -> OpScope | None:
    return scopes.scope_of(op.hierarchy) if op.hierarchy is not None else None


def charge_ops(ops: Sequence[Op], scopes: LayerScopes) -> ModuleLayers:
    """Each forward op of a measured iteration with no live layer range gets the layer (the depth-2 child
    where the table has one) its hierarchy resolves to; what was resolved, as the summary says it."""
    forward = [op for op in ops if op.stage == "forward" and op.iteration is not None]
    hierarchies: set[str] = set()
    unresolved: set[str] = set()
    charged = 0
    for op in forward:
        if op.hierarchy is not None:
            hierarchies.add(op.hierarchy)
        scope = op_scope(op, scopes)
        if scope is None:
            if op.hierarchy is not None:
                unresolved.add(op.hierarchy)
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
    by_iteration = _forwards(ops)
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
    for op in _in_order(ops):
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
