"""torch.profiler's events converted: aten ops nested in their layer/stage/iteration ranges on the
monotonic clock, oneDNN primitives matched to their ops, per-layer tables, kernel rankings, spans.

The alignment error is measured independently on every stage and layer range: |converted range
edge - marker t_ns| (median, p95, max), since each range was opened by the same marker whose
monotonic time the bus recorded.
"""

from __future__ import annotations

import bisect
import json
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from hwprof.collectors.torch_profiler.clock import SYNC_NAME, SyncData, fit_clock, wall_offset
from hwprof.collectors.torch_profiler.kernel_doc import OpSums, PrimitiveSums, kernel_doc_json, top_kernels_json
from hwprof.collectors.torch_profiler.kineto import KEvent, KinetoTrace
from hwprof.collectors.torch_profiler.module_layers import module_layers, recorded_hierarchy
from hwprof.collectors.torch_profiler.onednn import OneDnnExec, OneDnnLog, parse_onednn
from hwprof.collectors.torch_profiler.shapes import METHOD as SHAPES_METHOD
from hwprof.collectors.torch_profiler.shapes import attach_dims, event_dims

from hwprof.core.atomic import atomic_write_text
from hwprof.core.markers import Marker
from hwprof.core.spans import pair_begin_end
from hwprof.schema.codec import JsonObject
from hwprof.schema.records import MetricTables, Span, metrics_path, records_path, write_records
from hwprof.schema.summaries_tools import TorchProfilerSummary
from hwprof.workload.script_scopes import LayerScopes

NAME = "torch_profiler"
RANGE_PREFIX = "hwprof:"
MATCH_LOOKBACK = 256
"""Ops walked back over when looking for the op that contains a oneDNN primitive."""
EDGE_TOLERANCE_NS = 2
"""Kineto rounds ts and dur to the ns separately, so a child may end 1 ns after its parent."""


@dataclass(slots=True)
class OpRecord:
    event: KEvent
    start: int
    """Monotonic ns."""
    self_ns: int
    layer: str | None
    stage: str | None
    iteration: int | None
    onednn: list[OneDnnExec] = field(default_factory=list)
    dims: list[Any] = field(default_factory=list)
    """Input dims: the event's own (record_shapes on), or its warm-up counterpart's (shapes.py)."""
    hierarchy: str | None = None
    """A TorchScript model's op: its module hierarchy, the event's own (with_modules on) or its warm-up
    counterpart's (module_layers.py)."""


@dataclass
class Converted:
    ops: list[OpRecord]
    spans: list[Span]
    metrics: MetricTables
    kernels: JsonObject
    """torch_profiler.kernels.json's document."""
    summary: TorchProfilerSummary
    replayed: list[Marker] = field(default_factory=list)
    """A TorchScript model's layer markers, made from the ops' module hierarchy (module_layers.py)."""


def _annotation_target(name: str) -> tuple[str, str] | None:
    if not name.startswith(RANGE_PREFIX):
        return None
    kind, _, rest = name[len(RANGE_PREFIX) :].partition(":")
    return kind, rest


def _contains(parent: KEvent, child: KEvent) -> bool:
    return child.ts < parent.end and child.end <= parent.end + EDGE_TOLERANCE_NS


def _walk(trace: KinetoTrace, fit: Callable[[int], int]) -> tuple[list[OpRecord], list[tuple[str, str, int, int]]]:
    """Nest events per thread: ops with self time and their layer/stage/iteration; hwprof ranges.

    Each open event carries what holds inside it (_Inside: the innermost layer, stage and iteration ranges and op
    around it), so that an op reads its own from the event that contains it instead of walking every open event:
    yolov7 at 640 records about 10,000 events a measured iteration."""
    ops: list[OpRecord] = []
    ranges: list[tuple[str, str, int, int]] = []  # kind, name, mono start, mono end
    by_tid: dict[int, list[KEvent]] = defaultdict(list)
    for event in trace.events:
        by_tid[event.tid].append(event)
    for events in by_tid.values():
        stack: list[tuple[KEvent, _Inside]] = []
        for event in events:
            while stack and not _contains(stack[-1][0], event):
                stack.pop()
            inside = stack[-1][1] if stack else _OUTSIDE
            target = _annotation_target(event.name)  # a user_annotation, or a cpu_op from _RecordFunctionFast
            if target is not None:
                ranges.append((target[0], target[1], fit(event.ts), fit(event.end)))
                stack.append((event, inside.within(*target)))
                continue
            if event.cat != "cpu_op":
                stack.append((event, inside))
                continue
            if inside.op is not None:
                inside.op.self_ns -= event.dur
            record = OpRecord(
                event,
                fit(event.ts),
                event.dur,
                inside.layer,
                inside.stage,
                inside.iteration,
                dims=event_dims(event),
                hierarchy=recorded_hierarchy(event),
            )
            ops.append(record)
            stack.append((event, _Inside(inside.layer, inside.stage, inside.iteration, record)))
    return ops, ranges


class _Inside(NamedTuple):
    """What holds inside an open event: the innermost hwprof layer, stage and iteration ranges around it, and the
    innermost op (whose self time an op inside it takes away)."""

    layer: str | None
    stage: str | None
    iteration: int | None
    op: OpRecord | None

    def within(self, kind: str, name: str) -> _Inside:
        """Inside a hwprof range of `kind` (other kinds change nothing)."""
        if kind == "layer":
            return _Inside(name, self.stage, self.iteration, self.op)
        if kind == "stage":
            return _Inside(self.layer, name, self.iteration, self.op)
        if kind == "iteration":
            return _Inside(self.layer, self.stage, int(name), self.op)
        return self


_OUTSIDE = _Inside(None, None, None, None)


def _match_onednn(ops: list[OpRecord], log: OneDnnLog) -> int:
    """Attach each primitive to the innermost aten op (on the converted clock) that contains its start; the
    number matched.

    Ops on a thread nest, so of the ops containing an instant the innermost is the one that started
    last: walk back from the last op that started before the primitive.
    """
    ordered = sorted(ops, key=lambda o: o.start)
    starts = [o.start for o in ordered]
    matched = 0
    for prim in log.execs:
        j = bisect.bisect_right(starts, prim.ts_ns) - 1
        for k in range(j, max(j - MATCH_LOOKBACK, -1), -1):
            op = ordered[k]
            if prim.ts_ns <= op.start + op.event.dur:
                op.onednn.append(prim)
                matched += 1
                break
    return matched


def _alignment_json(ranges: list[tuple[str, str, int, int]], markers: list[Marker]) -> JsonObject:
    """|converted range edge - marker t_ns| for the k-th range and k-th measured marker pair of each name."""
    pairs: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    opened: dict[tuple[str, str], list[int]] = defaultdict(list)
    for m in markers:
        if not m.measured or m.kind == "iteration":
            continue
        key: tuple[str, str] = (m.kind, m.name)
        if m.phase == "B":
            opened[key].append(m.t_ns)
        elif opened[key]:
            pairs[key].append((opened[key].pop(), m.t_ns))
    seen: dict[tuple[str, str], int] = defaultdict(int)
    errors: dict[str, list[int]] = {"layer": [], "stage": []}
    for kind, name, start, end in sorted(ranges, key=lambda r: r[2]):
        if kind not in errors:
            continue
        key = (kind, name)
        k = seen[key]
        seen[key] += 1
        if k < len(pairs[key]):
            b, e = pairs[key][k]
            errors[kind].extend((start - b, end - e))
    out: JsonObject = {}
    for kind, values in errors.items():
        if values:
            absolute = sorted(abs(v) for v in values)
            out[kind] = {
                "edges": len(values),
                "median_abs_us": statistics.median(absolute) / 1000,
                "p95_abs_us": absolute[min(len(absolute) - 1, int(0.95 * len(absolute)))] / 1000,
                "max_abs_us": absolute[-1] / 1000,
                "median_signed_us": statistics.median(values) / 1000,
            }
    return out


def convert(
    trace: KinetoTrace,
    sync: SyncData,
    markers: list[Marker],
    onednn_log: Path | None = None,
    flops: dict[int, int] | None = None,
    shapes: KinetoTrace | None = None,
    scopes: LayerScopes | None = None,
    depth: int = 1,
) -> Converted:
    """Kineto events -> ops on the monotonic clock, per-layer tables, kernel rankings, spans. `shapes`: the
    warm-up forward profiled with record_shapes, where the measured iterations ran without (shapes.py).
    `scopes`: a TorchScript model's layers, found from the ops' module hierarchy (module_layers.py: recorded
    in the warm-up forward of `shapes` when the measured ops have none), whose spans come back as `replayed`
    markers (to --depth)."""
    fit = fit_clock(trace, sync)
    ops, ranges = _walk(trace, fit)
    ops = [o for o in ops if o.event.name != SYNC_NAME]
    warmup_ops = _walk(shapes, lambda ts: ts)[0] if shapes is not None else None
    shapes_doc: JsonObject | None = None
    if warmup_ops is not None:  # matched by layer: before a TorchScript model's ops get theirs (module_layers.py)
        shapes_doc = {"method": SHAPES_METHOD, **attach_dims(ops, warmup_ops)}
    elif any(o.dims for o in ops):
        shapes_doc = {"method": "record_shapes on in the measured iterations"}
    module_summary, replayed = module_layers(ops, warmup_ops, scopes, depth) if scopes is not None else (None, [])
    flops = flops or {}
    iterations = sorted({o.iteration for o in ops if o.iteration is not None})
    n_iter = max(len(iterations), 1)
    summary = TorchProfilerSummary.of(events=len(trace.events), aten_ops=len(ops), iterations=len(iterations))
    summary.shapes = shapes_doc
    summary.onednn = _onednn_summary_json(ops, sync, onednn_log)
    replayed_ranges = [("layer", b.name, b.t_ns, e.t_ns) for b, e in pair_begin_end(replayed)]
    sums = _sum_ops(ops, ranges + replayed_ranges, flops)
    summary.module_layers = module_summary
    summary.forward_ops_outside_layers = sums.outside_layers_in_forward
    # oneDNN's figures are means over the iterations that ran with its verbose mode on
    n_onednn = max(summary.onednn.get("iterations", 0), 1)
    metrics = _metric_tables(sums, n_iter, n_onednn)
    if scopes is not None:
        metrics.methods["profiler_layer_ms"] = (
            "duration of the layer's span made from its ops' module hierarchy (from its first op's start to its "
            "last op's end; the profiler was on)"
        )
    kernel_doc = kernel_doc_json(sums.kernels, len(iterations), n_iter, n_onednn)
    summary.top_kernels = top_kernels_json(((o.event.name, o.self_ns) for o in ops if o.layer is not None), n_iter)
    summary.clock = {
        "method": f"{SYNC_NAME} ranges between two monotonic reads at profiler start and stop; "
        "offset interpolated linearly between them; error measured on the stage/layer ranges vs markers",
        "offset_ns": fit.offset0,
        "drift_ns": fit.offset1 - fit.offset0,
        "sync_uncertainty_ns": fit.uncertainty_ns,
        "alignment": _alignment_json(ranges, markers),
    }
    spans = _spans(ops)
    return Converted(ops, spans, metrics, kernel_doc, summary, replayed)


def _onednn_summary_json(ops: list[OpRecord], sync: SyncData, onednn_log: Path | None) -> JsonObject:
    """What oneDNN's verbose log gave: its lines and primitives, and the ops its kernel labels attached to
    (matched by time; the log's timestamps must be on)."""
    out: JsonObject = {"enabled": onednn_log is not None}
    wall = wall_offset(sync)
    if onednn_log is not None and wall is not None:
        log = parse_onednn(onednn_log, wall)
        out.update(lines=log.lines, primitives=len(log.execs), untimed=log.untimed, **log.info)
        if log.execs:
            matched = _match_onednn(ops, log)
            out.update(matched=matched, unmatched=len(log.execs) - matched)
            out["iterations"] = len({o.iteration for o in ops if o.onednn})
        elif log.untimed:
            out["reason"] = (
                "verbose lines carry no timestamp (ONEDNN_VERBOSE_TIMESTAMP was not set before oneDNN "
                "initialised): labels not attached"
            )
    return out


@dataclass
class _OpSums:
    """The ops' figures summed per layer, per stage and per (layer or stage, op name) over every iteration."""

    layer_stats: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    stage_stats: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    kernels: dict[str, dict[str, OpSums]] = field(default_factory=lambda: defaultdict(dict))
    """"model.7" or "stage:<stage>" -> op name -> calls, self and inclusive ns, flops, shapes, oneDNN primitives."""
    outside_layers_in_forward: int = 0


def _sum_ops(ops: list[OpRecord], ranges: list[tuple[str, str, int, int]], flops: dict[int, int]) -> _OpSums:
    sums = _OpSums()
    dims_json: dict[int, str] = {}
    """Each dims list's JSON by its id: attach_dims gives every iteration's op at one place the same list."""
    for op in ops:
        key = op.layer if op.layer is not None else f"stage:{op.stage or 'none'}"
        if op.stage == "forward" and op.layer is None:
            sums.outside_layers_in_forward += 1
        row = sums.kernels[key].setdefault(op.event.name, OpSums(op.event.name))
        row.calls += 1
        row.self_ns += op.self_ns
        row.inclusive_ns += op.event.dur
        row.flops += flops.get(int(op.event.args.get("External id", -1)), 0)
        dims = dims_json.get(id(op.dims))
        if dims is None:
            dims = dims_json[id(op.dims)] = json.dumps(op.dims)
        row.shapes[dims] += 1
        for prim in op.onednn:
            prow = row.onednn.setdefault(prim.label, PrimitiveSums(prim.label))
            prow.calls += 1
            prow.exec_ms += prim.exec_ms
            prow.problems[prim.problem] += 1
        target = sums.layer_stats[op.layer] if op.layer is not None else None
        for stats in (target, sums.stage_stats[op.stage] if op.stage else None):
            if stats is None:
                continue
            stats["aten_self_ms"] += op.self_ns / 1e6
            stats["aten_ops"] += 1
            stats["profiler_flops"] += flops.get(int(op.event.args.get("External id", -1)), 0)
            stats["onednn_exec_ms"] += sum(p.exec_ms for p in op.onednn)
    for kind, name, start, end in ranges:
        if kind == "layer":
            sums.layer_stats[name]["profiler_layer_ms"] += (end - start) / 1e6
        elif kind == "stage":
            sums.stage_stats[name]["profiler_stage_ms"] += (end - start) / 1e6
    return sums


def _metric_tables(sums: _OpSums, n_iter: int, n_onednn: int) -> MetricTables:
    """The per-layer and per-stage sums as means per measured iteration (oneDNN's per verbose iteration)."""
    divisor = {"onednn_exec_ms": n_onednn}

    def per_iteration(table: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        return {k: {m: v / divisor.get(m, n_iter) for m, v in row.items() if v} for k, row in table.items()}

    return MetricTables(
        layers=per_iteration(sums.layer_stats),
        stages=per_iteration(sums.stage_stats),
        units={
            "aten_self_ms": "ms",
            "aten_ops": "count",
            "profiler_flops": "flop",
            "onednn_exec_ms": "ms",
            "profiler_layer_ms": "ms",
            "profiler_stage_ms": "ms",
        },
        methods={
            "aten_self_ms": "torch.profiler: self CPU time of the aten ops inside the range, on the thread "
            "that called them (intra-op worker threads are not separate events), mean per measured iteration "
            "(the first also prints oneDNN's verbose lines, for the kernel labels)",
            "profiler_flops": "torch.profiler with_flops formulas (convolution and matmul ops only)",
            "onednn_exec_ms": "ONEDNN_VERBOSE exec_time of the primitives matched to the range's aten ops, mean "
            "over the measured iterations that ran with oneDNN verbose on (the first one by default)",
            "profiler_layer_ms": "duration of the layer's record_function range (includes profiler overhead)",
        },
    )


def _span_args_json(op: OpRecord) -> JsonObject:
    """The trace arguments of an op's span: self time, layer, input dims, oneDNN kernel labels."""
    args: JsonObject = {"self_us": op.self_ns / 1000}
    if op.layer:
        args["layer"] = op.layer
    if op.dims:
        args["input_dims"] = op.dims
    if op.onednn:
        labels = sorted({p.label for p in op.onednn if p.kind != "reorder"})
        if labels:
            args["onednn"] = labels
    return args


def _spans(ops: list[OpRecord]) -> list[Span]:
    spans = []
    for op in ops:
        args = _span_args_json(op)
        spans.append(Span(op.event.name, op.start, op.event.dur, f"thread:{op.event.tid}", "aten", op.event.tid, args))
        end = op.start + op.event.dur
        for prim in op.onednn:
            # Two clock conversions meet here: keep the primitive inside its op so the trace nests.
            dur = max(min(round(prim.exec_ms * 1e6), end - op.start), 0)
            start = min(max(prim.ts_ns, op.start), end - dur)
            spans.append(
                Span(
                    prim.label,
                    start,
                    dur,
                    f"thread:{op.event.tid}",
                    "onednn",
                    op.event.tid,
                    {
                        "problem": prim.problem,
                        "prop_kind": prim.prop,
                        "exec_ms": prim.exec_ms,
                        "shifted_us": (start - prim.ts_ns) / 1000,
                    },
                )
            )
    return spans


def write_outputs(out_dir: Path, converted: Converted) -> list[str]:
    write_records(records_path(out_dir, NAME), converted.spans)
    converted.metrics.save(metrics_path(out_dir, NAME))
    atomic_write_text(out_dir / f"{NAME}.kernels.json", json.dumps(converted.kernels, indent=1))
    return [records_path(out_dir, NAME).name, metrics_path(out_dir, NAME).name, f"{NAME}.kernels.json"]
