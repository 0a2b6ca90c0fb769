"""RUN_DIR/trace.pftrace: the whole run on one timeline, as a native Perfetto trace.

Built from the run directory alone (perfetto_tracks.build_timeline) with perfetto's
TraceProtoBuilder and its TracePacket classes:
- one clock: a ClockSnapshot makes CLOCK_MONOTONIC the trace's clock, so the timestamps are the
  run's own (no BOOTTIME guess by the trace processor); events carry deltas on an incremental
  clock defined against it, in time order;
- events on one packet sequence (interned state, defaults: the delta clock and the busiest track),
  track descriptors on another;
- per pass a process (named "<pass> pass: <collectors>") with its threads, named tracks (py-spy,
  "<pass> pass" with the pass's status) and counter tracks (name and unit set);
- CPU samples (the kernels pass's perf samples) as Perfetto perf samples on a third sequence, each
  at its instant on its own thread, frames and callstacks interned (perfetto_samples.py);
- a top-level "hwprof run" track whose one slice spans the run and carries the metadata
  (run id, model, host, config, collector statuses, how estimated metrics were obtained);
- event names, categories, argument names and string argument values interned.
Packets are serialized in chunks, so memory holds the timeline and one chunk of packets.
Counter samples taken at one instant share a packet (extra counter values, zeros last: packed_order).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from hwprof.rundir.reader import RunData
from hwprof.rundir.writer import trace_file
from hwprof.trace.model import CounterTrack, Slice, SliceTrack, Timeline
from hwprof.trace.packets import DESCRIPTOR_SEQUENCE_ID, TraceWriter
from hwprof.trace.samples import write_samples
from hwprof.trace.tracks import build_timeline

MAX_EXTRA = 8
"""Extra counter values per track event the trace processor accepts (more: the event is dropped)."""

ARCHES = ("x86_64", "aarch64", "arm64", "ppc64le", "s390x", "riscv64")
"""Machine names as they appear in platform.platform(), which run.json's host.os holds."""

_BEGIN, _END, _COUNTER = 0, 1, 2


@dataclass
class TraceStats:
    path: Path
    size_bytes: int
    build_s: float
    packets: int
    slices: int
    counter_samples: int
    slice_tracks: int
    counter_tracks: int
    passes: list[str]
    slices_by_category: dict[str, int] = field(default_factory=dict)
    unclosed: int = 0
    clamped: int = 0
    perf_samples: int = 0
    """CPU samples written as Perfetto perf samples."""
    interned_strings: int = 0
    main_threads: dict[str, str] = field(default_factory=dict)
    """pass -> how its main thread (and pid) was identified."""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        return data


def _slice_events(uuid: int, slices: list[Slice]) -> Iterator[tuple[int, int, int, Any]]:
    """Begin/end events of properly nested, sorted slices, in timestamp order."""
    stack: list[Slice] = []
    for s in slices:
        while stack and stack[-1].end <= s.start:
            top = stack.pop()
            yield (top.end, _END, uuid, top)
        if stack and s.end > stack[-1].end:
            s.end = stack[-1].end
        yield (s.start, _BEGIN, uuid, s)
        stack.append(s)
    while stack:
        top = stack.pop()
        yield (top.end, _END, uuid, top)


def _counter_events(uuid: int, track: CounterTrack) -> Iterator[tuple[int, int, int, Any]]:
    for ts, value in track.samples:
        yield (ts, _COUNTER, uuid, value)


Event = tuple[int, int, int, Any]


@dataclass
class _Described:
    """What the track descriptors give the events: each track's event stream, the counts so far and the
    track with the most slices (count, uuid)."""

    stats: TraceStats
    busiest: tuple[int, int]
    streams: list[Iterator[Event]] = field(default_factory=list)


def _describe(w: TraceWriter, timeline: Timeline) -> tuple[list[Iterator[Event]], TraceStats, int]:
    """Track descriptor packets; returns the event streams of every track, the counts so far and
    the uuid of the track with the most slices."""
    out = _run_track(w, timeline)
    for ptl in timeline.passes:
        out.stats.main_threads[ptl.name] = ptl.pid_source
        proc_uuid = w.uuid()
        p = w.packet(DESCRIPTOR_SEQUENCE_ID)
        p.track_descriptor.uuid = proc_uuid
        p.track_descriptor.process.pid = ptl.pid
        p.track_descriptor.process.process_name = ptl.title
        for track in ptl.slice_tracks:
            _slice_track(w, out, ptl.pid, proc_uuid, track)
        for counter in ptl.counter_tracks:
            _counter_track(w, out, proc_uuid, counter)
    return out.streams, out.stats, out.busiest[1]


def _run_track(w: TraceWriter, timeline: Timeline) -> _Described:
    """The run's track: one slice over the whole run, its metadata and notes as arguments."""
    stats = TraceStats(Path(), 0, 0.0, 0, 0, 0, 0, 0, [p.name for p in timeline.passes])
    stats.notes = list(timeline.notes)
    run_uuid = w.uuid()
    p = w.packet(DESCRIPTOR_SEQUENCE_ID)
    p.track_descriptor.uuid = run_uuid
    p.track_descriptor.name = f"hwprof run {timeline.run_id}"
    title = " · ".join(str(x) for x in (timeline.model_name, timeline.host.hostname, timeline.run_id) if x)
    run_args = dict(timeline.metadata)
    if timeline.notes:
        run_args["notes"] = {str(i): note for i, note in enumerate(timeline.notes)}
    run_slice = Slice(timeline.start, max(timeline.end, timeline.start), title or "run", "run", 0, run_args)
    stats.slice_tracks += 1
    stats.slices += 1
    return _Described(stats, (1, run_uuid), [_slice_events(run_uuid, [run_slice])])


def _slice_track(w: TraceWriter, out: _Described, pid: int, proc_uuid: int, track: SliceTrack) -> None:
    """A thread's track (a tid) or a named track of the process, and its slices' events."""
    uuid = w.uuid()
    p = w.packet(DESCRIPTOR_SEQUENCE_ID)
    desc = p.track_descriptor
    desc.uuid = uuid
    if track.tid is not None:
        desc.thread.pid = pid
        desc.thread.tid = track.tid
        desc.thread.thread_name = track.name
    else:
        desc.parent_uuid = proc_uuid
        desc.name = track.name
    _count(out.stats, track)
    if track.slices:
        out.streams.append(_slice_events(uuid, track.slices))
        out.busiest = max(out.busiest, (len(track.slices), uuid))


def _counter_track(w: TraceWriter, out: _Described, proc_uuid: int, counter: CounterTrack) -> None:
    """A counter track of the process (its unit: bytes, a named one, or a share of the percent axis)."""
    uuid = w.uuid()
    p = w.packet(DESCRIPTOR_SEQUENCE_ID)
    desc = p.track_descriptor
    desc.uuid = uuid
    desc.parent_uuid = proc_uuid
    desc.name = counter.name
    desc.counter.SetInParent()  # a counter track even with no unit: else its samples are dropped
    if counter.unit in ("B", "bytes"):
        desc.counter.unit = w.pb.CounterDescriptor.UNIT_SIZE_BYTES
    elif counter.unit:
        desc.counter.unit_name = counter.unit
    if counter.unit == "%":
        desc.counter.y_axis_share_key = "percent"
    out.stats.counter_tracks += 1
    out.stats.counter_samples += len(counter.samples)
    out.streams.append(_counter_events(uuid, counter))


def _count(stats: TraceStats, track: SliceTrack) -> None:
    stats.slice_tracks += 1
    stats.slices += len(track.slices)
    for s in track.slices:
        stats.slices_by_category[s.category] = stats.slices_by_category.get(s.category, 0) + 1
        if s.args.get("unclosed"):
            stats.unclosed += 1
        if "clamped_ns" in s.args:
            stats.clamped += 1


def _system_info(w: TraceWriter, timeline: Timeline) -> None:
    """The host's uname and the run id, where Perfetto's own metadata table shows them."""
    host = timeline.host
    p = w.packet()
    uts = p.system_info.utsname
    os_name = host.os or ""
    uts.sysname = os_name.split("-", 1)[0] if os_name else "unknown"
    if host.kernel:
        uts.release = host.kernel
    machine = next((a for a in ARCHES if f"-{a}" in os_name), None)
    if machine:
        uts.machine = machine
    if host.hostname:
        uts.version = f"host {host.hostname}"
    w.packet().trace_config.unique_session_name = timeline.run_id[:64]


def _flows(ev: Any, args: dict[str, Any]) -> None:
    """A record's args "flow_out" / "flow_in" (an id unique in the trace) start and end a flow arrow,
    e.g. from a CUDA launch on its thread to the kernel on the GPU track."""
    if "flow_out" in args:
        ev.flow_ids.append(int(args["flow_out"]))
    if "flow_in" in args:
        ev.terminating_flow_ids.append(int(args["flow_in"]))


def packed_order(samples: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """(track uuid, value) samples of one instant in the order one counter event carries them: the
    first as the event's value, the others as extra values, every non-zero value before any zero.

    Why: the trace processor keeps an event's extra values only up to the first 0.0 and reads every
    later one as 0 (v52, and still so upstream in 2026: the sorter stores
    TrackEventData::CountExtraCounterValues() values, which counts up to the first zero, in
    sorter/trace_token_buffer.cc; the parser then reads the rest of its zero-filled array). Zeros last
    read back as the zeros they are, so every value reads back exactly."""
    return sorted(samples, key=lambda sample: sample[1] == 0)


def _counter_event(
    ev: Any,
    types: Any,
    first: tuple[int, float],
    events: Iterator[tuple[int, int, int, Any]],
    ts: int,
    default_track: int,
) -> tuple[int, int, int, Any] | None:
    """One counter event for the samples taken at `ts` (one sampler, many tracks), up to the trace
    processor's limit of extra values per event; returns the next event of the stream, if read."""
    samples = [first]
    pending: tuple[int, int, int, Any] | None = None
    for pending in events:
        if pending[0] != ts or pending[1] != _COUNTER or len(samples) > MAX_EXTRA:
            break
        samples.append((pending[2], pending[3]))
    else:
        pending = None
    (uuid, value), *extra = packed_order(samples)
    ev.type = types.TYPE_COUNTER
    if uuid != default_track:
        ev.track_uuid = uuid
    ev.double_counter_value = value
    for extra_uuid, extra_value in extra:
        ev.extra_double_counter_track_uuids.append(extra_uuid)
        ev.extra_double_counter_values.append(extra_value)
    return pending


def write_timeline(timeline: Timeline, out: BinaryIO) -> TraceStats:
    w = TraceWriter(out)
    streams, stats, default_track = _describe(w, timeline)
    w.start(timeline.start, default_track)
    _system_info(w, timeline)
    intern = w.interner.iid
    types = w.pb.TrackEvent
    events = heapq.merge(*streams, key=lambda e: e[0])
    pending: tuple[int, int, int, Any] | None = None
    while True:
        event = pending or next(events, None)
        pending = None
        if event is None:
            break
        ts, kind, uuid, item = event
        p = w.event(ts)
        ev = p.track_event
        if kind == _COUNTER:
            pending = _counter_event(ev, types, (uuid, item), events, ts, default_track)
            continue
        if uuid != default_track:
            ev.track_uuid = uuid
        if kind == _BEGIN:
            ev.type = types.TYPE_SLICE_BEGIN
            ev.name_iid = intern("event_names", item.name)
            if item.category:
                ev.category_iids.append(intern("event_categories", item.category))
            if item.args:
                w.annotate(ev, item.args)
                _flows(ev, item.args)
            w.interner.flush(p)
        else:
            ev.type = types.TYPE_SLICE_END
    stats.perf_samples = write_samples(w, timeline.passes, timeline.sampling_event)
    w.flush()
    stats.packets = w.packets
    stats.interned_strings = w.interner.count
    return stats


def build_trace(run_dir: Path | str, out: Path | str | None = None, data: RunData | None = None) -> TraceStats:
    """Write RUN_DIR/trace.pftrace (or `out`) from the run directory alone (`data`: the run already read, as
    `collect` has it); figures about it."""
    t0 = time.perf_counter()
    run_dir = Path(run_dir)
    timeline = build_timeline(run_dir, data)
    with trace_file(run_dir, Path(out) if out is not None else None) as (path, handle):
        stats = write_timeline(timeline, handle)
    stats.path = path
    stats.size_bytes = path.stat().st_size
    stats.build_s = time.perf_counter() - t0
    return stats
