"""py-spy's clock: its chrometrace `ts` (us since py-spy started) mapped onto CLOCK_MONOTONIC.

py-spy stamps a sample when its recorder thread handles it (on a busy host it lags the sampler:
"N s behind in sampling"). The offset to CLOCK_MONOTONIC is measured from events visible on both
sides: the pipeline's stage functions (`Pipeline.forward` ...), or a user program's model forwards
(`ProgramDriver.model_forward`), appear in the samples, and their markers carry monotonic times.
The first sample that shows a stage frame was taken after the stage's B marker, and the change
before it (a sample without the frame) before it; likewise for E. So each transition paired with
its marker bounds the offset on both sides:
marker - ts <= offset < marker - previous_ts.
1. Coarse: the offset consistent with the most forward-stage transitions (a sweep over every
   transition/marker pair; see _coarse_offset), which needs no pairing by order: short stages
   are often not sampled at all, and two forwards can merge into one sampled run.
2. Each transition is paired with the latest marker of its stage edge before it, and the bounds
   are intersected. If they all intersect, one offset (the middle) with `bound_*_us` = half the
   width; otherwise the recorder's lag varied, and the offset is measured at each transition and
   interpolated in between (`offset_range_us` says by how much it moved).
Where no transition pairs with a marker (a run too short for the rate), py-spy's launch time is
the offset, labelled as an estimate.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from hwprof.collectors.pyspy.parse import Frame, Segment

from hwprof.core.markers import STAGES, Marker

PIPELINE_FILE = "hwprof/workload/pipeline.py"
PROGRAM_FILE = "hwprof/program/driver.py"
STAGE_FRAMES = {(f"Pipeline.{stage}", PIPELINE_FILE): stage for stage in STAGES} | {
    ("ProgramDriver.model_forward", PROGRAM_FILE): "forward"
}
"""Frames that hold a stage, by (name, file): the built-in pipeline's stage methods, and the frame that holds each
marked forward of a user's program (hwprof.program.driver): a program run always has it, whatever its stages."""
PAIR_TOLERANCE_NS = 100_000_000
"""How far a transition's marker may sit from where the forward anchors put it (recorder lag drift)."""


@dataclass
class Transition:
    stage: str
    phase: str
    ts_us: int
    prev_us: int | None


def stage_of(stack: tuple[Frame, ...]) -> str | None:
    """The stage a sample was in, from its Pipeline.<stage> frame (None between stages)."""
    for frame in stack:
        stage = frame_stage(frame)
        if stage is not None:
            return stage
    return None


def frame_stage(frame: Frame) -> str | None:
    """The stage a frame holds, if it is one of STAGE_FRAMES."""
    for (name, file), stage in STAGE_FRAMES.items():
        if frame.name == name and frame.file.endswith(file):
            return stage
    return None


def stage_transitions(segments: list[Segment]) -> list[Transition]:
    """Where a Pipeline.<stage> frame appears (B) or disappears (E) in a thread's samples."""
    out: list[Transition] = []
    last_tid: int | None = None
    before: set[str] = set()
    prev_end: int | None = None
    for seg in segments:
        if seg.tid != last_tid:
            last_tid, before, prev_end = seg.tid, set(), None
        elif prev_end is not None and seg.start_us != prev_end:
            before = set()  # a gap: no sample in between
        now = {stage for stage in map(frame_stage, seg.stack) if stage is not None}
        for stage in now - before:
            out.append(Transition(stage, "B", seg.start_us, seg.prev_us))
        for stage in before - now:
            out.append(Transition(stage, "E", seg.start_us, seg.prev_us))
        before, prev_end = now, seg.end_us
    return out


class NoClockAnchor(ValueError):
    """No stage transition in the samples pairs with a marker, so py-spy's clock cannot be measured."""

    def __init__(self, why: str) -> None:
        super().__init__(f"{why}: cannot align py-spy's clock")
        self.why = why


@dataclass
class PySpyClock:
    """monotonic ns = ts_us * 1000 + offset(ts_us), offset interpolated between measured points.

    py-spy stamps a sample when its recorder thread handles it, not when the sampler thread took
    it; on a busy host the recorder lags by a varying amount ("N s behind in sampling"), so one
    offset does not fit a whole run. Each stage transition measures the offset at its time.
    """

    points: list[tuple[int, int, int]]
    """(ts_us, offset_ns, half width of its interval in ns), sorted by ts_us."""
    inconsistent: int
    """Points whose transitions' intervals did not intersect (offset = middle of the crossed bounds)."""
    transitions: int = 0
    """Sample times with a stage transition matched to a marker."""
    fallback: str = ""
    """Why no transition could be used, when the offset is py-spy's launch time instead (an estimate)."""

    def offset(self, ts_us: int) -> int:
        times = [p[0] for p in self.points]
        i = bisect.bisect_right(times, ts_us)
        if i == 0:
            return self.points[0][1]
        if i == len(self.points):
            return self.points[-1][1]
        (t0, o0, _), (t1, o1, _) = self.points[i - 1], self.points[i]
        return o0 + round((o1 - o0) * (ts_us - t0) / (t1 - t0))

    def to_mono(self, ts_us: int) -> int:
        return ts_us * 1000 + self.offset(ts_us)

    def bound_ns(self, ts_us: int) -> int:
        """The offset's half width at ts_us: a constant fit's, else the wider of the two points around it."""
        times = [p[0] for p in self.points]
        i = bisect.bisect_right(times, ts_us)
        around = self.points[max(i - 1, 0) : i + 1]
        return max(p[2] for p in around)

    def summary_json(self) -> dict[str, Any]:
        """run.json's pyspy.summary.clock: how the samples' times were put on the monotonic clock."""
        if self.fallback:
            return {
                "method": "estimate: py-spy's ts 0 taken as the monotonic time just before py-spy was started, "
                "because " + self.fallback + "; py-spy's ts 0 fell between 3 ms before and 47 ms after that "
                "launch time in runs here, so the samples' times are off by as much",
                "mode": "launch-time",
                "offset_ns": self.points[0][1],
                "transitions": 0,
                "points": 1,
                "bound_median_us": None,
                "bound_max_us": None,
            }
        offsets = [p[1] for p in self.points]
        halves = sorted(p[2] for p in self.points)
        return {
            "method": "stage frames (Pipeline.<stage>, or a program's ProgramDriver.model_forward) "
            "appearing/disappearing in the samples vs the stage markers' monotonic times: a transition puts "
            "the offset between (marker - its sample) and (marker - the sample before); one offset when every "
            "interval intersects (bound = half the intersection), else one per transition, interpolated (the "
            "recorder lagged the sampler). The bound is the offset's: each sample's stamp also carries the "
            "recorder's lag at that sample, which varies from sample to sample (with --native, whose unwinding "
            "takes milliseconds, a sample stamped 0.9 ms past its stage under a 0.0 ms bound)",
            "mode": "constant" if len(self.points) == 1 else "interpolated",
            "offset_ns": offsets[0],
            "transitions": self.transitions,
            "points": len(self.points),
            "bound_median_us": halves[len(halves) // 2] / 1000,
            "bound_max_us": halves[-1] / 1000,
            "offset_range_us": (max(offsets) - min(offsets)) / 1000,
            "inconsistent_points": self.inconsistent,
        }


def fit_clock(segments: list[Segment], markers: list[Marker], guess_ns: int | None = None) -> PySpyClock:
    """The clock from stage transitions; where the samples show none that pairs with a marker (a run
    too short for the sampling rate), py-spy's launch time `guess_ns`, labelled as an estimate."""
    try:
        return _clock_from_transitions(segments, markers, guess_ns)
    except NoClockAnchor as exc:
        if guess_ns is None:
            raise
        return PySpyClock([(0, guess_ns, 0)], 0, 0, fallback=exc.why)


def _clock_from_transitions(segments: list[Segment], markers: list[Marker], guess_ns: int | None) -> PySpyClock:
    """Find a coarse offset from the forward stage, pair every transition with its marker, bound the offset."""
    transitions = [t for t in stage_transitions(segments) if t.prev_us is not None]
    marks: dict[tuple[str, str], list[int]] = defaultdict(list)
    for m in markers:
        if m.kind == "stage":
            marks[(m.name, m.phase)].append(m.t_ns)
    coarse = _coarse_offset([t for t in transitions if t.stage == "forward"], marks, guess_ns)
    bounds: dict[int, list[int]] = {}  # ts_us -> [lo, hi]
    for t in transitions:
        assert t.prev_us is not None
        mark = _nearest_mark(marks[(t.stage, t.phase)], t.prev_us * 1000 + coarse, t.ts_us * 1000 + coarse)
        if mark is None:
            continue  # e.g. sample_batch()'s stage frames before warm-up, which have no marker
        lo, hi = mark - t.ts_us * 1000, mark - t.prev_us * 1000
        if t.ts_us in bounds:
            lo, hi = max(lo, bounds[t.ts_us][0]), min(hi, bounds[t.ts_us][1])
        bounds[t.ts_us] = [lo, hi]
    if not bounds:
        raise NoClockAnchor("no stage transition in the samples pairs with a marker")
    lo = max(b[0] for b in bounds.values())
    hi = min(b[1] for b in bounds.values())
    if lo <= hi:  # one offset fits every transition: the recorder kept pace
        return PySpyClock([(min(bounds), (lo + hi) // 2, (hi - lo) // 2)], 0, len(bounds))
    points = [(ts, (lo + hi) // 2, abs(hi - lo) // 2) for ts, (lo, hi) in sorted(bounds.items())]
    return PySpyClock(points, sum(1 for lo, hi in bounds.values() if lo > hi), len(bounds))


def _nearest_mark(key: list[int], lo: int, hi: int) -> int | None:
    """The marker of a stage edge nearest to [lo, hi] (the converted times of the sample before the
    change and of the change), if within PAIR_TOLERANCE_NS. A stage too short to be sampled leaves
    one transition for several markers, all inside that interval: the last one bounds it."""
    i = bisect.bisect_right(key, hi)
    candidates = [key[j] for j in (i - 1, i) if 0 <= j < len(key)]
    if not candidates:
        return None
    mark = min(candidates, key=lambda m: 0 if lo <= m <= hi else min(abs(m - lo), abs(m - hi)))
    distance = 0 if lo <= mark <= hi else min(abs(mark - lo), abs(mark - hi))
    return mark if distance <= PAIR_TOLERANCE_NS else None


def _coarse_offset(forward: list[Transition], marks: dict[tuple[str, str], list[int]], guess_ns: int | None) -> int:
    """The offset consistent with the most forward-stage transitions.

    A transition seen at ts after a sample at prev, paired with a marker m of the same edge, allows
    offsets in [m - ts, m - prev). Sweeping over every (transition, marker) pair finds the offsets
    covered most often. Pipeline.forward frames appear only inside forward markers (sample_batch()
    and the layer table never call it), so the true offset matches them all, while one shifted by k
    iterations loses the k at the ends: the maximum is unique. Ties go to the one nearest the guess.
    """
    edges: list[tuple[int, int]] = []
    for t in forward:
        assert t.prev_us is not None
        for m in marks[("forward", t.phase)]:
            edges.append((m - t.ts_us * 1000, 1))
            edges.append((m - t.prev_us * 1000, -1))
    if not edges:
        raise NoClockAnchor("no forward stage visible in both the samples and the markers")
    edges.sort()
    best: list[tuple[int, int, int]] = []  # (count, start, end)
    count = 0
    for (x, step), (nxt, _) in zip(edges, [*edges[1:], (edges[-1][0], 0)], strict=True):
        count += step
        if nxt > x and count > 0:
            if not best or count > best[0][0]:
                best = [(count, x, nxt)]
            elif count == best[0][0]:
                best.append((count, x, nxt))
    target = guess_ns if guess_ns is not None else (best[0][1] + best[0][2]) // 2
    chosen = min(best, key=lambda b: 0 if b[1] <= target < b[2] else min(abs(target - b[1]), abs(target - b[2])))
    return (chosen[1] + chosen[2]) // 2
