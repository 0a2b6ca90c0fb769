"""The raw readings file (`<collector>.readings.jsonl`), so any analysis can be redone later.

Line 1, the header: {"kind": "header", "events": {name: {unit, scale, source, pmu}},
"groups": [{"index": g, "events": [names in value order]}], "clock": "CLOCK_MONOTONIC ns",
"inherit": bool (the events counted the opening thread and every thread created after it; false: that thread
alone, --counter-threads model; absent in older files: true)}.
Then one line per reading:
- {"kind": "marker", "marker": [kind, phase, name, iteration, t_ns], "cpu_ns": int | null,
   "groups": {"<g>": [time_enabled, time_running, [value, ...]]}}
- {"kind": "sample", "t_ns": int, "groups": {...}}   (interval sampler)
Values are raw (unscaled); enabled/running are the kernel's totals (summed over inherited threads).
cpu_ns (stage and iteration markers only): CPU time of the threads the events count (perf.threadcpu);
uncharged_ns (same markers, where /proc/stat has it): host steal + IRQ time (hwprof.perf.steal).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from hwprof.core.atomic import atomic_path
from hwprof.perf.counting import Count, Reading

if TYPE_CHECKING:
    from hwprof.core.markers import Marker
    from hwprof.perf.engine import CounterSet
    from hwprof.perf.events import EventSpec

GroupRow = tuple[int, int, Sequence[int]]
Raw = tuple[tuple[int, ...], tuple[bytes, ...]]
"""One read of the enabled groups: their indices and their raw read(2) buffers (CounterSet.read_active)."""
MarkerRaw = tuple["Marker", tuple[int, ...], tuple[bytes, ...], int | None, int | None]
"""A read at a marker: the marker, the groups read, their buffers, cpu_ns and uncharged_ns."""


def header_line(events: Mapping[str, Mapping[str, Any]], groups: Sequence[Sequence[str]], *, inherit: bool) -> str:
    return json.dumps(
        {
            "kind": "header",
            "events": events,
            "groups": [{"index": k, "events": list(names)} for k, names in enumerate(groups)],
            "clock": "CLOCK_MONOTONIC ns",
            "inherit": inherit,
        }
    )


def write(
    path: Path,
    counters: CounterSet,
    specs: Sequence[EventSpec],
    at_markers: Sequence[MarkerRaw],
    samples: Sequence[tuple[int, Raw]],
) -> None:
    """The whole file, raw as read: one line per marker read, one per interval sample."""
    events = {s.name: {"unit": s.display_unit, "scale": s.scale, "source": s.source, "pmu": s.pmu} for s in specs}
    groups = [[s.name for s in g.specs] for g in counters.groups]
    with atomic_path(path) as tmp, open(tmp, "w") as out:
        out.write(header_line(events, groups, inherit=counters.inherit) + "\n")
        for m, active, raws, cpu, uncharged in at_markers:
            row = [m.kind, m.phase, m.name, m.iteration, m.t_ns]
            out.write(marker_line(row, cpu, _parsed(counters, active, raws), uncharged) + "\n")
        for t, (active, raws) in samples:
            out.write(sample_line(t, _parsed(counters, active, raws)) + "\n")


def _parsed(counters: CounterSet, active: tuple[int, ...], raws: tuple[bytes, ...]) -> dict[int, GroupRow]:
    out: dict[int, GroupRow] = {}
    for index, raw in zip(active, raws, strict=True):
        reading = counters.groups[index].group.parse(raw)
        out[index] = (reading.enabled, reading.running, reading.values)
    return out


class MarkerLine(TypedDict):
    """A marker line of the file (the module's docstring), as it is written."""

    kind: Literal["marker"]
    marker: list[Any]
    """[kind, phase, name, iteration, t_ns]."""
    cpu_ns: int | None
    groups: dict[str, list[Any]]
    """Group index -> [time_enabled, time_running, [value, ...]]."""
    uncharged_ns: NotRequired[int]


def marker_line(
    row: Sequence[Any], cpu_ns: int | None, groups: Mapping[int, GroupRow], uncharged_ns: int | None = None
) -> str:
    line: MarkerLine = {"kind": "marker", "marker": list(row), "cpu_ns": cpu_ns, "groups": _groups(groups)}
    if uncharged_ns is not None:
        line["uncharged_ns"] = uncharged_ns
    return json.dumps(line, separators=(",", ":"))


def sample_line(t_ns: int, groups: Mapping[int, GroupRow]) -> str:
    return json.dumps({"kind": "sample", "t_ns": t_ns, "groups": _groups(groups)}, separators=(",", ":"))


def _groups(groups: Mapping[int, GroupRow]) -> dict[str, list[Any]]:
    return {str(k): [e, r, list(v)] for k, (e, r, v) in groups.items()}


def counts_of(groups: Mapping[str, Sequence[Any]], names: Sequence[Sequence[str]]) -> dict[str, Count]:
    counts: dict[str, Count] = {}
    for key, (enabled, running, values) in groups.items():
        index = int(key)
        for name, value in zip(names[index], values, strict=True):
            counts[name] = Count(int(value), int(enabled), int(running), index)
    return counts


@dataclass(frozen=True)
class EventInfo:
    """One event of the header: its display unit, the scale of its raw values, where it comes from, its PMU."""

    unit: str | None = None
    scale: float = 1.0
    source: str | None = None
    pmu: str | None = None


@dataclass
class Header:
    """The file's first line: the events and the groups, each group's event names in value order."""

    events: dict[str, EventInfo]
    groups: list[list[str]]


def header_from_json(doc: Mapping[str, Any]) -> Header:
    events = {
        name: EventInfo(info.get("unit"), float(info.get("scale", 1.0)), info.get("source"), info.get("pmu"))
        for name, info in doc["events"].items()
    }
    return Header(events, [list(g["events"]) for g in doc["groups"]])


@dataclass
class Loaded:
    header: Header
    readings: list[Reading] = field(default_factory=list)
    samples: list[tuple[int, dict[str, Count]]] = field(default_factory=list)

    @property
    def scales(self) -> dict[str, float]:
        return {name: info.scale for name, info in self.header.events.items()}


def load(path: Path) -> Loaded:
    lines = path.read_text().splitlines()
    if not lines:
        raise ValueError(f"{path} is empty")
    header = header_from_json(json.loads(lines[0]))
    names = header.groups
    out = Loaded(header)
    for line in lines[1:]:
        try:
            row = json.loads(line)
        except ValueError:
            break  # a torn last line from a killed pass
        counts = counts_of(row["groups"], names)
        if row["kind"] == "marker":
            kind, phase, name, iteration, t_ns = row["marker"]
            reading = Reading(
                kind, phase, name, int(iteration), int(t_ns), counts, row["cpu_ns"], row.get("uncharged_ns")
            )
            out.readings.append(reading)
        elif row["kind"] == "sample":
            out.samples.append((int(row["t_ns"]), counts))
    return out
