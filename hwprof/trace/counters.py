"""Does every counter track of a trace read back what the records hold? Checked sample by sample in
Perfetto's own trace processor.

The expected side is the run directory's records, parsed here on their own (every `kind: counter` row
of passes/<pass>/<collector>.records.jsonl), not through the renderer's reader: a track of a pass is
the trace's counter track of that pass's process named as the records name it, or "<collector>:
<name>" where two collectors of the pass share a name. Per track it compares the (timestamp, value)
samples as multisets: a sample of the records missing from the trace, or one in the trace that the
records do not hold, is a mismatch. Rows with a non-finite value are not drawn and are counted apart.

The perf samples' counter tracks (the trace processor makes one per CPU from each sample's timebase
count) are checked against the sample records of their pass: per CPU, the running sum of the samples'
periods, or where a sample has none, the running count of samples. Any other counter track of the
trace that no record names is listed with its sample and zero counts.

Used by scripts/trace_counter_check.py and the tests.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from hwprof.rundir.reader import records_files
from hwprof.trace.processor import TraceSession, sql_float, sql_int, sql_text

TRACKS = """
select t.id, t.name, t.type, p.name as process
from counter_track t left join process_counter_track pt using (id) left join process p using (upid)
"""
VALUES = "select track_id, ts, value from counter"
PERF_TRACK = "perf_cpu_counter"
"""The type of the trace processor's counter tracks of perf samples' timebase counts."""

Sample = tuple[int, float]


@dataclass
class RecordTrack:
    pass_name: str
    collector: str
    name: str
    samples: list[Sample] = field(default_factory=list)
    non_finite: int = 0


@dataclass
class TrackCheck:
    """One counter track: its samples and zeros in the records and in the trace processor."""

    pass_name: str
    name: str
    records: int
    records_zeros: int
    trace: int
    trace_zeros: int
    missing: int
    """Samples of the records that the trace does not hold (timestamp and value)."""
    extra: int
    """Samples of the trace that the records do not hold."""
    example: str = ""
    non_finite: int = 0
    perf: bool = False
    """The perf samples' counter (timebase counts), not a recorded counter track."""

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.extra == 0


@dataclass
class CounterCheck:
    tracks: list[TrackCheck]
    unrecorded: list[TrackCheck]
    """Trace counter tracks that no record names (records side empty)."""

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tracks)

    def lines(self) -> list[str]:
        head = (
            f"{'pass':8} {'track':44} {'records':>8} {'zeros':>6} {'trace':>8} {'zeros':>6} {'missing':>7} {'extra':>6}"
        )
        out = [head, "-" * len(head)]
        for t in self.tracks:
            out.append(
                f"{t.pass_name:8.8} {t.name:44.44} {t.records:8d} {t.records_zeros:6d} {t.trace:8d} "
                f"{t.trace_zeros:6d} {t.missing:7d} {t.extra:6d}"
                + (f"  non-finite in records: {t.non_finite}" if t.non_finite else "")
            )
        for t in self.unrecorded:
            out.append(f"{'-':8} {t.name:44.44} {'-':>8} {'-':>6} {t.trace:8d} {t.trace_zeros:6d}  (no records)")
        bad = [t for t in self.tracks if not t.ok]
        out.append(
            f"{len(self.tracks)} recorded tracks, {len(bad)} differ"
            + "".join(f"\n  {t.pass_name}/{t.name}: {t.example}" for t in bad)
        )
        return out


def record_tracks(run_dir: Path) -> list[RecordTrack]:
    """Every counter row of every pass's records, grouped by (pass, collector, track)."""
    tracks: dict[tuple[str, str, str], RecordTrack] = {}
    for records in records_files(run_dir):
        pass_name, collector = records.pass_name, records.collector
        for line in records.content().splitlines():
            if '"counter"' not in line:
                continue
            try:
                row = json.loads(line)
            except ValueError:  # a torn last line of a killed pass
                continue
            if row.get("kind") != "counter":
                continue
            key = (pass_name, collector, row["track"])
            track = tracks.get(key) or tracks.setdefault(key, RecordTrack(*key))
            value = float(row["value"])
            if math.isfinite(value):
                track.samples.append((int(row["ts_ns"]), value))
            else:
                track.non_finite += 1
    return list(tracks.values())


def sample_counts(run_dir: Path) -> dict[str, list[Sample]]:
    """Per pass with perf samples, the timebase counts its samples should carry: per CPU (none: 0),
    in time order, the running sum of their periods, or of 1 each where any sample has no period."""
    out: dict[str, list[Sample]] = {}
    for records in records_files(run_dir):
        rows = [json.loads(line) for line in records.content().splitlines() if '"sample"' in line]
        rows = sorted((r for r in rows if r.get("kind") == "sample"), key=lambda r: int(r["ts_ns"]))
        if not rows:
            continue
        periods = all(r.get("period") is not None for r in rows)
        by_cpu: dict[int, list[dict]] = defaultdict(list)
        for r in rows:
            by_cpu[r.get("cpu") or 0].append(r)
        samples = out.setdefault(records.pass_name, [])
        for cpu_rows in by_cpu.values():
            steps = [int(r["period"]) if periods else 1 for r in cpu_rows]
            samples += [(int(r["ts_ns"]), float(v)) for r, v in zip(cpu_rows, itertools.accumulate(steps), strict=True)]
    return out


def _pass_of(process: str | None) -> str | None:
    """ "<pass> pass: <collectors>" or "<pass> pass" -> pass."""
    if not process:
        return None
    head = process.split(":", 1)[0]
    return head.removesuffix(" pass") if head.endswith(" pass") else None


def _zeros(samples: list[Sample]) -> int:
    return sum(1 for _, v in samples if v == 0)


def _compare(expected: list[Sample], got: list[Sample]) -> tuple[int, int, str]:
    want, have = Counter(expected), Counter(got)
    missing, extra = want - have, have - want
    example = ""
    if missing or extra:
        ts = min(missing or extra)[0]
        found = sorted(v for t, v in got if t == ts)
        recorded = sorted(v for t, v in expected if t == ts)
        example = f"ts {ts}: records {recorded}, trace {found}"
    return sum(missing.values()), sum(extra.values()), example


@dataclass
class _TraceTracks:
    """The trace processor's counter tracks: samples by track id, ids by (pass, name) and perf's by name,
    and the ids a check has read (the rest are unrecorded)."""

    values: dict[int, list[Sample]] = field(default_factory=lambda: defaultdict(list))
    by_name: dict[tuple[str | None, str], list[int]] = field(default_factory=lambda: defaultdict(list))
    names: dict[int, tuple[str | None, str]] = field(default_factory=dict)
    perf: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    used: set[int] = field(default_factory=set)

    def samples(self, ids: list[int]) -> list[Sample]:
        """The samples of tracks `ids`, which count as read."""
        self.used.update(ids)
        return [s for i in ids for s in self.values.get(i, [])]


def check_counters(tp: TraceSession, run_dir: Path) -> CounterCheck:
    """Every recorded counter track against the trace's, sample by sample."""
    tracks = _trace_tracks(tp)
    checks = _perf_checks(tracks, sample_counts(run_dir))
    checks += [_record_check(tracks, rec) for rec in record_tracks(run_dir)]
    return CounterCheck(checks, _unrecorded(tracks))


def _trace_tracks(tp: TraceSession) -> _TraceTracks:
    tracks = _TraceTracks()
    for row in tp.query(VALUES):
        tracks.values[sql_int(row["track_id"])].append((sql_int(row["ts"]), sql_float(row["value"])))
    for row in tp.query(TRACKS):
        key = (_pass_of(sql_text(row["process"])), str(row["name"]))
        tracks.by_name[key].append(sql_int(row["id"]))
        tracks.names[sql_int(row["id"])] = key
        if row["type"] == PERF_TRACK:
            tracks.perf[str(row["name"])].append(sql_int(row["id"]))
    return tracks


def _perf_checks(tracks: _TraceTracks, expected_counts: dict[str, list[Sample]]) -> list[TrackCheck]:
    """The perf samples' counter of each pass with perf samples against the trace's perf tracks."""
    checks = []
    for pass_name, expected in expected_counts.items():
        # one pass has perf samples in a run: its samples are the trace's only perf samples
        ids = list(itertools.chain(*tracks.perf.values())) if len(expected_counts) == 1 else []
        got = tracks.samples(ids)
        missing, extra, example = _compare(expected, got)
        name = " / ".join(sorted(tracks.perf)) or "perf samples' counter"
        checks.append(
            TrackCheck(
                pass_name,
                name,
                len(expected),
                _zeros(expected),
                len(got),
                _zeros(got),
                missing,
                extra,
                example,
                perf=True,
            )
        )
    return checks


def _record_check(tracks: _TraceTracks, rec: RecordTrack) -> TrackCheck:
    """One recorded counter track against the trace's track of its name in its pass's process."""
    qualified = (rec.pass_name, f"{rec.collector}: {rec.name}")
    key = qualified if qualified in tracks.by_name else (rec.pass_name, rec.name)
    ids = tracks.by_name.get(key, [])
    got = tracks.samples(ids)
    missing, extra, example = _compare(rec.samples, got)
    if not ids:
        example = "no counter track of this name in the pass's process"
    return TrackCheck(
        rec.pass_name,
        key[1],
        len(rec.samples),
        _zeros(rec.samples),
        len(got),
        _zeros(got),
        missing,
        extra,
        example,
        rec.non_finite,
    )


def _unrecorded(tracks: _TraceTracks) -> list[TrackCheck]:
    """The trace's counter tracks that no record names, by name, with their sample and zero counts."""
    unrecorded: dict[str, TrackCheck] = {}
    for track_id, (_, name) in tracks.names.items():
        if track_id in tracks.used:
            continue
        got = tracks.values.get(track_id, [])
        other = unrecorded.setdefault(name, TrackCheck("", name, 0, 0, 0, 0, 0, 0))
        other.trace += len(got)
        other.trace_zeros += _zeros(got)
    return list(unrecorded.values())
