"""The run directory as tracks of slices and counters: what the Perfetto writer serializes.

Read from the run directory alone (run.json, each pass's markers.jsonl, model.json and the
collectors' generic `*.records.jsonl` / `*.metrics.json`), never from a collector module:

- per pass a process (pid: run.json's `passes.<pass>.pid` when recorded, else inferred, see
  `pass_main_thread`); its main thread carries iteration > stage > layer slices from the markers and
  every span a collector recorded on that thread (aten ops > oneDNN primitives), nested into them;
- other threads' spans on their thread tracks; spans on named tracks (py-spy stacks, ...) on
  tracks of their own inside the process; counter samples as counter tracks with their units;
- an advised run's ABBA blocks (advice.json) as a process "advise" of its own (trace_advice.py);
- callstack samples (the kernels pass's perf samples) as instants per thread, never as slices: the
  writer emits them as Perfetto's own perf samples, which the UI draws on each thread's
  "Callstacks" track and sums into a flamegraph over any selected range (one layer, one forward).

Every slice is closed and properly nested on its track (Perfetto requires it): a begin marker
with no end is closed at the pass's last timestamp and flagged `unclosed`; a recorded span that
straddles a marker boundary is cut at it and flagged with the ns removed (`clamped_ns`). Sampled
stacks drawn as slices (py-spy: one slice per run of an unchanged stack) are split at every layer
boundary, so that each piece lies inside the layer that ran while it was sampled, as py-spy's
per-layer table charges it (by overlap).
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwprof.analysis.advice.table import load_advice
from hwprof.analysis.validity import checked
from hwprof.analysis.workload import workload_view
from hwprof.core.markers import Marker
from hwprof.core.spans import OTHER
from hwprof.rundir.reader import RunData, records_files
from hwprof.schema.run import CollectorEntry
from hwprof.schema.summaries_tools import PerfSamplingSummary
from hwprof.trace.advice import advice_timeline
from hwprof.trace.model import (
    LEVEL_ITERATION,
    LEVEL_LAYER,
    LEVEL_STAGE,
    STACK_CATEGORIES,
    SYNTHETIC_PID_BASE,
    UI_MODE_PREFIXES,
    ArgValue,
    CounterTrack,
    PassTimeline,
    Slice,
    SliceArgs,
    SliceTrack,
    Timeline,
)
from hwprof.trace.nesting import (
    attach_layers,
    coalesce_runs,
    nest,
    slice_order,
    split_at,
    stack_levels,
    stack_runs,
)
from hwprof.trace.records import (
    PassRecords,
    SpanGroup,
    named_threads,
    pass_main_thread,
    read_pass_records,
    thread_of,
)
from hwprof.trace.slice_args import layer_arguments, stage_arguments

SAMPLES_NOTE = (
    "CPU samples (perf, kernels pass): one Perfetto perf sample per sample, at its instant, on its own thread "
    "(the pipeline and torch's OpenMP workers); the UI draws them on each thread's 'Callstacks' track, and an area "
    "selection over them (a layer, a forward) opens a 'Perf Sample Flamegraph' of the kernels that ran; "
    "SQL: the perf_sample table. A sample in a layer's time range is the layer's, as in the report's kernel tables"
)
STACK_NOTE = (
    "sampled stacks: one slice per run of an unchanged stack, named by its innermost frame (in full); "
    "args.stack lists the frames root first in segments, C++ template arguments and parameter lists "
    "elided as <…> and (…); native frames without a symbol (py-spy writes their address) read 0x… "
    "(with their library where it is the innermost frame); the collector's raw files in the pass "
    "folder keep every frame in full"
)


# ----------------------------------------------------------------------------- markers


def marker_slices(
    markers: Sequence[Marker],
    labels: dict[str, str],
    layer_args: dict[str, SliceArgs],
    stage_args: dict[str, SliceArgs],
    end_ns: int,
) -> list[Slice]:
    """Iteration, stage and layer slices; a begin with no end is closed at `end_ns`, flagged."""
    open_: dict[tuple[str, str], list[Marker]] = defaultdict(list)
    out: list[Slice] = []

    def make(b: Marker, end: int, unclosed: bool) -> Slice:
        cats: list[str] = [b.kind]
        if b.warmup:
            cats.append("warmup")
        elif b.clean:
            cats.append("clean")
        elif b.iteration < 0:
            cats.append("setup")
        args: SliceArgs
        if b.kind == "layer":
            name = labels.get(b.name) or b.name.removeprefix("model.")
            level = LEVEL_LAYER + max(b.name.count(".") - 1, 0)
            args = layer_args.get(b.name, {})
        elif b.kind == "stage":
            name, level = b.name, LEVEL_STAGE
            args = {"iteration": b.iteration, **stage_args.get(b.name, {})}
        else:
            name = f"iteration {b.iteration}" + (" (warm-up)" if b.warmup else " (clean: collectors off)" * b.clean)
            level = LEVEL_ITERATION
            args = {"iteration": b.iteration, "warmup": b.warmup, "clean": b.clean}
        if unclosed:
            args = {**args, "unclosed": True, "closed_at": "last timestamp of the pass (no end marker)"}
        return Slice(b.t_ns, max(end, b.t_ns), name, ",".join(cats), level, args)

    for m in markers:
        key = (m.kind, m.name)
        if m.phase == "B":
            open_[key].append(m)
        elif open_[key]:
            out.append(make(open_[key].pop(), m.t_ns, False))
    for begins in open_.values():
        out.extend(make(b, end_ns, True) for b in begins)
    return out


def other_slices(marks: Sequence[Slice]) -> list[Slice]:
    """A program's iterations' time that no stage claims, as "other" stage slices (hwprof.core.spans.OTHER): the
    stage track then covers each iteration, as the stage table counts it."""
    iterations = [s for s in marks if s.level == LEVEL_ITERATION]
    stages = sorted((s for s in marks if s.level == LEVEL_STAGE), key=lambda s: s.start)
    out: list[Slice] = []
    at = 0
    for it in sorted(iterations, key=lambda s: s.start):
        cursor = it.start
        category = ",".join(["stage", *it.category.split(",")[1:]])
        args = {"iteration": it.args.get("iteration"), "unclaimed": "time in the iteration that no stage claims"}
        while at < len(stages) and stages[at].start < it.start:
            at += 1
        while at < len(stages) and stages[at].start < it.end:
            if stages[at].start > cursor:
                out.append(Slice(cursor, stages[at].start, OTHER, category, LEVEL_STAGE, args))
            cursor = max(cursor, min(stages[at].end, it.end))
            at += 1
        if it.end > cursor:
            out.append(Slice(cursor, it.end, OTHER, category, LEVEL_STAGE, args))
    return out


# ----------------------------------------------------------------------------- records


def _counter_name(track: CounterTrack, clashes: set[str]) -> str:
    name = track.name
    if name in clashes or name.startswith(UI_MODE_PREFIXES):
        name = f"{track.collector}: {name}"
    return name


# ----------------------------------------------------------------------------- passes


def _pass_title(run: RunData, pass_name: str) -> str:
    entry = run.doc.passes.get(pass_name)
    collectors = (entry.collectors if entry is not None else None) or []
    if not collectors:
        collectors = list(run.pass_result(pass_name).collectors)
    return f"{pass_name} pass: {', '.join(collectors)}" if collectors else f"{pass_name} pass"


def _status_text(result: CollectorEntry) -> str:
    text = result.status
    if result.reason:
        text += f": {result.reason}"
    if result.fix:
        text += f"; fix: {result.fix}"
    return text


def _pass_info(run: RunData, pass_name: str, pid_source: str) -> SliceArgs:
    entry = run.doc.passes.get(pass_name)
    fields = entry.to_json() if entry is not None else {}
    info: SliceArgs = {k: v for k, v in fields.items() if isinstance(v, str | int | float | bool)}
    info["main thread"] = pid_source
    info["collectors"] = {
        name: _status_text(result) for name, result in run.doc.collectors.items() if result.pass_name == pass_name
    }
    return info


@dataclass
class _Tracks:
    """The slice tracks of one pass while they are being filled."""

    names: dict[int, str]
    threads: dict[int, SliceTrack] = field(default_factory=dict)
    named: dict[str, SliceTrack] = field(default_factory=dict)

    def thread(self, tid: int) -> SliceTrack:
        track = self.threads.get(tid)
        if track is None:
            track = self.threads[tid] = SliceTrack(f"thread:{tid}", self.names.get(tid, f"thread {tid}"), tid)
        return track

    def add(self, group: SpanGroup) -> None:
        tid = thread_of(group.track)
        if tid is not None:
            self.thread(tid).slices.extend(group.slices)
            return
        label = group.track
        if group.tid is not None and group.tid in self.names and self.names[group.tid] not in label:
            label = f"{label} ({self.names[group.tid]})"
        self.named[group.track] = SliceTrack(group.track, label, None, group.slices)

    def first_ts(self) -> int | None:
        tracks = (*self.threads.values(), *self.named.values())
        return min((min(s.start for s in t.slices) for t in tracks if t.slices), default=None)

    def draw_stacks(self, layer_marks: list[Slice], layer_spans: list[Slice]) -> None:
        """Sampled-stack tracks (py-spy) as one slice per run of an unchanged stack, split at every
        layer boundary and named with the layer each piece lies in."""
        bounds = sorted({t for s in layer_marks for t in (s.start, s.end)})
        starts = [s.start for s in layer_spans]
        for track in self.named.values():
            if not any(s.category in STACK_CATEGORIES for s in track.slices[:1]):
                continue
            stack_levels(track.slices)
            track.slices = nest(track.slices)
            flat = not any(b.start < a.end for a, b in itertools.pairwise(track.slices))
            runs = coalesce_runs(stack_runs(track.slices), "samples" if flat else None)
            track.slices = split_at(runs, bounds)
            attach_layers(track.slices, layer_spans, starts)


def pass_timeline(
    run: RunData,
    pass_name: str,
    index: int,
    labels: dict[str, str],
    layer_args: dict[str, SliceArgs],
    stage_args: dict[str, SliceArgs],
    unclaimed: bool = False,
) -> PassTimeline:
    """One pass's tracks; `unclaimed`: the time no stage claims is a stage of its own, "other" (the workload says,
    hwprof.analysis.workload)."""
    markers = run.markers(pass_name)
    records = read_pass_records(records_files(run.root, pass_name), run.withheld)
    last = max([records.last_ns, *(m.t_ns for m in markers)], default=0)
    marks = marker_slices(markers, labels, layer_args, stage_args, last)
    if unclaimed:
        marks += other_slices(marks)
    layer_spans = sorted((s for s in marks if s.level == LEVEL_LAYER), key=slice_order)
    tracks = _Tracks(named_threads(records.thread_names))
    found, source = pass_main_thread(run, pass_name, records, tracks.names, layer_spans)
    main_tid = found if found is not None else SYNTHETIC_PID_BASE + index
    if found is None:
        source = "no pid or thread recorded: a made-up pid above pid_max"
    main = tracks.thread(main_tid)
    main.name = f"main: {tracks.names.get(main_tid, 'pipeline')}"
    main.slices.extend(marks)
    for group in records.spans.values():
        tracks.add(group)
    for tid in (*tracks.names, *{s.tid for s in records.samples}):
        tracks.thread(tid)
    start = _pass_start(records, tracks, last)
    end = max(last, start)
    title = _pass_title(run, pass_name)
    info = Slice(start, end, title, "pass", LEVEL_ITERATION, _pass_info(run, pass_name, source))
    tracks.named["pass"] = SliceTrack(f"pass:{pass_name}", f"{pass_name} pass", None, [info])
    _nest_tracks(tracks, marks, layer_spans)
    slice_tracks = [*sorted(tracks.threads.values(), key=lambda t: t.tid != main_tid), *tracks.named.values()]
    threads = {tid: t.name for tid, t in tracks.threads.items()}
    return PassTimeline(
        pass_name,
        main_tid,
        source,
        title,
        main_tid,
        threads,
        slice_tracks,
        _counter_tracks(records),
        start,
        end,
        records.samples,
    )


def _pass_start(records: PassRecords, tracks: _Tracks, last: int) -> int:
    """The pass's first timestamp: its first counter sample, span or callstack sample (else `last`)."""
    firsts = [c.samples[0][0] for c in records.counters.values() if c.samples]
    first_span = tracks.first_ts()
    if first_span is not None:
        firsts.append(first_span)
    if records.samples:
        firsts.append(records.samples[0].ts)
    return min(firsts, default=last)


def _nest_tracks(tracks: _Tracks, marks: list[Slice], layer_spans: list[Slice]) -> None:
    """Every track's slices properly nested; sampled stacks drawn split at the layer boundaries."""
    for track in tracks.threads.values():
        track.slices = nest(track.slices)
    tracks.draw_stacks([s for s in marks if s.level >= LEVEL_LAYER], layer_spans)
    for track in tracks.named.values():
        if not any(s.category in STACK_CATEGORIES for s in track.slices[:1]):
            track.slices = nest(track.slices)


def _counter_tracks(records: PassRecords) -> list[CounterTrack]:
    """The pass's counter tracks, a name two collectors share prefixed by the collector."""
    clashes = {n for n, c in Counter(t.name for t in records.counters.values()).items() if c > 1}
    return [
        CounterTrack(_counter_name(c, clashes), c.unit, c.collector, sorted(c.samples))
        for c in records.counters.values()
    ]


# ----------------------------------------------------------------------------- run


def _plain(value: Any) -> Any:
    """JSON-like run.json values as slice args: dicts nest, lists become one string."""
    if isinstance(value, dict):
        return {str(k): v for k, v in ((k, _plain(v)) for k, v in value.items()) if v is not None and v != {}}
    if isinstance(value, list | tuple):
        if all(isinstance(v, str) for v in value):
            return ", ".join(value)
        return json.dumps(value, default=str)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def run_metadata(run: RunData) -> SliceArgs:
    """The run's identity for the trace: run id, model, host, config, collector statuses, methods."""
    r = run.doc
    out: SliceArgs = {}
    scalars = {"run_id": r.run_id, "status": r.status, "created": r.created, "finished": r.finished}
    for key, value in {**scalars, "stages_source": r.stages_source, "fps": r.fps}.items():
        if value is not None:
            out[key] = value
    if r.command:
        out["command"] = " ".join(map(str, r.command))
    for section, fields in (("model", r.model.to_json()), ("host", r.host.to_json()), ("config", r.config.to_json())):
        if fields:
            out[section] = _plain(fields)
    if r.clock:
        out["clock"] = _plain(r.clock)
    out["collectors"] = {name: _status_text(result) for name, result in r.collectors.items()}
    methods: SliceArgs = {c: dict[str, ArgValue](t.methods) for c, t in run.metrics().items() if t.methods}
    if methods:
        out["methods"] = methods
    return out


def build_timeline(run_dir: Path | str, data: RunData | None = None) -> Timeline:
    """The run's timeline, from `data` when the run is already read (its parsed markers and metrics reused)."""
    run = checked(data if data is not None else RunData.load(run_dir))
    layer_args, labels = layer_arguments(run) if run.model_file else ({}, {})
    stage_args = stage_arguments(run.metrics())
    unclaimed = workload_view(run.doc).unclaimed_stage
    passes = [
        pass_timeline(run, name, i, labels, layer_args, stage_args, unclaimed) for i, name in enumerate(run.pass_names)
    ]
    notes = []
    if not passes:
        notes.append("the run directory has no pass folders")
    advice, advice_error = load_advice(run.root)
    advised = advice_timeline(advice, len(passes)) if advice is not None else None
    if advised is not None:
        passes.append(advised)
    if advice_error:
        notes.append(advice_error)
    if any(s.category in STACK_CATEGORIES for p in passes for t in p.slice_tracks for s in t.slices[:1]):
        notes.append(STACK_NOTE)
    if any(p.samples for p in passes):
        notes.append(SAMPLES_NOTE)
    start = min((p.start for p in passes), default=0)
    end = max((p.end for p in passes), default=start)
    run_id = str(run.doc.run_id if run.doc.run_id is not None else Path(run_dir).name)
    event = run.summary(PerfSamplingSummary).sampling_event
    sampling = str(event) if event else None
    return Timeline(run_id, run_metadata(run), passes, start, end, notes, sampling, run.doc.model.name, run.doc.host)
