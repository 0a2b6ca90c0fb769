"""Memory over time, for memory.png (the picture `mprof plot` drew for seed 001): the process's resident memory
through a pass with its stages (sysstat's "RSS (bytes)" records), and torch's allocator's live bytes through one
measured forward with its top-level layers (torch_memory's "torch CPU allocated (bytes)" records, layers pass: a
spike lies inside the layer that made it). Read from the run's records and markers on the run's clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hwprof.core.markers import Marker
from hwprof.core.spans import pair_begin_end
from hwprof.rundir.reader import RunData, records_files
from hwprof.schema.records import CounterSample, read_records

RSS_TRACK = "RSS (bytes)"
LIVE_TRACK = "torch CPU allocated (bytes)"


@dataclass(frozen=True)
class Band:
    """A span drawn behind a series: a stage or a layer, in seconds from the series' start."""

    name: str
    start_s: float
    end_s: float


@dataclass
class Series:
    """One counter through a window: its pass, (seconds from the window's start, bytes), and the spans in it."""

    pass_name: str
    points: list[tuple[float, float]] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)


@dataclass
class MemoryTimeline:
    rss: Series | None = None
    """The resident memory through the pass that sampled it (sysstat), its measured stages as bands."""
    live: Series | None = None
    """The allocator's live bytes through the layers pass's first measured forward, its top-level layers as bands."""


def memory_timeline(data: RunData) -> MemoryTimeline:
    out = MemoryTimeline()
    for records in records_files(data.root):
        if records.collector == "sysstat" and out.rss is None:
            out.rss = _rss(data, records.pass_name, _samples(records.path, RSS_TRACK))
        elif records.collector == "torch_memory" and out.live is None:
            forward = _first_forward(data.markers(records.pass_name))
            if forward is not None:
                window = (forward[0].t_ns, forward[1].t_ns)
                out.live = _live(data, records.pass_name, forward, _samples(records.path, LIVE_TRACK, window))
    return out


def _samples(path: Path, track: str, window: tuple[int, int] | None = None) -> list[CounterSample]:
    """One counter track's samples; only the lines naming it are parsed (a records file may hold much else: the
    trace pass's holds every aten op's span, 23 MB for yolov7 at 640, 3 s to parse whole). With `window` (begin,
    end ns): the samples inside it and the last one before it, the others left unparsed: the allocator's track
    holds every allocation of the pass (109,180 samples at yolov7 640, 1.4 s to read, for the 1,095 of the one
    forward drawn; 0.5 s so)."""
    chosen = read_records(path, containing=track, window=window)
    return [r for r in chosen if isinstance(r, CounterSample) and r.track == track]


def _rss(data: RunData, pass_name: str, samples: list[CounterSample]) -> Series | None:
    if not samples:
        return None
    start = samples[0].ts_ns
    series = Series(pass_name, [((s.ts_ns - start) / 1e9, s.value) for s in samples])
    for begin, end in pair_begin_end(m for m in data.markers(pass_name) if m.kind == "stage" and not m.warmup):
        series.bands.append(Band(begin.name, (begin.t_ns - start) / 1e9, (end.t_ns - start) / 1e9))
    return series


def _live(data: RunData, pass_name: str, forward: tuple[Marker, Marker], samples: list[CounterSample]) -> Series | None:
    if not samples:
        return None
    begin, end = forward
    inside = [s for s in samples if begin.t_ns <= s.ts_ns <= end.t_ns]
    before = [s for s in samples if s.ts_ns < begin.t_ns]
    points = ([(0.0, before[-1].value)] if before else []) + [((s.ts_ns - begin.t_ns) / 1e9, s.value) for s in inside]
    series = Series(pass_name, points)
    layers = (m for m in data.markers(pass_name) if m.kind == "layer" and m.index >= 0 and m.name.count(".") == 1)
    for b, e in pair_begin_end(layers):
        if begin.t_ns <= b.t_ns and e.t_ns <= end.t_ns:
            series.bands.append(Band(b.name, (b.t_ns - begin.t_ns) / 1e9, (e.t_ns - begin.t_ns) / 1e9))
    series.bands.sort(key=lambda band: band.start_s)
    return series


def _first_forward(markers: list[Marker]) -> tuple[Marker, Marker] | None:
    """The first measured forward's begin and end markers."""
    forwards = [
        (b, e)
        for b, e in pair_begin_end(m for m in markers if m.kind == "stage" and m.name == "forward")
        if not b.warmup
    ]
    return min(forwards, key=lambda pair: pair[0].t_ns) if forwards else None
