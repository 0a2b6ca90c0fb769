"""A pass's records (the collectors' records.jsonl and metrics.json) grouped by thread and track, and the pass's
main thread.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hwprof.core import jsonfast
from hwprof.rundir.reader import RecordsFile, RunData, RunDirError
from hwprof.schema.check import read_jsonl
from hwprof.schema.codec import JsonObject
from hwprof.schema.records import record_fault
from hwprof.trace.model import LEVEL_RECORD, CallstackSample, CounterTrack, Slice


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
            tid = thread_of(group.track)
            if tid is not None:
                yield tid, group


def _rows(records: RecordsFile) -> list[dict[str, Any]]:
    """The JSON objects of a records file: parsed in one call (a records file of a long run holds
    hundreds of thousands of lines), else line by line up to a torn last line of a killed pass."""
    text = records.content()
    try:
        return list(jsonfast.loads("[" + ",".join(line for line in text.split("\n") if line.strip()) + "]"))
    except ValueError:  # a torn last line is dropped; a corrupt line elsewhere is an error naming file:line
        return [row for _, row in read_jsonl(records.path).rows]


def _line_number(records: RecordsFile, index: int) -> int:
    """The line number of the index-th row of a records file (rows skip blank lines): for an error only."""
    lines = (number for number, line in enumerate(records.content().split("\n"), 1) if line.strip())
    return next(itertools.islice(lines, index, None), 0)


def read_pass_records(files: Iterable[RecordsFile], withheld: frozenset[str] = frozenset()) -> PassRecords:
    """Every collector's records of one pass, in records.py's format (a "kind" of span, counter or
    thread), spans grouped by track as slices. Read as plain rows: a long run's records are
    hundreds of thousands of lines, and the renderer needs none of the record classes' checks."""
    out = PassRecords()
    ends: list[int] = []
    for records in files:
        collector, path = records.collector, records.path
        if collector in withheld:
            continue
        for index, row in enumerate(_rows(records)):
            fault = record_fault(row)
            if fault is not None:
                raise RunDirError(f"{path}:{_line_number(records, index)}: {fault}")
            try:
                _add_row(out, collector, row, ends)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                text = f"{path}: not a record ({type(exc).__name__}: {exc}): {json.dumps(row, default=str)}"
                raise RunDirError(text[:300]) from exc
    ends.extend(max(t for t, _ in c.samples) for c in out.counters.values() if c.samples)
    out.last_ns = max(ends, default=0)
    out.samples.sort(key=lambda s: s.ts)
    return out


def _add_row(out: PassRecords, collector: str, row: JsonObject, ends: list[int]) -> None:
    kind = row.get("kind")
    if kind == "span":
        track = row["track"]
        group = out.spans.get(track)
        if group is None:
            group = out.spans[track] = SpanGroup(track, thread_of(track) or row.get("tid"))
        start = int(row["ts_ns"])
        end = start + int(row["dur_ns"])
        args = row.get("args") or {}
        group.slices.append(Slice(start, end, str(row["name"]), row.get("category") or "", LEVEL_RECORD, args))
        ends.append(end)
    elif kind == "counter":
        value = float(row["value"])
        key = (collector, row["track"])
        counter = out.counters.get(key)
        if counter is None:
            counter = out.counters[key] = CounterTrack(row["track"], row.get("unit") or "", collector)
        counter.samples.append((int(row["ts_ns"]), value))
    elif kind == "sample":
        ts, tid, cpu, period = int(row["ts_ns"]), int(row["tid"]), row.get("cpu"), row.get("period")
        frames = _frames(tuple((str(f), str(lib)) for f, lib in row["frames"]))
        out.samples.append(
            CallstackSample(
                ts, tid, int(cpu) if cpu is not None else None, frames, int(period) if period is not None else None
            )
        )
        ends.append(ts)
    elif kind == "thread" and row.get("name"):
        out.thread_names[int(row["tid"])].append(str(row["name"]))


@functools.lru_cache(maxsize=1 << 14)
def _frames(frames: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """One shared tuple per distinct stack: a run holds many samples of few stacks."""
    return frames


_THREAD_TRACK = re.compile(r"^thread:(\d+)$")


@functools.lru_cache(maxsize=4096)
def thread_of(track: str) -> int | None:
    """ "thread:<tid>" -> tid; a named track -> None."""
    match = _THREAD_TRACK.match(track)
    return int(match.group(1)) if match else None


def named_threads(names: dict[int, list[str]]) -> dict[int, str]:
    """One name per tid: a specific name (MainThread, hwprof-sysstat) beats the process's comm."""
    common = Counter(n for ns in names.values() for n in set(ns)).most_common(1)
    comm = common[0][0] if common and len(names) > 1 else None
    out = {}
    for tid, ns in names.items():
        specific = [n for n in ns if n != comm]
        out[tid] = specific[0] if specific else ns[0]
    return out


def pass_main_thread(
    run: RunData, pass_name: str, records: PassRecords, names: dict[int, str], layer_spans: list[Slice]
) -> tuple[int | None, str]:
    """The tid of the pass's main thread (it runs the model and emits the markers) and how it was found."""
    entry = run.doc.passes.get(pass_name)
    result = run.pass_result(pass_name)
    for source, value in (("run.json", entry.pid if entry else None), ("result.json", result.pid)):
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
