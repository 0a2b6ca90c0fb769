"""The run directory as tracks of slices and counters: what the Perfetto writer serializes.

Read from the run directory alone (run.json, each pass's markers.jsonl, model.json and the
collectors' generic `*.records.jsonl` / `*.metrics.json`), never from a collector module:

- per pass a process (pid: run.json's `passes.<pass>.pid` when recorded, else inferred, see
  `_main_thread`); its main thread carries iteration > stage > layer slices from the markers and
  every span a collector recorded on that thread (aten ops > oneDNN primitives), nested into them;
- other threads' spans on their thread tracks; spans on named tracks (py-spy stacks, ...) on
  tracks of their own inside the process; counter samples as counter tracks with their units;
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

import bisect
import functools
import itertools
import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwprof.analysis.layers import layer_rows
from hwprof.analysis.validity import checked
from hwprof.cppnames import elide_cpp
from hwprof.records import MetricTables
from hwprof.rundata import RunData, RunDirError
from hwprof.workload.layers import LayerInfo
from hwprof.workload.markers import Marker

LEVEL_ITERATION = 0
LEVEL_STAGE = 1
LEVEL_LAYER = 2
"""Depth-2 layers ("model.7.cv1") get LEVEL_LAYER + 1."""
LEVEL_RECORD = 10
"""Recorded spans rank below every marker: where they disagree at a boundary, the marker wins."""
SYNTHETIC_PID_BASE = 1 << 22
"""Above Linux's largest pid_max (2^22), so a made-up pid can never be a real one."""
STACK_CATEGORIES = frozenset({"py-spy"})
"""Span categories that are sampled call stacks (nested frames or one span per sample): drawn as
one slice per run of an unchanged stack, named by its innermost frame, the stack in args."""
STACK_SEGMENT = 8
"""A stack is written as segments of this many frames (root first, " > " between frames): the
segments repeat across samples and iterations, so interned they cost a few bytes a sample."""
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
UI_MODE_PREFIXES = ("power", "psi")
"""Older Perfetto UIs draw a counter whose name matches ^power. or ^psi. as a rate (its slope),
not its value (ui/src/tracks/counter: COUNTER_REGEX); such names get their collector in front."""


@dataclass(slots=True)
class Slice:
    start: int
    end: int
    name: str
    category: str
    level: int
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class CallstackSample:
    """One thread's callstack at one instant: drawn where it was taken, never as a span."""

    ts: int
    tid: int
    cpu: int | None
    frames: tuple[tuple[str, str], ...]
    """(function, library), root first."""


@dataclass
class SliceTrack:
    key: str
    name: str
    tid: int | None = None
    """Set for thread tracks; None for a named track inside the process."""
    slices: list[Slice] = field(default_factory=list)


@dataclass
class CounterTrack:
    name: str
    unit: str
    collector: str
    samples: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class PassTimeline:
    name: str
    pid: int
    pid_source: str
    title: str
    main_tid: int
    threads: dict[int, str]
    slice_tracks: list[SliceTrack]
    counter_tracks: list[CounterTrack]
    start: int
    end: int
    samples: list[CallstackSample] = field(default_factory=list)
    """In time order."""


@dataclass
class Timeline:
    run_id: str
    metadata: dict[str, Any]
    passes: list[PassTimeline]
    start: int
    end: int
    notes: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- nesting


def _order(s: Slice) -> tuple[int, int, int]:
    return (s.start, -s.end, s.level)


def _clamp(s: Slice, end: int) -> None:
    """Cut a slice short, saying by how much (args may be shared by slices: copied, not changed)."""
    s.args = {**s.args, "clamped_ns": s.args.get("clamped_ns", 0) + (s.end - end)}
    s.end = end


def nest(slices: Iterable[Slice]) -> list[Slice]:
    """Sort for emission and make the slices of one track nest properly.

    A slice that starts inside another and ends after it is cut: the one of lower authority
    (higher level) yields. Ties keep input order, so a recorded parent written before its
    child at the same start and end stays the parent.
    """
    ordered = sorted(slices, key=_order)
    stack: list[Slice] = []
    clamped = False
    for s in ordered:
        while stack and stack[-1].end <= s.start:
            stack.pop()
        while stack and s.end > stack[-1].end:
            clamped = True
            top = stack[-1]
            if s.level < top.level:
                _clamp(top, s.start)
                stack.pop()
            else:
                _clamp(s, top.end)
        stack.append(s)
    if clamped:
        ordered.sort(key=_order)
    return ordered


def stack_levels(slices: list[Slice]) -> None:
    """Rank the frames of a sampled-stack track so that nest() puts callers above callees.

    A frame and its callee open and close together whenever the callee ran for the caller's
    whole run, so their intervals tie. `args["depth"]` (root 0) settles it where the collector
    wrote it; otherwise records are taken to be written callee first within a tie (as the
    pyspy collector writes them: it closes a stack from the innermost frame out).
    """
    n = len(slices)
    for i, s in enumerate(slices):
        depth = s.args.get("depth")
        s.level = LEVEL_RECORD + (int(depth) if isinstance(depth, int) else n - i)


def stack_runs(slices: Sequence[Slice]) -> list[Slice]:
    """Nested frames -> one flat slice per run of an unchanged stack, named by its innermost
    frame, with the whole stack (root first) in args and the innermost frame's own args."""
    runs: list[Slice] = []
    stack: list[Slice] = []
    names: list[str] = []
    t = 0

    def emit(until: int) -> None:
        top = stack[-1]
        own = top.args.get("stack") if len(stack) == 1 else None
        frames = own if own is not None else tuple(names)
        name = names[-1]
        if name == UNSYMBOLIZED and top.args.get("library"):
            name = f"{UNSYMBOLIZED} in {Path(str(top.args['library'])).name}"
        runs.append(Slice(t, until, name, top.category, LEVEL_RECORD, {**top.args, "stack": frames}))

    for s in (*slices, None):
        start = s.start if s is not None else None
        while stack and (start is None or stack[-1].end <= start):
            end = stack[-1].end
            if end > t:
                emit(end)
                t = end
            stack.pop()
            names.pop()
        if s is None:
            break
        if stack and s.start > t:
            emit(s.start)
        t = max(t, s.start)
        stack.append(s)
        names.append(UNSYMBOLIZED if _ADDRESS.match(s.name) else s.name)
    for run in runs:
        run.args.pop("depth", None)
        frames = run.args["stack"]
        if isinstance(frames, tuple):
            run.args["stack"] = _segments(frames)
    return runs


_ADDRESS = re.compile(r"^0x[0-9a-fA-F]+$")
UNSYMBOLIZED = "0x…"
"""A native frame py-spy could not name (it writes its address): an address without its mapping
tells a reader nothing, and keeping it would split one run of samples into many."""


@functools.lru_cache(maxsize=1 << 14)
def _segments(frames: tuple[str, ...]) -> tuple[str, ...]:
    short = [elide_cpp(f) for f in frames]
    return tuple(" > ".join(short[i : i + STACK_SEGMENT]) for i in range(0, len(short), STACK_SEGMENT))


def coalesce_runs(slices: list[Slice], count: str | None = "samples") -> list[Slice]:
    """Merge back-to-back identical slices of a flat track (samples of one stack) into one,
    counting the merged slices in args[count]."""
    if any(b.start < a.end for a, b in itertools.pairwise(slices)):
        return slices
    out: list[Slice] = []
    for s in slices:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.name == s.name
            and {k: v for k, v in prev.args.items() if k != count} == s.args
            and s.start - prev.end <= min(prev.end - prev.start, s.end - s.start) // 2
        ):
            if count:
                prev.args[count] = prev.args.get(count, 1) + 1
            prev.end = s.end
        else:
            out.append(s)
    return out


# ----------------------------------------------------------------------------- markers


def marker_slices(
    markers: Sequence[Marker],
    labels: dict[str, str],
    layer_args: dict[str, dict[str, Any]],
    stage_args: dict[str, dict[str, Any]],
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
        args: dict[str, Any]
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


# ----------------------------------------------------------------------------- args


def _with_unit(key: str, unit: str | None) -> str:
    """Perfetto rewrites "." and "[]" in argument names; parentheses survive."""
    return f"{key} ({unit})" if unit else key


def _scalar(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def layer_arguments(run: RunData) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """qualified layer name -> slice args (the layer table joined with every per-layer metric),
    and -> its label ("7 Conv"). Metrics of collectors other than flops nest under the collector."""
    tables = run.metrics()
    units: dict[str, str] = {}
    for collector, t in tables.items():
        for metric, unit in t.units.items():
            units[metric if collector == "flops" else f"{collector}.{metric}"] = unit
    args: dict[str, dict[str, Any]] = {}
    labels: dict[str, str] = {}
    info_by_name = {row["name"]: LayerInfo.from_dict(row) for row in run.model_info.get("layers", [])}
    for row in layer_rows(run):
        name = row["name"]
        info = info_by_name.get(name)
        if info:
            labels[name] = info.label
        out: dict[str, Any] = {"qualified_name": name}
        for key, value in row.items():
            value = _scalar(value)
            if key == "name" or value is None or value == "":
                continue
            if key == "time_ms":
                out["median self time, layers pass (ms)"] = value
            elif "." in key:
                collector, metric = key.split(".", 1)
                out.setdefault(collector, {})[_with_unit(metric, units.get(key))] = value
            else:
                out[_with_unit(key, units.get(key))] = value
        args[name] = out
    return args, labels


def stage_arguments(tables: dict[str, MetricTables]) -> dict[str, dict[str, Any]]:
    """stage -> {collector: {metric (unit): value}}."""
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for collector, t in sorted(tables.items()):
        for stage, metrics in t.stages.items():
            for metric, value in metrics.items():
                v = _scalar(value)
                if v is not None:
                    out[stage].setdefault(collector, {})[_with_unit(metric, t.units.get(metric))] = v
    return dict(out)


# ----------------------------------------------------------------------------- records


@dataclass
class SpanGroup:
    """The spans one pass recorded on one track ("thread:<tid>" or a named track)."""

    track: str
    tid: int | None
    """The thread the track belongs to, or for a named track the thread its spans were about."""
    slices: list[Slice] = field(default_factory=list)


@dataclass
class PassRecords:
    spans: dict[str, SpanGroup] = field(default_factory=dict)
    counters: dict[tuple[str, str], CounterTrack] = field(default_factory=dict)
    samples: list[CallstackSample] = field(default_factory=list)
    thread_names: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    last_ns: int = 0

    def thread_groups(self) -> Iterable[tuple[int, SpanGroup]]:
        for group in self.spans.values():
            tid = _thread_of(group.track)
            if tid is not None:
                yield tid, group


def _rows(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a records file: parsed in one call (a records file of a long run holds
    hundreds of thousands of lines), else line by line up to a torn last line of a killed pass."""
    text = path.read_text()
    try:
        return list(json.loads("[" + ",".join(line for line in text.split("\n") if line.strip()) + "]"))
    except ValueError:
        rows = []
        for line in text.split("\n"):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError:
                break
        return rows


def read_pass_records(pass_dir: Path, withheld: frozenset[str] = frozenset()) -> PassRecords:
    """Every collector's records of one pass, in records.py's format (a "kind" of span, counter or
    thread), spans grouped by track as slices. Read as plain rows: a long run's records are
    hundreds of thousands of lines, and the renderer needs none of the record classes' checks."""
    out = PassRecords()
    ends: list[int] = []
    for path in sorted(pass_dir.glob("*.records.jsonl")):
        collector = path.name.removesuffix(".records.jsonl")
        if collector in withheld:
            continue
        for row in _rows(path):
            try:
                _add_row(out, collector, row, ends)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                text = f"{path}: not a record ({type(exc).__name__}: {exc}): {json.dumps(row, default=str)}"
                raise RunDirError(text[:300]) from exc
    ends.extend(max(t for t, _ in c.samples) for c in out.counters.values() if c.samples)
    out.last_ns = max(ends, default=0)
    out.samples.sort(key=lambda s: s.ts)
    return out


def _add_row(out: PassRecords, collector: str, row: dict[str, Any], ends: list[int]) -> None:
    kind = row.get("kind")
    if kind == "span":
        track = row["track"]
        group = out.spans.get(track)
        if group is None:
            group = out.spans[track] = SpanGroup(track, _thread_of(track) or row.get("tid"))
        start = int(row["ts_ns"])
        end = start + max(int(row["dur_ns"]), 0)
        args = row.get("args") or {}
        group.slices.append(Slice(start, end, str(row["name"]), row.get("category") or "", LEVEL_RECORD, args))
        ends.append(end)
    elif kind == "counter":
        value = float(row["value"])
        if not math.isfinite(value):
            return
        key = (collector, row["track"])
        counter = out.counters.get(key)
        if counter is None:
            counter = out.counters[key] = CounterTrack(row["track"], row.get("unit") or "", collector)
        counter.samples.append((int(row["ts_ns"]), value))
    elif kind == "sample":
        ts, tid, cpu = int(row["ts_ns"]), int(row["tid"]), row.get("cpu")
        frames = _frames(tuple((str(f), str(lib)) for f, lib in row["frames"]))
        out.samples.append(CallstackSample(ts, tid, int(cpu) if cpu is not None else None, frames))
        ends.append(ts)
    elif kind == "thread" and row.get("name"):
        out.thread_names[int(row["tid"])].append(str(row["name"]))


@functools.lru_cache(maxsize=1 << 14)
def _frames(frames: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """One shared tuple per distinct stack: a run holds many samples of few stacks."""
    return frames


_THREAD_TRACK = re.compile(r"^thread:(\d+)$")


@functools.lru_cache(maxsize=4096)
def _thread_of(track: str) -> int | None:
    """ "thread:<tid>" -> tid; a named track -> None."""
    match = _THREAD_TRACK.match(track)
    return int(match.group(1)) if match else None


def _thread_names(names: dict[int, list[str]]) -> dict[int, str]:
    """One name per tid: a specific name (MainThread, hwprof-sysstat) beats the process's comm."""
    common = Counter(n for ns in names.values() for n in set(ns)).most_common(1)
    comm = common[0][0] if common and len(names) > 1 else None
    out = {}
    for tid, ns in names.items():
        specific = [n for n in ns if n != comm]
        out[tid] = specific[0] if specific else ns[0]
    return out


def _main_thread(
    run: RunData, pass_name: str, records: PassRecords, names: dict[int, str], layer_spans: list[Slice]
) -> tuple[int | None, str]:
    """The tid of the pass's main thread (it runs the model and emits the markers) and how it was found."""
    entry = run.run.get("passes", {}).get(pass_name, {})
    result_path = run.pass_dir(pass_name) / "result.json"
    result = json.loads(result_path.read_text()) if result_path.exists() else {}
    for source, value in (("run.json", entry.get("pid")), ("result.json", result.get("pid"))):
        if isinstance(value, int) and value > 0:
            return value, f"pid recorded in {source}"
    for tid, name in names.items():
        if name == "MainThread":
            return tid, "thread named MainThread in the records (py-spy)"
    if layer_spans:
        starts = [s.start for s in layer_spans]
        covered: Counter[int] = Counter()
        for span_tid, group in records.thread_groups():
            for span in group.slices:
                i = bisect.bisect_right(starts, span.start) - 1
                if i >= 0 and layer_spans[i].end >= span.end:
                    covered[span_tid] += span.end - span.start
        if covered:
            return covered.most_common(1)[0][0], "the thread whose recorded spans lie inside layer markers"
    if names:
        return min(names), "smallest named tid of the pass (the main thread is created first)"
    return None, "unknown"


def _counter_name(track: CounterTrack, clashes: set[str]) -> str:
    name = track.name
    if name in clashes or name.startswith(UI_MODE_PREFIXES):
        name = f"{track.collector}: {name}"
    return name


# ----------------------------------------------------------------------------- passes


def _pass_title(run: RunData, pass_name: str) -> str:
    entry = run.run.get("passes", {}).get(pass_name, {})
    collectors = entry.get("collectors") or []
    if not collectors:
        result_path = run.pass_dir(pass_name) / "result.json"
        if result_path.exists():
            collectors = list(json.loads(result_path.read_text()).get("collectors", {}))
    return f"{pass_name} pass: {', '.join(collectors)}" if collectors else f"{pass_name} pass"


def _status_text(result: dict[str, Any]) -> str:
    text = str(result.get("status", "?"))
    if result.get("reason"):
        text += f": {result['reason']}"
    if result.get("fix"):
        text += f"; fix: {result['fix']}"
    return text


def _pass_info(run: RunData, pass_name: str, pid_source: str) -> dict[str, Any]:
    entry = run.run.get("passes", {}).get(pass_name, {})
    info: dict[str, Any] = {k: v for k, v in entry.items() if isinstance(v, str | int | float | bool)}
    info["main thread"] = pid_source
    info["collectors"] = {
        name: _status_text(result)
        for name, result in run.run.get("collectors", {}).items()
        if result.get("pass") == pass_name
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
        tid = _thread_of(group.track)
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
            _attach_layers(track.slices, layer_spans, starts)


def pass_timeline(
    run: RunData,
    pass_name: str,
    index: int,
    labels: dict[str, str],
    layer_args: dict[str, dict[str, Any]],
    stage_args: dict[str, dict[str, Any]],
) -> PassTimeline:
    markers = run.markers(pass_name)
    records = read_pass_records(run.pass_dir(pass_name), run.withheld)
    last = max([records.last_ns, *(m.t_ns for m in markers)], default=0)
    marks = marker_slices(markers, labels, layer_args, stage_args, last)
    layer_spans = sorted((s for s in marks if s.level == LEVEL_LAYER), key=_order)
    tracks = _Tracks(_thread_names(records.thread_names))
    found, source = _main_thread(run, pass_name, records, tracks.names, layer_spans)
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
    firsts = [c.samples[0][0] for c in records.counters.values() if c.samples]
    first_span = tracks.first_ts()
    if first_span is not None:
        firsts.append(first_span)
    if records.samples:
        firsts.append(records.samples[0].ts)
    start = min(firsts, default=last)
    end = max(last, start)
    title = _pass_title(run, pass_name)
    info = Slice(start, end, title, "pass", LEVEL_ITERATION, _pass_info(run, pass_name, source))
    tracks.named["pass"] = SliceTrack(f"pass:{pass_name}", f"{pass_name} pass", None, [info])

    for track in tracks.threads.values():
        track.slices = nest(track.slices)
    tracks.draw_stacks([s for s in marks if s.level >= LEVEL_LAYER], layer_spans)
    for track in tracks.named.values():
        if not any(s.category in STACK_CATEGORIES for s in track.slices[:1]):
            track.slices = nest(track.slices)

    clashes = {n for n, c in Counter(t.name for t in records.counters.values()).items() if c > 1}
    counters = [
        CounterTrack(_counter_name(c, clashes), c.unit, c.collector, sorted(c.samples))
        for c in records.counters.values()
    ]
    slice_tracks = [*sorted(tracks.threads.values(), key=lambda t: t.tid != main_tid), *tracks.named.values()]
    threads = {tid: t.name for tid, t in tracks.threads.items()}
    return PassTimeline(
        pass_name, main_tid, source, title, main_tid, threads, slice_tracks, counters, start, end, records.samples
    )


def split_at(slices: list[Slice], bounds: list[int]) -> list[Slice]:
    """Split the slices of a flat track at every boundary strictly inside one; a split piece
    keeps its args but not a count of merged samples, which no longer says which piece had them."""
    out: list[Slice] = []
    for s in slices:
        i = bisect.bisect_right(bounds, s.start)
        if i == len(bounds) or bounds[i] >= s.end:
            out.append(s)
            continue
        args = {k: v for k, v in s.args.items() if k != "samples"}
        start = s.start
        for cut in (*bounds[i : bisect.bisect_left(bounds, s.end)], s.end):
            out.append(Slice(start, cut, s.name, s.category, s.level, dict(args)))
            start = cut
    return out


def _attach_layers(slices: list[Slice], layers: list[Slice], starts: list[int]) -> None:
    """Name on each stack run the model layer that was running when it began."""
    if not layers:
        return
    for s in slices:
        if "stack" not in s.args:
            continue
        i = bisect.bisect_right(starts, s.start) - 1
        if i >= 0 and layers[i].end > s.start:
            s.args.setdefault("layer", layers[i].name)


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


def run_metadata(run: RunData) -> dict[str, Any]:
    """The run's identity for the trace: run id, model, host, config, collector statuses, methods."""
    r = run.run
    out: dict[str, Any] = {}
    for key in ("run_id", "status", "created", "finished", "stages_source", "fps"):
        if r.get(key) is not None:
            out[key] = r[key]
    if r.get("command"):
        out["command"] = " ".join(map(str, r["command"]))
    for section in ("model", "host", "config", "clock"):
        if r.get(section):
            out[section] = _plain(r[section])
    out["collectors"] = {name: _status_text(result) for name, result in r.get("collectors", {}).items()}
    methods = {c: dict(t.methods) for c, t in run.metrics().items() if t.methods}
    if methods:
        out["methods"] = methods
    return out


def build_timeline(run_dir: Path | str) -> Timeline:
    run = checked(RunData.load(run_dir))
    layer_args, labels = layer_arguments(run) if run.model_info else ({}, {})
    stage_args = stage_arguments(run.metrics())
    passes = [pass_timeline(run, name, i, labels, layer_args, stage_args) for i, name in enumerate(run.pass_names)]
    notes = []
    if not passes:
        notes.append("the run directory has no pass folders")
    if any(s.category in STACK_CATEGORIES for p in passes for t in p.slice_tracks for s in t.slices[:1]):
        notes.append(STACK_NOTE)
    if any(p.samples for p in passes):
        notes.append(SAMPLES_NOTE)
    start = min((p.start for p in passes), default=0)
    end = max((p.end for p in passes), default=start)
    run_id = str(run.run.get("run_id", Path(run_dir).name))
    return Timeline(run_id, run_metadata(run), passes, start, end, notes)
