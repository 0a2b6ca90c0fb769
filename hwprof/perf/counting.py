"""Pure functions on counter readings: scaling, attribution to spans, rotation, derived metrics.

A reading is taken at every marker: for each event measured at that moment, the raw value and
the group's time_enabled / time_running (summed over inherited threads by the kernel).

Attribution. Each interval between two consecutive readings belongs to the innermost span open
during it. A span's *self* count is the sum of the intervals it owns; its *inclusive* count is
its end reading minus its begin reading. The forward stage's self count is therefore the *gap*:
what ran inside forward but outside every layer (hooks between layers, the model's own Python
between calls). sum(self of layers) + gap == forward inclusive is then a real check: intervals
are counted independently of the begin/end deltas, and multiplex scaling breaks the identity
by exactly the scaling error.

Scaling. A delta over an interval is scaled by that interval's enabled/running ratio
(as `perf stat -I` does); an interval in which the event did not run at all is unmeasured (None).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from hwprof.core.spans import MarkerReading
from hwprof.perf.derived import derived_metrics
from hwprof.perf.steal import CpuTimeBand, cpu_count
from hwprof.schema.summaries_cpu import TaskClockCheck

FORWARD = "forward"


@dataclass(frozen=True, slots=True)
class Count:
    value: int
    enabled: int
    running: int
    group: int = 0
    """The counter group it came from: deltas are only taken within one group."""


@dataclass(frozen=True, slots=True)
class Reading(MarkerReading):
    counts: Mapping[str, Count]
    cpu_ns: int | None = None
    """CPU time of the counted threads (hwprof.perf.threadcpu) at the same moment, where it was read."""
    uncharged_ns: int | None = None
    """Host steal + IRQ time (hwprof.perf.steal) at the same moment, where it was read."""


def scale(value: float, enabled: float, running: float) -> float | None:
    """value * enabled / running; None if the counter never ran (nothing was measured)."""
    if running <= 0:
        return None
    if running >= enabled:
        return float(value)
    return value * enabled / running


def running_fraction(enabled: float, running: float) -> float | None:
    if enabled <= 0:
        return None
    return min(1.0, running / enabled)


def scaled_delta(a: Count, b: Count, event_scale: float = 1.0) -> float | None:
    """The count between two readings, scaled for multiplexing over that interval only."""
    if a.group != b.group:
        return None
    enabled = b.enabled - a.enabled
    if enabled <= 0:
        return None
    delta = scale(b.value - a.value, enabled, b.running - a.running)
    return None if delta is None else delta * event_scale


@dataclass
class SpanCounts:
    kind: str
    name: str
    iteration: int
    depth: int
    t_begin: int
    t_end: int = 0
    inclusive: dict[str, float] = field(default_factory=dict)
    self: dict[str, float] = field(default_factory=dict)
    self_wall_ns: int = 0
    children: int = 0
    cpu_ns: int | None = None
    """Process CPU time over the span, where both ends read it."""
    uncharged_ns: int | None = None
    """Host steal + IRQ time over the span, where both ends read it."""
    running: dict[str, float] = field(default_factory=dict)
    """Per event: running/enabled over the span (1.0 unless multiplexed)."""

    @property
    def wall_ns(self) -> int:
        return self.t_end - self.t_begin


def attribute(readings: Sequence[Reading], scales: Mapping[str, float] | None = None) -> list[SpanCounts]:
    """Spans (closed ones, in end order) with inclusive and self counts from marker readings."""
    scales = scales or {}
    done: list[SpanCounts] = []
    stack: list[tuple[SpanCounts, Reading]] = []
    previous: Reading | None = None
    for reading in readings:
        if previous is not None and stack:
            owner = stack[-1][0]
            owner.self_wall_ns += reading.t_ns - previous.t_ns
            for event, count in reading.counts.items():
                before = previous.counts.get(event)
                if before is None:
                    continue
                delta = scaled_delta(before, count, scales.get(event, 1.0))
                if delta is not None:
                    owner.self[event] = owner.self.get(event, 0.0) + delta
        if reading.phase == "B":
            span = SpanCounts(reading.kind, reading.name, reading.iteration, len(stack), reading.t_ns)
            stack.append((span, reading))
        else:
            _close(stack, reading, done, scales)
        previous = reading
    return done


def _close(
    stack: list[tuple[SpanCounts, Reading]], end: Reading, done: list[SpanCounts], scales: Mapping[str, float]
) -> None:
    for k in range(len(stack) - 1, -1, -1):
        span, begin = stack[k]
        if span.kind == end.kind and span.name == end.name:
            break
    else:
        return
    del stack[k:]
    if stack:
        stack[-1][0].children += 1
    span.t_end = end.t_ns
    for event, count in end.counts.items():
        first = begin.counts.get(event)
        if first is None:
            continue
        delta = scaled_delta(first, count, scales.get(event, 1.0))
        if delta is not None:
            span.inclusive[event] = delta
        fraction = running_fraction(count.enabled - first.enabled, count.running - first.running)
        if fraction is not None and first.group == count.group:
            span.running[event] = fraction
    if begin.cpu_ns is not None and end.cpu_ns is not None:
        span.cpu_ns = end.cpu_ns - begin.cpu_ns
    if begin.uncharged_ns is not None and end.uncharged_ns is not None:
        span.uncharged_ns = end.uncharged_ns - begin.uncharged_ns
    done.append(span)


@dataclass
class Aggregate:
    """Per-iteration means of one span over the iterations that measured each event."""

    kind: str
    name: str
    self: dict[str, float] = field(default_factory=dict)
    inclusive: dict[str, float] = field(default_factory=dict)
    iterations: dict[str, int] = field(default_factory=dict)
    """Per event: how many iterations measured it."""
    wall_ns: float = 0.0
    self_wall_ns: float = 0.0
    running_min: dict[str, float] = field(default_factory=dict)
    has_children: bool = False
    visits: int = 0
    """Measured iterations with this span (a layer read in a share of them: hwprof.perf.layer_reads)."""


def aggregate(spans: Iterable[SpanCounts]) -> dict[tuple[str, str], Aggregate]:
    """Sum each (kind, name) within an iteration, then average over iterations per event."""
    per_iter: dict[tuple[str, str], dict[int, list[SpanCounts]]] = defaultdict(lambda: defaultdict(list))
    for span in spans:
        per_iter[(span.kind, span.name)][span.iteration].append(span)
    out: dict[tuple[str, str], Aggregate] = {}
    for key, by_iter in per_iter.items():
        agg = Aggregate(*key)
        self_sum: dict[str, float] = defaultdict(float)
        incl_sum: dict[str, float] = defaultdict(float)
        seen: dict[str, int] = defaultdict(int)
        for group in by_iter.values():
            agg.wall_ns += sum(s.wall_ns for s in group)
            agg.self_wall_ns += sum(s.self_wall_ns for s in group)
            events = set().union(*(s.inclusive for s in group))
            for event in events:
                seen[event] += 1
                incl_sum[event] += sum(s.inclusive.get(event, 0.0) for s in group)
                self_sum[event] += sum(s.self.get(event, 0.0) for s in group)
            for s in group:
                for event, fraction in s.running.items():
                    agg.running_min[event] = min(fraction, agg.running_min.get(event, 1.0))
                agg.has_children = agg.has_children or s.children > 0
        n_iter = agg.visits = len(by_iter)
        agg.wall_ns /= n_iter
        agg.self_wall_ns /= n_iter
        for event, n in seen.items():
            agg.iterations[event] = n
            agg.self[event] = self_sum[event] / n
            agg.inclusive[event] = incl_sum[event] / n
        out[key] = agg
    return out


@dataclass
class Closure:
    """sum(self of layers) + gap vs the forward stage's count, over the measured iterations."""

    layers: float
    gap: float
    forward: float

    @property
    def ratio(self) -> float | None:
        return (self.layers + self.gap) / self.forward if self.forward else None

    def to_dict(self) -> dict[str, float | None]:
        return {"sum_layers": self.layers, "gap": self.gap, "forward": self.forward, "ratio": self.ratio}


def closure(spans: Sequence[SpanCounts], stage: str = FORWARD) -> dict[str, Closure]:
    """Per event, over iterations where the stage measured it."""
    stages = {s.iteration: s for s in spans if s.kind == "stage" and s.name == stage}
    layers: dict[int, list[SpanCounts]] = defaultdict(list)
    for span in spans:
        forward = stages.get(span.iteration)
        if span.kind == "layer" and forward and forward.t_begin <= span.t_begin and span.t_end <= forward.t_end:
            layers[span.iteration].append(span)
    out: dict[str, Closure] = {}
    for iteration, forward in stages.items():
        for event, total in forward.inclusive.items():
            c = out.setdefault(event, Closure(0.0, 0.0, 0.0))
            c.forward += total
            c.gap += forward.self.get(event, 0.0)
            c.layers += sum(s.self.get(event, 0.0) for s in layers[iteration])
    return out


def cpu_check(
    spans: Sequence[SpanCounts], event: str = "task-clock", stage: str = FORWARD, cpus: int | None = None
) -> TaskClockCheck | None:
    """The stage's `event` count against the counted threads' CPU time over the same windows (both ns).

    The counted time may exceed the CPU time by the host's steal and IRQ time, and fall short of it
    by a few microseconds per context switch (hwprof.perf.steal): `consistent` says whether it falls
    in that band, where the windows read steal time (and context-switches was counted).
    """
    counted = cpu = uncharged = switches = 0.0
    n = with_uncharged = 0
    for span in spans:
        if span.kind == "stage" and span.name == stage and event in span.inclusive and span.cpu_ns is not None:
            counted += span.inclusive[event]
            cpu += span.cpu_ns
            switches += span.inclusive.get("context-switches", 0.0)
            n += 1
            if span.uncharged_ns is not None:
                uncharged += span.uncharged_ns
                with_uncharged += 1
    if not n or cpu <= 0:
        return None
    out = TaskClockCheck.of(event_ns=counted, process_cpu_ns=cpu, ratio=counted / cpu, iterations=n)
    if with_uncharged == n:
        band = CpuTimeBand(cpu, uncharged, n, cpus or cpu_count(), switches=switches)
        out.host_steal_irq_ns = uncharged
        out.context_switches = switches
        out.band = [band.lower, band.upper]
        out.ratio_band = [band.lower / cpu, band.upper / cpu]
        out.consistent = band.holds(counted)
    return out


# --- groups and rotation -------------------------------------------------------------------------


# --- derived metrics ------------------------------------------------------------------------------


def interval_series(
    samples: Sequence[tuple[int, Mapping[str, Count]]],
    scales: Mapping[str, float] | None = None,
    time_events: Iterable[str] = ("task-clock", "cpu-clock"),
    units: Mapping[str, str] | None = None,
) -> list[tuple[int, str, float, str]]:
    """Counter tracks from sampler readings: (ts_ns at interval start, track, value, unit).

    Per event a "<event> rate" track (per second, "<unit>/s" for events with a unit such as
    Joules, or CPUs for time events), plus every derived ratio whose inputs were measured in the
    interval.
    """
    scales = scales or {}
    units = units or {}
    time_set = set(time_events)
    out: list[tuple[int, str, float, str]] = []
    for (t0, a), (t1, b) in pairwise(samples):
        wall = t1 - t0
        if wall <= 0:
            continue
        deltas: dict[str, float] = {}
        for event, count in b.items():
            if event in a:
                delta = scaled_delta(a[event], count, scales.get(event, 1.0))
                if delta is not None:
                    deltas[event] = delta
        for event, delta in deltas.items():
            if event in time_set:
                out.append((t0, f"{event} rate", delta / wall, "CPUs"))
            else:
                unit = units.get(event, "count")
                per_second = "/s" if unit == "count" else f"{unit}/s"
                out.append((t0, f"{event} rate", delta * 1e9 / wall, per_second))
        for d in derived_metrics(deltas):
            if d.name not in ("memory traffic (estimate)", "CPUs utilized"):
                out.append((t0, d.name, d.value, d.unit))
    return out
