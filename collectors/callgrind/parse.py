"""callgrind's combined dump file -> counter readings at hwprof's markers (pure).

With `--combine-dumps=yes` every `CALLGRIND_DUMP_STATS_AT(label)` becomes one part of a single
file: `part: N`, `desc: Trigger: Client Request: <label>`, `events: Ir Dr ...` and `totals: ...`
over the events. A dump zeroes the counts, so a part holds what ran since the previous dump. The
collector labels each dump with the index of the marker it was issued at; summing the parts in
order gives cumulative counts at every marker, which is what the perf_events / PAPI table code
(hwprof.perf.metric_tables.analyse) takes. Every figure is simulated by valgrind's virtual CPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hwprof.core.markers import Marker
from hwprof.perf.counting import Count, Reading

# callgrind event -> the perf event name whose role it plays in the shared tables (so that the
# report's MPKI columns and findings work), summed where callgrind splits what perf counts as one.
AS_PERF_EVENTS: dict[str, tuple[str, ...]] = {
    "instructions": ("Ir",),
    "L1-dcache-loads": ("Dr",),
    "L1-dcache-load-misses": ("D1mr",),
    "LLC-loads": ("D1mr",),
    "LLC-load-misses": ("DLmr",),
    "cache-misses": ("ILmr", "DLmr", "DLmw"),
    "branch-instructions": ("Bc", "Bi"),
    "branch-misses": ("Bcm", "Bim"),
}
RAW_EVENTS = ("Dw", "I1mr", "D1mw", "ILmr", "DLmw")
"""Kept under their callgrind names (prefixed "cg.")."""


@dataclass(frozen=True)
class Part:
    label: str
    totals: dict[str, int]


def parse_parts(lines: Iterable[str]) -> list[Part]:
    """The parts of a combined callgrind output file, in order."""
    parts: list[Part] = []
    label = ""
    events: list[str] = []
    for raw in lines:
        line = raw.rstrip("\n")
        if line.startswith("desc: "):
            desc = line.removeprefix("desc: ")
            if desc.startswith("Trigger: "):
                label = desc.removeprefix("Trigger: ").removeprefix("Client Request: ")
        elif line.startswith("events: "):
            events = line.removeprefix("events: ").split()
        elif line.startswith("totals: "):
            values = [int(v) for v in line.removeprefix("totals: ").split()]
            parts.append(Part(label, dict(zip(events, values, strict=False))))
            label = ""
    return parts


def read_parts(path: Path) -> list[Part]:
    with open(path, errors="replace") as f:
        return parse_parts(f)


def as_counts(totals: dict[str, int]) -> dict[str, int]:
    """One part's totals under the names the counter tables use."""
    out = {}
    for event, sources in AS_PERF_EVENTS.items():
        if all(s in totals for s in sources):
            out[event] = sum(totals[s] for s in sources)
    for raw in RAW_EVENTS:
        if raw in totals:
            out[f"cg.{raw}"] = totals[raw]
    return out


def readings_at_markers(parts: Sequence[Part], markers: Sequence[Marker]) -> list[Reading]:
    """Cumulative counts at each marker whose index labels a part (parts with other labels still add)."""
    running: dict[str, int] = {}
    readings: list[Reading] = []
    for part in parts:
        for event, value in as_counts(part.totals).items():
            running[event] = running.get(event, 0) + value
        if not part.label.isdigit():
            continue
        marker = markers[int(part.label)]
        # never multiplexed: enabled = running, advancing by one per reading (the table code scales by their deltas)
        tick = len(readings) + 1
        counts = {event: Count(value, tick, tick) for event, value in running.items()}
        readings.append(Reading(marker.kind, marker.phase, marker.name, marker.iteration, marker.t_ns, counts))
    return readings


def events_present(parts: Sequence[Part]) -> list[str]:
    seen: dict[str, None] = {}
    for part in parts:
        for event in as_counts(part.totals):
            seen[event] = None
    return list(seen)
