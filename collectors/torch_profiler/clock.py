"""torch.profiler's clock: Kineto's wall-clock ns mapped onto CLOCK_MONOTONIC, and oneDNN's wall clock.

Right after the profiler starts and right before it stops, a few `hwprof_clock_sync` ranges are
opened between two `time.monotonic_ns()` reads (sync_ranges): the range's start lies inside that
window, so each gives mono - kineto with an uncertainty of half the window. The tightest sync at
each end gives the offset; between them the offset is interpolated linearly (this absorbs the
drift of Kineto's TSC conversion). oneDNN's verbose timestamps are wall-clock ms: a wall/monotonic
pair read in-process (wall_pair) converts them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from hwprof.collectors.torch_profiler.kineto import KinetoTrace

SYNC_NAME = "hwprof_clock_sync"
SYNC_REPEATS = 8


def sync_ranges(torch: Any) -> list[list[int]]:
    """[mono before enter, mono after enter] of SYNC_REPEATS sync ranges, in order."""
    windows = []
    for _ in range(SYNC_REPEATS):
        before = time.monotonic_ns()
        handle = torch.ops.profiler._record_function_enter_new(SYNC_NAME, None)
        after = time.monotonic_ns()
        torch.ops.profiler._record_function_exit._RecordFunction(handle)
        windows.append([before, after])
    return windows


def wall_pair() -> list[int]:
    """[mono before, wall, mono after]: the wall clock read between two monotonic reads."""
    before = time.monotonic_ns()
    wall = time.time_ns()
    return [before, wall, time.monotonic_ns()]


@dataclass
class SyncData:
    start: list[list[int]]
    """[mono before, mono after] around each sync range opened after the profiler started."""
    stop: list[list[int]]
    wall_pairs: list[list[int]] = field(default_factory=list)
    """[mono before, wall ns, mono after], for oneDNN's wall-clock timestamps."""

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "stop": self.stop, "wall_pairs": self.wall_pairs, "sync_name": SYNC_NAME}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SyncData:
        return cls(data["start"], data.get("stop", []), data.get("wall_pairs", []))


@dataclass
class ClockFit:
    """mono = kineto_ns + offset(kineto_ns): linear between the start and stop syncs."""

    t0: int
    offset0: int
    t1: int
    offset1: int
    uncertainty_ns: int

    def __call__(self, kineto_ns: int) -> int:
        if self.t1 == self.t0:
            return kineto_ns + self.offset0
        slope = (self.offset1 - self.offset0) / (self.t1 - self.t0)
        return kineto_ns + self.offset0 + round(slope * (kineto_ns - self.t0))


def fit_clock(trace: KinetoTrace, sync: SyncData) -> ClockFit:
    return fit_syncs([e.ts for e in trace.events if e.name == SYNC_NAME], sync)


def fit_syncs(starts: list[int], sync: SyncData) -> ClockFit:
    """The fit from the sync ranges' starts on Kineto's clock (ns), matched in time order to `sync`'s windows."""
    starts = sorted(starts)
    windows = sync.start + sync.stop
    if not sync.start or len(starts) != len(windows):
        raise ValueError(f"{len(starts)} {SYNC_NAME} ranges in the trace for {len(windows)} recorded syncs")
    points = []  # (kineto ts, offset, half width)
    for ts, (before, after) in zip(starts, windows, strict=True):
        points.append((ts, (before + after) // 2 - ts, (after - before) // 2))
    first = min(points[: len(sync.start)], key=lambda p: p[2])
    last = min(points[len(sync.start) :], key=lambda p: p[2]) if sync.stop else first
    return ClockFit(first[0], first[1], last[0], last[1], max(first[2], last[2]))


def wall_offset(sync: SyncData) -> int | None:
    """mono - wall, from the tightest wall/monotonic pair."""
    if not sync.wall_pairs:
        return None
    before, wall, after = min(sync.wall_pairs, key=lambda p: p[2] - p[0])
    return (before + after) // 2 - wall
