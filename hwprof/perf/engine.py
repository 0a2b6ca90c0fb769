"""The counters of one pass: which events open, how they are grouped, which group counts when.

Software events form one group that is always on. Hardware events go into as few groups as the
PMU can schedule at once (the kernel decides: a group it cannot schedule is rejected at open);
with more than one such group, exactly one is enabled per measured iteration, round robin, so
every count is exact rather than multiplexed. Every group is opened from the thread that runs the
model, before torch creates its thread pool: with inherit=1 (every thread created after it is counted,
--counter-threads all), or for that thread alone (--counter-threads model: RunConfig.counted_threads).
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from hwprof.perf.counting import Count
from hwprof.perf.events import EventSpec
from hwprof.perf.groups import coverage, plan_groups, rotation
from hwprof.perf.open_errors import Unavailable, unavailable
from hwprof.perf.syscall import CounterGroup, GroupReading, PerfOpenError, try_open
from hwprof.schema.summaries_cpu import CounterGroupDoc

ANCHORS: tuple[str, ...] = ("cycles", "instructions")
_DENIED = (errno.EACCES, errno.EPERM)


class Group(Protocol):
    names: list[str]

    def read_raw(self) -> bytes: ...
    def parse(self, raw: bytes) -> GroupReading: ...
    def enable(self) -> None: ...
    def disable(self) -> None: ...
    def close(self) -> None: ...


GroupOpener = Callable[..., Group]
Probe = Callable[[EventSpec, bool], int]


@dataclass
class OpenGroup:
    index: int
    group: Group
    specs: list[EventSpec]
    always_on: bool


@dataclass
class CounterSet:
    groups: list[OpenGroup] = field(default_factory=list)
    unavailable: list[Unavailable] = field(default_factory=list)
    user_only: bool = False
    """Opened with exclude_kernel (perf_event_paranoid forbids kernel counting for this user)."""
    inherit: bool = True
    """Opened with inherit=1: the opening thread and every thread created after it; else that thread alone."""
    schedule: dict[int, int] = field(default_factory=dict)
    """Planned: measured iteration -> group index (rotating groups only)."""
    measured: dict[int, int] = field(default_factory=dict)
    """What happened: iteration -> the rotating group enabled during it."""
    active: tuple[int, ...] = ()
    _current: int | None = None

    @property
    def rotating(self) -> list[int]:
        return [g.index for g in self.groups if not g.always_on]

    @property
    def events(self) -> list[EventSpec]:
        seen: dict[str, EventSpec] = {}
        for g in self.groups:
            for spec in g.specs:
                seen.setdefault(spec.name, spec)
        return list(seen.values())

    @classmethod
    def open(
        cls,
        specs: Sequence[EventSpec],
        iterations: Sequence[int],
        *,
        paranoid: int | None = None,
        max_group: int | None = None,
        inherit: bool = True,
        probe: Probe = try_open,
        opener: GroupOpener = CounterGroup.open,
    ) -> CounterSet:
        out = cls(inherit=inherit)
        usable = out._probe_each(specs, paranoid, probe)
        software = [s for s in usable if s.software]
        hardware = [s for s in usable if not s.software]
        if software:
            out._open_group(software, True, opener)
        by_name = {s.name: s for s in hardware}

        def fits(names: list[str]) -> bool:
            if max_group is not None and len(names) > max_group:
                return False
            try:
                opener(
                    [by_name[n] for n in names], disabled=True, exclude_kernel=out.user_only, inherit=inherit
                ).close()
            except PerfOpenError:
                return False
            return True

        plan, unschedulable = plan_groups(list(by_name), fits, ANCHORS)
        for name in unschedulable:
            out.unavailable.append(unavailable(name, errno.EINVAL))
        for names in plan:
            out._open_group([by_name[n] for n in names], len(plan) == 1, opener)
        out.schedule = {it: out.rotating[k] for it, k in rotation(len(out.rotating), iterations).items()}
        out.active = tuple(g.index for g in out.groups if g.always_on)
        return out

    def _probe_each(self, specs: Sequence[EventSpec], paranoid: int | None, probe: Probe) -> list[EventSpec]:
        results = {s.name: probe(s, False) for s in specs}
        if any(err in _DENIED for err in results.values()):
            user_only = {s.name: probe(s, True) for s in specs}
            if any(err == 0 for name, err in user_only.items() if results[name] in _DENIED):
                self.user_only = True
                results = user_only
        usable = []
        for spec in specs:
            err = results[spec.name]
            if err:
                self.unavailable.append(unavailable(spec.name, err, paranoid))
            else:
                usable.append(spec)
        return usable

    def _open_group(self, specs: list[EventSpec], always_on: bool, opener: GroupOpener) -> None:
        try:
            group = opener(specs, disabled=not always_on, exclude_kernel=self.user_only, inherit=self.inherit)
        except PerfOpenError as exc:
            for spec in specs:
                self.unavailable.append(unavailable(spec.name, exc.errno or 0))
            return
        self.groups.append(OpenGroup(len(self.groups), group, specs, always_on))

    def begin_iteration(self, iteration: int) -> None:
        rotating = self.rotating
        if not rotating:
            return
        index = self.schedule.get(iteration, rotating[iteration % len(rotating)])
        self.groups[index].group.enable()
        self._current = index
        self.measured[iteration] = index
        self.active = (*(g.index for g in self.groups if g.always_on), index)

    def end_iteration(self) -> None:
        if self._current is None:
            return
        self.active = tuple(g.index for g in self.groups if g.always_on)
        self.groups[self._current].group.disable()
        self._current = None

    def read_active(self) -> tuple[tuple[int, ...], tuple[bytes, ...]]:
        active = self.active
        groups = self.groups
        return active, tuple([groups[i].group.read_raw() for i in active])

    def parse(self, active: Sequence[int], raws: Sequence[bytes]) -> dict[str, Count]:
        counts: dict[str, Count] = {}
        for index, raw in zip(active, raws, strict=True):
            og = self.groups[index]
            reading = og.group.parse(raw)
            for spec, value in zip(og.specs, reading.values, strict=True):
                counts[spec.name] = Count(value, reading.enabled, reading.running, index)
        return counts

    def close(self) -> None:
        for g in self.groups:
            g.group.close()

    def describe(self) -> list[CounterGroupDoc]:
        """Groups and the iterations each measured, for the summary (run.json)."""
        measured = coverage(self.measured)
        planned = coverage(self.schedule)
        out = []
        for g in self.groups:
            row = CounterGroupDoc.of(index=g.index, events=[s.name for s in g.specs], always_on=g.always_on)
            if g.always_on:
                row.update(iterations="all")
            else:
                row.update(iterations=measured.get(g.index, []))
                if not planned.get(g.index):
                    row.update(note="never enabled: fewer measured iterations than groups")
            out.append(row)
        return out
