"""Memory per layer and per stage from torch's allocator events (torch.profiler's profile_memory, in the layers
pass: memory_collector.py).

Each event is one allocation or free by torch's allocator (its bytes, its device), on the run's clock. The live
bytes after each are the events' running sum per device from the first profiled moment (`with_live`): what was
allocated before the profiler started is not in it, so every figure below is relative to a range's start. A layer's
(or stage's) range takes every event inside it, whatever thread made it (intra-op threads allocate too): the bytes it
allocated and freed, its allocations, its peak (the highest live bytes inside it above those live at its start: the
working memory it needs) and its growth (the live bytes at its end less those at its start: what it leaves
allocated; negative where it freed more than it allocated, its input for one). Nested ranges each take their events,
so a depth-2 layer's bytes allocated and freed and its growth add up to its parent's. Each is summed over the
measured iterations' ranges and given as the mean per iteration (the peak: the mean of each iteration's peak), as
the other collectors' per-layer figures are.

What it covers: tensor memory through torch's allocator (the CPU's, or the CUDA caching allocator's, apart), not
the process's pages: OpenCV's buffers, Python objects and the allocator's own caching are outside it (the
sysstat collector's RSS, in the same pass, is the process's).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hwprof.schema.records import CounterSample


@dataclass(frozen=True, slots=True)
class MemoryEvent:
    """One allocation (bytes > 0) or free (bytes < 0) by torch's allocator, on the run's clock (ns)."""

    ts: int
    bytes: int
    device_type: int
    """c10's DeviceType: 0 the CPU, 1 CUDA."""
    total: int = 0
    """The live bytes after it on its device, from the first profiled moment (with_live)."""


def with_live(events: Iterable[MemoryEvent]) -> list[MemoryEvent]:
    """The events in time order, each with the live bytes after it: the running sum of its device's events."""
    live: dict[int, int] = defaultdict(int)
    out = []
    for event in sorted(events, key=lambda e: e.ts):  # made anew, not dataclasses.replace: 470,000 at yolov7 320
        total = live[event.device_type] = live[event.device_type] + event.bytes
        out.append(MemoryEvent(event.ts, event.bytes, event.device_type, total))
    return out


DEVICE_PREFIX = {0: "mem", 1: "cuda_mem"}
"""c10 DeviceType -> the metrics' prefix: the CPU allocator's, the CUDA caching allocator's."""
FIGURES = ("alloc_bytes", "freed_bytes", "allocs", "peak_bytes", "growth_bytes")

Range = tuple[str, str, int, int]
"""(kind, name, start, end): a layer's, stage's or iteration's range, on the run's clock (ns)."""


def memory_units() -> dict[str, str]:
    return {f"{p}_{f}": ("count" if f == "allocs" else "B") for p in DEVICE_PREFIX.values() for f in FIGURES}


def memory_methods() -> dict[str, str]:
    how = (
        "torch.profiler profile_memory, no op recorded (layers pass): the allocator's events inside the range "
        "(every thread), mean per measured iteration; tensor memory through torch's {device} allocator, not the "
        "process's pages"
    )
    out: dict[str, str] = {}
    for code, prefix in DEVICE_PREFIX.items():
        device = "CPU" if code == 0 else "CUDA caching"
        out[f"{prefix}_alloc_bytes"] = how.format(device=device) + ": bytes allocated"
        out[f"{prefix}_freed_bytes"] = how.format(device=device) + ": bytes freed"
        out[f"{prefix}_allocs"] = how.format(device=device) + ": allocations"
        out[f"{prefix}_peak_bytes"] = (
            how.format(device=device) + ": the highest live bytes inside the range above those live at its start"
        )
        out[f"{prefix}_growth_bytes"] = how.format(device=device) + ": live bytes at the range's end less at its start"
    return out


def memory_by_range(memory: Sequence[MemoryEvent], ranges: Sequence[Range]) -> dict[tuple[str, str], dict[str, float]]:
    """(kind, name) -> figure -> its sum over the ranges of that name (layers and stages; iterations are not
    kept). Empty where the profiler recorded no allocator event."""
    out: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for code, prefix in DEVICE_PREFIX.items():
        events = [m for m in memory if m.device_type == code]
        if not events:
            continue
        times = [m.ts for m in events]
        for kind, name, start, end in ranges:
            if kind not in ("layer", "stage"):
                continue
            row = out[(kind, name)]
            for figure, value in _window(events, times, start, end).items():
                row[f"{prefix}_{figure}"] += value
    return {key: dict(row) for key, row in out.items()}


def _window(events: Sequence[MemoryEvent], times: Sequence[int], start: int, end: int) -> dict[str, float]:
    lo, hi = bisect.bisect_left(times, start), bisect.bisect_right(times, end)
    inside = events[lo:hi]
    live_at_start = events[lo - 1].total if lo > 0 else 0
    live_at_end = events[hi - 1].total if hi > 0 else 0
    return {
        "alloc_bytes": float(sum(m.bytes for m in inside if m.bytes > 0)),
        "freed_bytes": float(-sum(m.bytes for m in inside if m.bytes < 0)),
        "allocs": float(sum(1 for m in inside if m.bytes > 0)),
        "peak_bytes": float(max([live_at_start, *(m.total for m in inside)]) - live_at_start),
        "growth_bytes": float(live_at_end - live_at_start),
    }


def peak_layer(memory: Sequence[MemoryEvent], ranges: Sequence[Range]) -> str | None:
    """The top-level layer whose range holds the highest live bytes (the CPU allocator's) of the first forward."""
    forwards = sorted((start, end) for kind, name, start, end in ranges if kind == "stage" and name == "forward")
    events = [(m.ts, m.total) for m in memory if m.device_type == 0]
    if not forwards or not events:
        return None
    start, end = forwards[0]
    inside = [(t, total) for t, total in events if start <= t <= end]
    if not inside:
        return None
    at, _ = max(inside, key=lambda e: e[1])
    layers = (name for kind, name, a, b in ranges if kind == "layer" and name.count(".") == 1 and a <= at <= b)
    return next(layers, None)


TRACKS = {0: "torch CPU allocated (bytes)", 1: "torch CUDA allocated (bytes)"}
"""The trace's counter tracks of the allocator's live bytes, beside sysstat's "RSS (bytes)"."""


def live_bytes(memory: Sequence[MemoryEvent]) -> list[CounterSample]:
    """The allocator's live bytes after each event, per device, on the run's clock: a spike in the trace lies
    inside the layer slice that made it."""
    return [CounterSample(TRACKS[m.device_type], m.ts, float(m.total), "B") for m in memory if m.device_type in TRACKS]
