"""Kernels charged to layers by launch correlation; the forward's CPU time, GPU busy time and idle share.

Why correlation and not timestamps: at batch 1 the CPU runs ahead of the GPU, so a kernel often
starts after the range of the layer that launched it has closed (and inside a later layer's range).
The launch call on the CPU lies inside its layer's range; its `correlation` names its kernel. Every
GPU activity launched inside a `forward` range is charged to exactly one row: its layer, or
"(outside layers)" for launches between layer ranges, so the rows add up to the forward's GPU time.

Per forward (figures are means over the forwards in the trace):
- cpu: the `forward` range's duration on the launching thread;
- gpu busy: the union of the forward's GPU activity intervals (the sum of their durations is kept too;
  they are equal on one stream);
- window: from the forward range's begin to the later of its end and its last activity's end;
- idle share: 1 - busy / window, the share of that window in which the GPU ran nothing of this forward.
"""

from __future__ import annotations

import bisect
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from hwprof.collectors.gpu.kineto.trace import LAUNCH_CATS, LAYER_RANGE, GpuActivity, GpuTrace, Interval

OUTSIDE = "(outside layers)"


@dataclass
class KernelRow:
    name: str
    cat: str
    gpu_ns: float
    """Per forward."""
    calls: float


@dataclass
class LayerGpu:
    layer: str
    """Qualified name of the layer table ("model.51"), or OUTSIDE."""
    index: int
    type: str
    cpu_ns: float
    """Time inside the layer's range on the launching thread, per forward."""
    api_ns: float
    """CUDA runtime/driver calls inside the range, per forward."""
    launch_ns: float
    """Those of them that started a GPU activity, per forward."""
    gpu_ns: float
    kernels: float
    """GPU activities launched from the range, per forward."""
    kernel_rows: list[KernelRow] = field(default_factory=list)


@dataclass
class ForwardGpu:
    cpu_ns: int
    gpu_busy_ns: int
    gpu_sum_ns: int
    window_ns: int
    kernels: int
    first_kernel_delay_ns: int
    """From the forward range's begin to its first activity's begin."""

    @property
    def idle_share(self) -> float:
        return 1.0 - self.gpu_busy_ns / self.window_ns if self.window_ns > 0 else 0.0


@dataclass
class GpuAttribution:
    forwards: list[ForwardGpu]
    layers: list[LayerGpu]
    """In layer order, then OUTSIDE if anything was launched outside the layer ranges."""
    unmatched_launches: int
    """Launch calls in forwards whose correlation found no GPU activity (syncs, event records)."""

    def mean(self, attr: str) -> float:
        return statistics.fmean(getattr(f, attr) for f in self.forwards) if self.forwards else 0.0

    @property
    def idle_share(self) -> float:
        return statistics.fmean(f.idle_share for f in self.forwards) if self.forwards else 0.0

    def layer_gpu_sum_ns(self) -> float:
        return sum(row.gpu_ns for row in self.layers)

    def top(self, n: int = 5) -> list[LayerGpu]:
        return sorted((r for r in self.layers if r.layer != OUTSIDE), key=lambda r: -r.gpu_ns)[:n]


def union_ns(intervals: list[tuple[int, int]]) -> int:
    """Length of the union of [begin, end) intervals."""
    total = 0
    ordered = sorted(intervals)
    if not ordered:
        return 0
    cur_b, cur_e = ordered[0]
    for b, e in ordered[1:]:
        if b > cur_e:
            total += cur_e - cur_b
            cur_b, cur_e = b, e
        else:
            cur_e = max(cur_e, e)
    return total + cur_e - cur_b


def _inside(ranges: list[Interval], begin: int, end: int, tid: int) -> list[Interval]:
    starts = [r.ts for r in ranges]
    lo, hi = bisect.bisect_left(starts, begin), bisect.bisect_left(starts, end)
    return [r for r in ranges[lo:hi] if r.tid == tid]


class _Acc:
    def __init__(self, index: int, type_name: str) -> None:
        self.index, self.type = index, type_name
        self.cpu = self.api = self.launch = self.gpu = 0
        self.kernels = 0
        self.by_kernel: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])

    def charge(self, call: Interval, act: GpuActivity | None) -> None:
        self.api += call.dur
        if act is None:
            return
        self.launch += call.dur
        self.gpu += act.dur
        self.kernels += 1
        row = self.by_kernel[(act.name, act.cat)]
        row[0] += act.dur
        row[1] += 1


def attribute(trace: GpuTrace, launch_cats: tuple[str, ...] = LAUNCH_CATS) -> GpuAttribution:
    """Charge each GPU activity launched inside a forward range to its layer (see the module docstring).

    launch_cats: which CPU calls count as launches. Both the runtime (cudaLaunchKernel) and the
    driver API (cuLaunchKernel, which cuDNN's precompiled engines and CUTLASS kernels use) launch
    kernels; counting the runtime alone misses those (32 of yolov7's 460 kernels per forward).
    """
    accs: dict[str, _Acc] = {}
    forwards: list[ForwardGpu] = []
    unmatched = 0
    for fwd in trace.forwards:
        acts, missed = _charge_forward(trace, fwd, launch_cats, accs)
        unmatched += missed
        if acts:
            forwards.append(_forward_gpu(fwd, acts))
    n = max(1, len(trace.forwards))
    rows = [_layer_row(name, acc, n) for name, acc in accs.items()]
    rows.sort(key=lambda r: (r.index < 0, r.index))
    return GpuAttribution(forwards, rows, unmatched)


def _charge_forward(
    trace: GpuTrace, fwd: Interval, launch_cats: tuple[str, ...], accs: dict[str, _Acc]
) -> tuple[list[GpuActivity], int]:
    """One forward's layer ranges and launches charged to accs: its GPU activities, and the launches without one."""
    layers = _inside(trace.layers, fwd.ts, fwd.end, fwd.tid)
    layer_starts = [r.ts for r in layers]
    for rng in layers:
        m = LAYER_RANGE.match(rng.name)
        assert m is not None
        acc = accs.setdefault(f"model.{m.group(1)}", _Acc(int(m.group(1)), m.group(2)))
        acc.cpu += rng.dur
    acts: list[GpuActivity] = []
    unmatched = 0
    for call in _inside(trace.launches, fwd.ts, fwd.end, fwd.tid):
        if call.cat not in launch_cats:
            continue
        act = trace.activities.get(call.correlation) if call.correlation is not None else None
        k = bisect.bisect_right(layer_starts, call.ts) - 1
        if k >= 0 and call.ts < layers[k].end:
            m = LAYER_RANGE.match(layers[k].name)
            assert m is not None
            acc = accs[f"model.{m.group(1)}"]
        else:
            acc = accs.setdefault(OUTSIDE, _Acc(-1, ""))
        acc.charge(call, act)
        if act is None:
            unmatched += 1
        else:
            acts.append(act)
    return acts, unmatched


def _forward_gpu(fwd: Interval, acts: list[GpuActivity]) -> ForwardGpu:
    busy = union_ns([(a.ts, a.end) for a in acts])
    last = max(a.end for a in acts)
    return ForwardGpu(
        cpu_ns=fwd.dur,
        gpu_busy_ns=busy,
        gpu_sum_ns=sum(a.dur for a in acts),
        window_ns=max(fwd.end, last) - fwd.ts,
        kernels=len(acts),
        first_kernel_delay_ns=min(a.ts for a in acts) - fwd.ts,
    )


def _layer_row(name: str, acc: _Acc, n: int) -> LayerGpu:
    """A layer's accumulated times and kernels, per forward (n forwards)."""
    return LayerGpu(
        layer=name,
        index=acc.index,
        type=acc.type,
        cpu_ns=acc.cpu / n,
        api_ns=acc.api / n,
        launch_ns=acc.launch / n,
        gpu_ns=acc.gpu / n,
        kernels=acc.kernels / n,
        kernel_rows=sorted(
            (KernelRow(k, c, v[0] / n, v[1] / n) for (k, c), v in acc.by_kernel.items()),
            key=lambda r: -r.gpu_ns,
        ),
    )
