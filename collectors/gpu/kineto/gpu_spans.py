"""Every GPU activity of the profiled window as spans on the run's clock, each under the slices of the stage
and the layer whose range launched it, with a flow arrow from its launch.

What is drawn: each kernel, copy (`gpu_memcpy`) and memset of the trace on its stream's track ("GPU <device>
stream <stream>"), wherever it was launched (the h2d copy, the forward's kernels, NMS and the device-to-host
copies of postprocess), and its launch call (cudaLaunchKernel, cudaMemcpyAsync, ...) on the launching thread.
An activity whose launch is not in the trace is drawn all the same, without a flow (args say so).

Above the activities, on the same stream track, two levels of slices made from them:
- stage: the activities launched inside one stage range (`forward`, `stage h2d`, ...), from the first one's
  begin to the last one's end;
- layer: the activities launched inside one `layer <i> <Type>` range (one layer of one forward), named as
  the CPU tables and the main thread's layer slices name it ("22 Detect"); args: activities and kernels,
  GPU busy within the span (the union of its activities), the forward's index in the trace.

Why charged by launch and not by time: at batch 1 the CPU runs ahead, so a kernel often runs while a later
layer's range is open on the CPU (attribution.py). Why the slices nest: a stream runs its activities one
after another in launch order, and one thread launches the stages and layers one after another, so on one
stream the slices of one level follow one another and each activity lies inside its layer's and stage's
slices. Two streams get two tracks, each with its own slices. Where slices of one level would overlap on a
stream (launches from two threads interleaved on one stream, or overlapping timestamps; none of the H100
recordings has any), the later slice is not put under or across the earlier one: it goes to the stream's
overlap track ("GPU <d> stream <s> (overlapping ranges)") with `overlaps` naming the slice it overlaps,
and its activities stay on the stream track, so the slices drawn always span exactly their activities.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field

from hwprof.collectors.gpu.kineto.attribution import union_ns
from hwprof.collectors.gpu.kineto.trace import FORWARD_RANGE, LAYER_RANGE, GpuActivity, GpuTrace, Interval

from hwprof.schema.records import Span

GPU_TRACK = "GPU {device} stream {stream}"
OVERLAP_SUFFIX = " (overlapping ranges)"
"""A stream track's overlap track: its name plus this."""
FLOW_BASE = 1 << 40
"""Flow ids of launch -> activity arrows: the correlation id above this base (unique in the trace)."""
CAT_STAGE = "gpu_stage"
CAT_LAYER = "gpu_layer"
CAT_LAUNCH = "cuda_launch"


class _RangeIndex:
    """The range (of one kind) open on a thread at an instant: ranges of one kind do not nest."""

    def __init__(self, ranges: list[Interval]) -> None:
        self.ranges = ranges
        self.starts = [r.ts for r in ranges]

    def at(self, ts: int, tid: int) -> int | None:
        k = bisect.bisect_right(self.starts, ts) - 1
        while k >= 0 and self.ranges[k].end > ts:
            if self.ranges[k].tid == tid:
                return k
            k -= 1
        return None


@dataclass
class _Group:
    """The activities one range launched on one stream."""

    name: str
    category: str
    args: dict[str, object]
    acts: list[GpuActivity] = field(default_factory=list)


def _group_span(group: _Group, device: int, stream: int, offset_ns: int) -> Span:
    begin = min(a.ts for a in group.acts)
    end = max(a.end for a in group.acts)
    args = {
        **group.args,
        "activities": len(group.acts),
        "kernels": sum(a.cat == "kernel" for a in group.acts),
        "gpu_busy_us": union_ns([(a.ts, a.end) for a in group.acts]) / 1e3,
    }
    return Span(
        group.name,
        begin + offset_ns,
        end - begin,
        GPU_TRACK.format(device=device, stream=stream),
        group.category,
        None,
        args,
    )


def _place(groups: list[Span]) -> list[Span]:
    """Send a slice that overlaps the previous one of its level on its stream to the overlap track."""
    last_end: dict[tuple[str, str], tuple[int, str]] = {}
    for span in sorted(groups, key=lambda s: s.ts_ns):
        key = (span.track, span.category)
        prev = last_end.get(key)
        if prev is not None and span.ts_ns < prev[0]:
            span.args["overlaps"] = prev[1]
            span.track += OVERLAP_SUFFIX
            continue
        last_end[key] = (span.ts_ns + span.dur_ns, span.name)
    return groups


def gpu_spans(trace: GpuTrace, offset_ns: int) -> list[Span]:
    """Stage and layer slices, then each activity with its launch (see the module docstring)."""
    launch_of: dict[int, Interval] = {}
    for call in trace.launches:
        if call.correlation is not None:
            launch_of.setdefault(call.correlation, call)
    stages = trace.stage_ranges()
    stage_at, layer_at, fwd_at = _RangeIndex(stages), _RangeIndex(trace.layers), _RangeIndex(trace.forwards)
    occurrence: dict[int, int] = {}
    seen: dict[str, int] = defaultdict(int)
    for i, r in enumerate(stages):
        occurrence[i] = seen[r.name]
        seen[r.name] += 1

    stage_groups: dict[tuple[int, int, int], _Group] = {}
    layer_groups: dict[tuple[int, int, int], _Group] = {}
    out: list[Span] = []
    for act in sorted(trace.activities.values(), key=lambda a: (a.ts, a.correlation)):
        track = GPU_TRACK.format(device=act.device, stream=act.stream)
        call = launch_of.get(act.correlation)
        args: dict[str, object] = {"correlation": act.correlation, **act.args}
        if call is None:
            args["launch"] = "not in the trace"
            out.append(Span(act.name, act.ts + offset_ns, act.dur, track, act.cat, None, args))
            continue
        flow = FLOW_BASE + act.correlation
        s, k, f = stage_at.at(call.ts, call.tid), layer_at.at(call.ts, call.tid), fwd_at.at(call.ts, call.tid)
        layer = trace.layers[k].name if k is not None else ""
        stage = stages[s].name if s is not None else ""
        args.update(launch_tid=call.tid, layer=layer, stage=stage, flow_in=flow)
        if f is not None:
            args["forward"] = f
        if s is not None:
            sargs: dict[str, object] = {"stage": stage, "occurrence": occurrence[s]}
            if stage == FORWARD_RANGE and f is not None:
                sargs["forward"] = f
            group = stage_groups.setdefault((act.device, act.stream, s), _Group(stage, CAT_STAGE, sargs))
            group.acts.append(act)
        match = LAYER_RANGE.match(layer)
        if k is not None and match is not None:
            largs: dict[str, object] = {"qualified_name": f"model.{match.group(1)}", "range": layer}
            if f is not None:
                largs["forward"] = f
            label = f"{match.group(1)} {match.group(2)}"
            layer_groups.setdefault((act.device, act.stream, k), _Group(label, CAT_LAYER, largs)).acts.append(act)
        launch_args = {"correlation": act.correlation, "flow_out": flow}
        out.append(
            Span(call.name, call.ts + offset_ns, call.dur, f"thread:{call.tid}", CAT_LAUNCH, call.tid, launch_args)
        )
        out.append(Span(act.name, act.ts + offset_ns, act.dur, track, act.cat, None, args))
    # Parents first: a stage, a layer and an activity with equal begin and end nest in this order.
    groups = [
        *(_group_span(g, d, st, offset_ns) for (d, st, _), g in stage_groups.items()),
        *(_group_span(g, d, st, offset_ns) for (d, st, _), g in layer_groups.items()),
    ]
    return [*_place(groups), *out]
