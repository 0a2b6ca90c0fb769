"""py-spy samples attributed to stages, layers and threads; speedscope's hot functions; the files.

A sample's stage is read from its own stack (the Pipeline.<stage> frame), which needs no clock;
the clock places the samples in the measured iterations and in the layer spans: each converted
stack interval is split over the layer spans from markers.jsonl by overlap (consecutive layers
often share one stack), so a sample's layer is known to within one sampling period plus the clock
bound. `stage_agreement` in the clock summary is the share of samples (at stack changes, in the
measured iterations) whose converted time falls in the markers of the stage their own stack shows;
`stage_agreement_within_bound` the share within the clock's bound of such markers: the check of
what the clock claims (a sample that lands in the next stage, but within the bound the clock gives
there, does not contradict it; a clock off by more than its bound, as by half an iteration, does; one off
by whole iterations cannot be told this way, the coarse fit in clock.py settles that). Shares are of sampled
time, by leaf frame (see parse.py).

Speedscope files carry no timestamps: they give the pass's hottest functions and shares, with no
stage, layer or clock (the summary says so).
"""

from __future__ import annotations

import bisect
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import chain, takewhile
from pathlib import Path
from typing import Any

from hwprof.collectors.pyspy.clock import PySpyClock, fit_clock, stage_of
from hwprof.collectors.pyspy.parse import (
    THREAD_FRAME,
    Frame,
    Segment,
    ThreadInfo,
    leaf_state,
    load_chrometrace,
    open_text,
)

from hwprof.core.atomic import atomic_write_text
from hwprof.core.kernels import most
from hwprof.core.markers import Marker
from hwprof.core.spans import Piece, measured_pieces
from hwprof.schema.codec import JsonObject
from hwprof.schema.records import MetricTables, Span, ThreadName, metrics_path, records_path, write_records
from hwprof.schema.summaries_tools import PyspySummary

NAME = "pyspy"
TOP = 10
SPEEDSCOPE_UNITS_NS = {"seconds": 1e9, "milliseconds": 1e6, "microseconds": 1e3, "nanoseconds": 1.0}


@dataclass
class Bucket:
    """Sampled time of one stage or layer, by state, function and library."""

    ns: float = 0.0
    states: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    python: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    native: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    libraries: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add(self, stack: tuple[Frame, ...], ns: float) -> None:
        self.ns += ns
        self.states[leaf_state(stack)] += ns
        py = next((f for f in reversed(stack) if f.is_python), None)
        if py is not None:
            self.python[py.label()] += ns
        if stack and not stack[-1].is_python:
            self.native[stack[-1].label()] += ns
            self.libraries[stack[-1].library] += ns
        elif stack:
            self.libraries["python"] += ns

    def to_dict(self, n_iter: int, unit: str = "ms_per_iter", scale: float = 1e6) -> dict[str, Any]:
        """Weights are ns; unit/scale name and scale the times ("ms_per_iter"/1e6, or "ms"/1e6)."""
        total = self.ns or 1.0

        def top(counter: dict[str, float]) -> list[dict[str, Any]]:
            return [{"function": k, unit: v / scale / n_iter, "share": v / total} for k, v in most(counter, TOP)]

        return {
            ("sampled_ms_per_iter" if unit == "ms_per_iter" else unit): self.ns / scale / n_iter,
            "shares": {k: v / total for k, v in sorted(self.states.items())},
            "python": top(self.python),
            "native": top(self.native),
            "libraries": {k: v / total for k, v in most(self.libraries)},
        }


@dataclass
class Converted:
    spans: list[Span]
    threads: list[ThreadName]
    metrics: MetricTables
    hotspots: JsonObject
    """pyspy.hotspots.json's document."""
    summary: PyspySummary


@dataclass
class _Attribution:
    """The measured iterations' sampled time by stage, layer and thread, with the stage-agreement check."""

    stages: defaultdict[str, Bucket] = field(default_factory=lambda: defaultdict(Bucket))
    layers: defaultdict[str, Bucket] = field(default_factory=lambda: defaultdict(Bucket))
    threads: defaultdict[str, Bucket] = field(default_factory=lambda: defaultdict(Bucket))
    whole: Bucket = field(default_factory=Bucket)
    kept: list[Segment] = field(default_factory=list)
    agreed: int = 0
    """Samples (at stack changes) whose converted time lies in the stage their stack shows."""
    agreed_within_bound: int = 0
    """... or within the clock's bound at the sample of a stretch of that stage."""
    checked: int = 0


def convert_chrometrace(path: Path, markers: list[Marker], rate: int, launched_ns: int | None = None) -> Converted:
    segments, threads = load_chrometrace(path)
    if not segments:
        raise ValueError(f"{path}: no samples")
    clock = fit_clock(segments, markers, launched_ns)
    pieces = measured_pieces(markers)
    n_iter = max(len({p.iteration for p in pieces}), 1)
    main_key = _main_thread(segments, threads)
    window = (pieces[0].start_ns, pieces[-1].end_ns) if pieces else (0, 0)
    att = _attribute(segments, threads, main_key, clock, pieces, window)
    metrics = _chrometrace_tables(att, n_iter, rate)  # first: its rows add the missing states (0) to the buckets
    whole = att.whole
    hotspots = {
        "iterations": n_iter,
        "rate_hz": rate,
        "main_thread": _thread_label(threads[main_key]) if main_key is not None else None,
        "measured": whole.to_dict(n_iter),
        "stages": {k: b.to_dict(n_iter) for k, b in att.stages.items()},
        "layers": {k: b.to_dict(n_iter) for k, b in att.layers.items()},
        "threads": {k: b.to_dict(n_iter) for k, b in att.threads.items()},
    }
    summary = PyspySummary.of(
        format="chrometrace",
        segments=len(segments),
        threads=len(threads),
        estimated_samples_measured=round(whole.ns / 1e9 * rate),
        measured_ms=(window[1] - window[0]) / 1e6,
        shares_measured={k: v / (whole.ns or 1) for k, v in sorted(whole.states.items())},
        top_libraries={k: v / (whole.ns or 1) for k, v in most(whole.libraries, 6)},
        clock=_clock_summary_json(clock, att, launched_ns),
    )
    return Converted(_frame_spans(att.kept, threads, clock), _thread_names(threads), metrics, hotspots, summary)


def _attribute(
    segments: list[Segment],
    threads: dict[int, ThreadInfo],
    main_key: int | None,
    clock: PySpyClock,
    pieces: list[Piece],
    window: tuple[int, int],
) -> _Attribution:
    """Each segment's time inside the measured iterations, to its thread; the main thread's also by stage/layer."""
    starts = [p.start_ns for p in pieces]
    att = _Attribution()
    for seg in segments:
        s = clock.to_mono(seg.start_us)
        e = clock.to_mono(seg.end_us)
        if e <= window[0] or s >= window[1]:
            continue
        thread = threads[seg.tid]
        i = max(bisect.bisect_right(starts, s) - 1, 0)
        # Inside the measured iterations only: a paired pass's clean iterations lie between them.
        inside = _overlap(pieces, i, s, e)
        if inside <= 0:
            continue
        att.kept.append(seg)
        att.threads[f"{thread.os_tid or seg.tid} {thread.name}".strip()].add(seg.stack, inside)
        if seg.tid == main_key:
            _check_stage(att, seg.stack, pieces, i, s, clock.bound_ns(seg.start_us))
            _attribute_main(att, seg.stack, pieces, i, s, e)
    return att


def _check_stage(att: _Attribution, stack: tuple[Frame, ...], pieces: list[Piece], i: int, s: int, bound: int) -> None:
    """The sample at a stack change (pieces[i] holds its converted time s): does it lie in the stage its own
    stack shows, or within the clock's bound there of a stretch of that stage?"""
    from_stack = stage_of(stack)
    if from_stack is None or not pieces[i].start_ns <= s < pieces[i].end_ns:
        return
    att.checked += 1
    if pieces[i].stage == from_stack:
        att.agreed += 1
        att.agreed_within_bound += 1
        return
    # pieces do not overlap: walk out from pieces[i] either way while within the bound (no copy of the list)
    before = takewhile(lambda p: p.end_ns >= s - bound, map(pieces.__getitem__, range(i - 1, -1, -1)))
    after = takewhile(lambda p: p.start_ns <= s + bound, map(pieces.__getitem__, range(i + 1, len(pieces))))
    att.agreed_within_bound += any(p.stage == from_stack for p in chain(before, after))


def _attribute_main(att: _Attribution, stack: tuple[Frame, ...], pieces: list[Piece], i: int, s: int, e: int) -> None:
    """A main-thread segment [s, e) over the pieces from pieces[i] on: its stage from the stack, else by time."""
    from_stack = stage_of(stack)
    while i < len(pieces) and pieces[i].start_ns < e:
        p0, p1, by_time, layer = pieces[i].start_ns, pieces[i].end_ns, pieces[i].stage, pieces[i].layer
        overlap = min(e, p1) - max(s, p0)
        i += 1
        if overlap <= 0:
            continue
        att.whole.add(stack, overlap)
        att.stages[from_stack or by_time or "between stages"].add(stack, overlap)
        if layer is not None and by_time == "forward" and from_stack in ("forward", None):
            att.layers[layer].add(stack, overlap)


def _chrometrace_tables(att: _Attribution, n_iter: int, rate: int) -> MetricTables:
    return MetricTables(
        layers={k: _metric_row(b, n_iter) for k, b in att.layers.items()},
        stages={k: _metric_row(b, n_iter) for k, b in att.stages.items()},
        units={
            "pyspy_ms": "ms",
            "pyspy_python_share": "fraction",
            "pyspy_native_share": "fraction",
            "pyspy_waiting_share": "fraction",
        },
        methods={
            "pyspy_ms": f"py-spy sampled time of the main thread at {rate} Hz, mean per measured iteration "
            "(estimate: sampling); the stage from the sample's Pipeline.<stage> frame, the layer by overlap "
            "of the converted time with the layer spans",
            "pyspy_waiting_share": "leaf frame in libgomp or a known blocking call (heuristic)",
            "pyspy_python_share": "leaf frame is a Python frame",
            "pyspy_native_share": "leaf frame is native code, outside the OpenMP runtime and known waits",
        },
    )


def _clock_summary_json(clock: PySpyClock, att: _Attribution, launched_ns: int | None) -> JsonObject:
    out = clock.summary_json()
    if att.checked:
        out["stage_agreement"] = att.agreed / att.checked
        out["stage_agreement_within_bound"] = att.agreed_within_bound / att.checked
        out["stage_agreement_checked"] = att.checked
    if launched_ns is not None and not clock.fallback:
        out["launch_lag_ms"] = (clock.points[0][1] - launched_ns) / 1e6
    return out


def _metric_row(bucket: Bucket, n_iter: int) -> dict[str, float]:
    total = bucket.ns or 1.0
    return {
        "pyspy_ms": bucket.ns / 1e6 / n_iter,
        "pyspy_python_share": bucket.states["python"] / total,
        "pyspy_native_share": bucket.states["native"] / total,
        "pyspy_waiting_share": bucket.states["waiting"] / total,
    }


def _main_thread(segments: list[Segment], threads: dict[int, ThreadInfo]) -> int | None:
    for key, info in threads.items():
        if info.name == "MainThread":
            return key
    counts = Counter(s.tid for s in segments)
    return counts.most_common(1)[0][0] if counts else None


def _thread_label(info: ThreadInfo) -> str:
    return f"{info.os_tid or info.key} {info.name}".strip()


def _thread_names(threads: dict[int, ThreadInfo]) -> list[ThreadName]:
    return [ThreadName(t.os_tid, t.name) for t in threads.values() if t.os_tid is not None and t.name]


def _frame_spans(segments: list[Segment], threads: dict[int, ThreadInfo], clock: PySpyClock) -> list[Span]:
    """The samples as a flame chart: one span per frame per run of samples that kept it."""
    spans: list[Span] = []
    by_tid: dict[int, list[Segment]] = defaultdict(list)
    for seg in segments:
        by_tid[seg.tid].append(seg)
    for key, segs in by_tid.items():
        os_tid = threads[key].os_tid or key
        track = f"py-spy:{os_tid}"
        open_: list[tuple[Frame, int]] = []
        last_end = None
        for seg in segs:
            if last_end is not None and seg.start_us != last_end:
                for frame, start in open_:
                    spans.append(_frame_span(frame, start, last_end, track, os_tid, clock))
                open_ = []
            common = 0
            while common < min(len(open_), len(seg.stack)) and open_[common][0] == seg.stack[common]:
                common += 1
            for frame, start in reversed(open_[common:]):
                spans.append(_frame_span(frame, start, seg.start_us, track, os_tid, clock))
            open_ = open_[:common] + [(f, seg.start_us) for f in seg.stack[common:]]
            last_end = seg.end_us
        for frame, start in reversed(open_):
            if last_end is not None:
                spans.append(_frame_span(frame, start, last_end, track, os_tid, clock))
    spans.sort(key=lambda s: (s.track, s.ts_ns, -s.dur_ns))
    return spans


def _frame_args_json(frame: Frame) -> JsonObject:
    """A frame span's trace arguments: its library (native) or its file and line (Python)."""
    return {"library": frame.library} if not frame.is_python else {"file": frame.file, "line": frame.line}


def _frame_span(frame: Frame, start_us: int, end_us: int, track: str, tid: int, clock: PySpyClock) -> Span:
    start = clock.to_mono(start_us)
    return Span(frame.name, start, clock.to_mono(end_us) - start, track, "py-spy", tid, _frame_args_json(frame))


# ----------------------------------------------------------------------------- speedscope


def convert_speedscope(path: Path) -> Converted:
    """Hot functions and shares of a speedscope file: it has no timestamps, so no stage or layer."""
    with open_text(path) as handle:
        doc = json.load(handle)
    if "shared" not in doc or "profiles" not in doc:
        raise ValueError(f"{path}: not a speedscope file")
    frames = [
        Frame(str(f.get("name", "")), str(f.get("file", "")), int(f.get("line") or 0)) for f in doc["shared"]["frames"]
    ]
    per_thread: dict[str, Bucket] = defaultdict(Bucket)
    whole = Bucket()
    samples = 0
    for profile in doc["profiles"]:
        if profile.get("type") != "sampled":
            continue
        to_ns = SPEEDSCOPE_UNITS_NS.get(str(profile.get("unit", "none")))
        if to_ns is None:
            raise ValueError(f"{path}: speedscope weights in {profile.get('unit')!r}, not a time unit")
        name = str(profile.get("name", ""))
        for stack_ids, weight in zip(profile["samples"], profile["weights"], strict=True):
            stack = tuple(frames[i] for i in stack_ids)
            if stack and THREAD_FRAME.match(stack[0].name) and not stack[0].file:
                stack = stack[1:]
            per_thread[name].add(stack, float(weight) * to_ns)
            whole.add(stack, float(weight) * to_ns)
            samples += 1
    hotspots = {
        "iterations": None,
        "measured": whole.to_dict(1, "ms", 1e6),
        "threads": {k: b.to_dict(1, "ms", 1e6) for k, b in per_thread.items()},
        "note": "speedscope carries no timestamps: whole-process sampled time, no stage or layer",
    }
    summary = PyspySummary.of(
        format="speedscope",
        samples=samples,
        sampled_ms=whole.ns / 1e6,
        threads=len(per_thread),
        shares_whole_process={k: v / (whole.ns or 1) for k, v in sorted(whole.states.items())},
        top_libraries={k: v / (whole.ns or 1) for k, v in most(whole.libraries, 6)},
        clock={"unavailable": "speedscope carries no timestamps: no stage/layer attribution, no alignment"},
    )
    return Converted([], [], MetricTables(), hotspots, summary)


def write_outputs(out_dir: Path, converted: Converted) -> list[str]:
    names = []
    if converted.spans or converted.threads:
        write_records(records_path(out_dir, NAME), [*converted.threads, *converted.spans])
        names.append(records_path(out_dir, NAME).name)
    if converted.metrics.layers or converted.metrics.stages:
        converted.metrics.save(metrics_path(out_dir, NAME))
        names.append(metrics_path(out_dir, NAME).name)
    atomic_write_text(out_dir / f"{NAME}.hotspots.json", json.dumps(converted.hotspots, indent=1))
    names.append(f"{NAME}.hotspots.json")
    return names


def _overlap(pieces: list[Piece], i: int, start_ns: int, end_ns: int) -> int:
    """ns of [start_ns, end_ns) inside the measured pieces, from pieces[i] on."""
    total = 0
    while i < len(pieces) and pieces[i].start_ns < end_ns:
        total += max(min(end_ns, pieces[i].end_ns) - max(start_ns, pieces[i].start_ns), 0)
        i += 1
    return total
