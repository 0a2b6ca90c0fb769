"""Spans from markers, and latency statistics: pure functions over marker lists."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from hwprof.core.markers import Marker, read_markers


@dataclass(frozen=True, slots=True)
class SpanTime:
    kind: str
    name: str
    iteration: int
    warmup: bool
    start_ns: int
    end_ns: int
    index: int = -1
    clean: bool = False
    """A clean ("off") iteration of a paired pass: not measured (see hwprof.session.paired)."""

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True, slots=True)
class MarkerReading:
    """What a reading taken at a marker holds of the marker (a counter group's, RAPL's): the collectors' readings
    add their values after these fields."""

    kind: str
    phase: str
    name: str
    iteration: int
    t_ns: int


class BeginEnd(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def phase(self) -> str: ...
    @property
    def name(self) -> str: ...


E = TypeVar("E", bound=BeginEnd)


def pair_begin_end(events: Iterable[E], open_: dict[tuple[str, str], list[E]] | None = None) -> Iterator[tuple[E, E]]:
    """(begin, end) pairs, matched per kind and name with proper nesting; unclosed begins are dropped, or kept in
    `open_` for the events that follow (LiveSpans).

    Works on markers and on anything read at markers (e.g. RAPL readings), in end order.
    """
    open_ = {} if open_ is None else open_
    for event in events:
        key = (event.kind, event.name)
        if event.phase == "B":
            open_.setdefault(key, []).append(event)
        elif open_.get(key):
            yield open_[key].pop(), event


def pair_spans(markers: Iterable[Marker], open_: dict[tuple[str, str], list[Marker]] | None = None) -> list[SpanTime]:
    """Spans of begin and end markers, sorted by start (outer before inner); `open_`: pair_begin_end's."""
    spans = [
        SpanTime(e.kind, e.name, b.iteration, b.warmup, b.t_ns, e.t_ns, b.index, b.clean)
        for b, e in pair_begin_end(markers, open_)
    ]
    spans.sort(key=lambda s: (s.start_ns, -s.end_ns))
    return spans


def durations_ms(spans: Iterable[SpanTime], kind: str, warmup: bool = False) -> dict[str, list[float]]:
    """name -> durations in ms, in iteration order, of the measured (or warm-up) spans of one kind."""
    out: dict[str, list[float]] = defaultdict(list)
    for s in spans:
        if s.kind == kind and s.warmup == warmup and not s.clean:
            out[s.name].append(s.dur_ns / 1e6)
    return dict(out)


@dataclass(frozen=True)
class LatencyStats:
    n: int
    mean_ms: float
    stdev_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    min_ms: float
    max_ms: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def latency_stats(values_ms: list[float]) -> LatencyStats:
    import numpy as np

    if not values_ms:
        raise ValueError("no samples")
    a = np.asarray(values_ms, dtype=float)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    stdev = float(a.std(ddof=1)) if len(a) > 1 else 0.0
    return LatencyStats(
        len(a), float(a.mean()), stdev, float(p50), float(p90), float(p99), float(a.min()), float(a.max())
    )


def frames_per_second(batch: int, p50_ms: float) -> float:
    """Images per second end to end, as every FPS of a run is stored: the batch over the iteration's p50 (ms)."""
    return batch * 1e3 / p50_ms


def stage_stats(markers: Iterable[Marker]) -> dict[str, LatencyStats]:
    """Per-stage statistics of the measured iterations, plus "iteration" for the whole pipeline."""
    spans = pair_spans(markers)
    stats = {name: latency_stats(v) for name, v in durations_ms(spans, "stage").items()}
    whole = durations_ms(spans, "iteration").get("iteration")
    if whole:
        stats["iteration"] = latency_stats(whole)
    return stats


OTHER = "other"
"""A program's time in an iteration that no stage claims."""


def program_stage_stats(markers: Iterable[Marker]) -> dict[str, LatencyStats]:
    """A program's stages, per measured iteration: each stage's time in the iteration (its calls added up, 0 where
    it did not run), "other" for the time no stage claims, and "iteration"; so that the stages' and other's
    means add up to the iteration's. A program calls a known function any number of times per iteration (a batch
    of imreads, a write every tenth frame), where hwprof's own pipeline runs each stage once.

    The driver marks the outermost stage alone and never inside the forward (hwprof.program.driver), so no time
    is counted twice. "other" holds the program's own code between stages (its array conversions, its loop) and
    hwprof's marker work at each stage's boundaries (microseconds)."""
    spans = [s for s in pair_spans(markers) if not s.warmup and not s.clean]
    iterations = {s.iteration: s.dur_ns for s in spans if s.kind == "iteration"}
    forwards = {s.iteration for s in spans if s.kind == "stage" and s.name == "forward"}
    if forwards:  # an iteration with no forward is a program's tail after its last one (runs before the driver
        iterations = {i: d for i, d in iterations.items() if i in forwards}  # dropped it), not a zero forward
    order = sorted(iterations)
    per: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for s in spans:
        if s.kind == "stage" and s.iteration in iterations:
            per[s.name][s.iteration] += s.dur_ns
    if not order:
        return {}
    stats = {name: latency_stats([by.get(i, 0) / 1e6 for i in order]) for name, by in per.items()}
    claimed = [sum(by.get(i, 0) for by in per.values()) for i in order]
    stats[OTHER] = latency_stats([max(iterations[i] - c, 0) / 1e6 for i, c in zip(order, claimed, strict=True)])
    stats["iteration"] = latency_stats([iterations[i] / 1e6 for i in order])
    return stats


def is_measured(span: SpanTime) -> bool:
    """In a measured iteration: not warm-up, not a clean iteration of a paired pass, and not a one-off
    forward outside the iterations (iteration -1)."""
    return span.iteration >= 0 and not span.warmup and not span.clean


def measured_spans(markers: Iterable[Marker]) -> list[SpanTime]:
    return [s for s in pair_spans(markers) if is_measured(s)]


def forward_ms_by_iteration(markers: Iterable[Marker]) -> dict[int, float]:
    """Measured iteration -> its forward stage's duration in ms, in iteration order."""
    return {s.iteration: s.dur_ns / 1e6 for s in measured_spans(markers) if s.kind == "stage" and s.name == "forward"}


def clean_forward_ms_by_iteration(markers: Iterable[Marker]) -> dict[int, float]:
    """Clean iteration -> its forward stage's duration in ms: the "off" side of a paired pass."""
    return {s.iteration: s.dur_ns / 1e6 for s in pair_spans(markers) if is_clean_forward(s)}


def is_clean_forward(span: SpanTime) -> bool:
    """The forward stage of a clean iteration of a paired pass (not a warm-up, not iteration -1)."""
    return span.clean and not span.warmup and span.iteration >= 0 and span.kind == "stage" and span.name == "forward"


def forward_p50(spans: Iterable[SpanTime]) -> float | None:
    """Median forward-stage duration (ms) of the given spans, or None when there is none."""
    import statistics

    values = durations_ms(spans, "stage").get("forward")
    return statistics.median(values) if values else None


def layer_self_ns(spans: Iterable[SpanTime]) -> dict[str, list[int]]:
    """name -> self (exclusive) ns per measured iteration for layer spans (children subtracted)."""
    out: dict[str, list[int]] = defaultdict(list)
    for span, self_ns in layer_self_spans(spans):
        out[span.name].append(self_ns)
    return dict(out)


def layer_self_spans(spans: Iterable[SpanTime]) -> Iterator[tuple[SpanTime, int]]:
    """Each measured layer span with its self (exclusive) ns: its duration less its child layers'."""
    stack: list[tuple[SpanTime, list[int]]] = []
    for s in (s for s in spans if s.kind == "layer" and is_measured(s)):
        while stack and stack[-1][0].end_ns <= s.start_ns:
            done, child = stack.pop()
            yield done, done.dur_ns - child[0]
        if stack:
            stack[-1][1][0] += s.dur_ns
        stack.append((s, [0]))
    while stack:
        done, child = stack.pop()
        yield done, done.dur_ns - child[0]


class LiveSpans:
    """The measured spans of a running pass, paired as its markers arrive: what its stopping rule asks after each
    unit (hwprof.session.pass_steps) without pairing every marker again. Why: re-read whole, the rule's figures
    grew with the pass, quadratically (yolov8n at 64: 733 iterations, 0.1-0.34 s between units by their end,
    34 of the kernels pass's 43.6 s).

    `update()` pairs the markers appended since the last call (a begin whose end is still to come waits for it);
    the figures are those of measured_spans, forward_ms_by_iteration, clean_forward_ms_by_iteration and
    layer_self_ns over every marker so far."""

    def __init__(self, markers: list[Marker]) -> None:
        self._markers = markers
        self.measured: list[SpanTime] = []
        self.forward_ms: dict[int, float] = {}
        self.clean_forward_ms: dict[int, float] = {}
        self.iterations = 0
        """Measured iterations whose end has come."""
        self._restart()

    def _restart(self) -> None:
        self._read = 0
        self._open: dict[tuple[str, str], list[Marker]] = {}
        self.measured.clear()
        self.forward_ms.clear()
        self.clean_forward_ms.clear()
        self.iterations = 0
        self._self_ns: dict[str, dict[int, int]] = defaultdict(dict)

    def update(self) -> LiveSpans:
        if len(self._markers) < self._read:  # markers were dropped (MarkerLog.discard_unflushed): pair them anew
            self._restart()
        new = self._markers[self._read :]
        self._read = len(self._markers)
        done = pair_spans(new, self._open)
        for s in done:
            if is_clean_forward(s):
                self.clean_forward_ms[s.iteration] = s.dur_ns / 1e6
        measured = [s for s in done if is_measured(s)]
        late = bool(measured and self.measured and measured[0].start_ns < self.measured[-1].start_ns)
        self.measured.extend(measured)
        if late:  # a span that began before the last update ended in this one: the order of pair_spans kept
            self.measured.sort(key=lambda s: (s.start_ns, -s.end_ns))
        for s in measured:
            if s.kind == "stage" and s.name == "forward":
                self.forward_ms[s.iteration] = s.dur_ns / 1e6
            self.iterations += s.kind == "iteration"
        for span, self_ns in layer_self_spans(measured):
            by_iteration = self._self_ns[span.name]
            by_iteration[span.iteration] = by_iteration.get(span.iteration, 0) + self_ns
        return self

    def self_ns_by_iteration(self) -> dict[str, list[float]]:
        """Each layer's self ns per measured iteration (a layer called twice in a forward: both calls summed)."""
        return {name: [float(v) for v in by_iteration.values()] for name, by_iteration in self._self_ns.items()}


@dataclass(frozen=True, slots=True)
class Piece:
    """A stretch of a measured iteration with one stage and one innermost layer running."""

    start_ns: int
    end_ns: int
    stage: str | None
    layer: str | None
    """The innermost open layer (self attribution, as the counters do), None between layers."""
    iteration: int


def measured_pieces(markers: Iterable[Marker]) -> list[Piece]:
    """Pieces covering the measured iterations, in time order: what was running when.

    Markers are taken in time order (a stable sort: live markers already are; layer markers
    replayed from a runtime's profiler come after the iterations in the file).
    """
    pieces: list[Piece] = []
    stage: str | None = None
    layers: list[str] = []
    inside = False
    iteration = -1
    last_t: int | None = None
    for m in sorted(markers, key=lambda m: m.t_ns):
        if inside and last_t is not None and m.t_ns > last_t:
            pieces.append(Piece(last_t, m.t_ns, stage, layers[-1] if layers else None, iteration))
        last_t = m.t_ns
        if m.kind == "iteration":
            inside = m.phase == "B" and m.measured
            iteration = m.iteration
            stage, layers = None, []
        elif m.kind == "stage":
            stage = m.name if m.phase == "B" else None
        elif m.kind == "layer":
            if m.phase == "B":
                layers.append(m.name)
            elif layers and layers[-1] == m.name:
                layers.pop()
    return pieces


def forward_p50_ms(markers: list[Marker]) -> float | None:
    return forward_p50(measured_spans(markers))


def timing_forward_s(run_dir: Path) -> float | None:
    """The clean timing pass's forward p50, if it ran before this pass."""
    path = run_dir / "passes" / "timing" / "markers.jsonl"
    if not path.exists():
        return None
    p50 = forward_p50(measured_spans(read_markers(path)))
    return p50 / 1e3 if p50 else None


def timing_iteration_s(run_dir: Path) -> float | None:
    """The clean timing pass's whole-iteration p50 (every stage: decode and encode of a video, a program's own
    work between its model's calls), if it ran before this pass: what a pass's iterations take."""
    import statistics

    path = run_dir / "passes" / "timing" / "markers.jsonl"
    if not path.exists():
        return None
    values = durations_ms(measured_spans(read_markers(path)), "iteration").get("iteration")
    return statistics.median(values) / 1e3 if values else None
