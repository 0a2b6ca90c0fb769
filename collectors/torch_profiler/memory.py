"""Memory per layer and per stage, from torch.profiler's allocator events (profile_memory=True in the trace pass).

Each "[memory]" event is one allocation or free by torch's allocator with the allocator's live bytes after it
("Total Allocated", per device). A layer's (or stage's) range on the run's clock takes every event inside it,
whatever thread made it (intra-op threads allocate too): the bytes it allocated and freed, its allocations, its
peak (the highest live bytes inside it above those live at its start: the working memory it needs) and what it
its growth (the live bytes at its end less those at its start: what it leaves allocated; negative where it freed
more than it allocated, its input for one). Both are relative to the range's start, since the
allocator's "Total Allocated" counts only what was allocated while the profiler ran. Nested ranges each take
their events, so a depth-2 layer's bytes allocated and freed and its growth add up to its parent's. Each is summed over
the measured iterations' ranges and given as the mean per iteration (the peak: the mean of each iteration's
peak), as the collector's other per-layer figures are.

What it covers: tensor memory through torch's allocator (the CPU's, or the CUDA caching allocator's, apart), not
the process's pages: OpenCV's buffers, Python objects and the allocator's own caching are outside it (the
sysstat pass's RSS is the process's).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Sequence

from hwprof.collectors.torch_profiler.kineto import MemoryEvent

from hwprof.schema.records import CounterSample

DEVICE_PREFIX = {0: "mem", 1: "cuda_mem"}
"""c10 DeviceType -> the metrics' prefix: the CPU allocator's, the CUDA caching allocator's."""
FIGURES = ("alloc_bytes", "freed_bytes", "allocs", "peak_bytes", "growth_bytes")

Range = tuple[str, str, int, int]
"""(kind, name, start, end): a layer's, stage's or iteration's range, on the run's clock (ns)."""


def memory_units() -> dict[str, str]:
    return {f"{p}_{f}": ("count" if f == "allocs" else "B") for p in DEVICE_PREFIX.values() for f in FIGURES}


def memory_methods() -> dict[str, str]:
    how = (
        "torch.profiler profile_memory: the allocator's events inside the range (every thread), mean per "
        "measured iteration; tensor memory through torch's {device} allocator, not the process's pages"
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


def memory_by_range(
    memory: Sequence[MemoryEvent], ranges: Sequence[Range], fit: Callable[[int], int]
) -> dict[tuple[str, str], dict[str, float]]:
    """(kind, name) -> figure -> its sum over the ranges of that name (layers and stages; iterations are not
    kept). Empty where the profiler recorded no allocator event."""
    out: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for code, prefix in DEVICE_PREFIX.items():
        events = [m for m in memory if m.device_type == code]
        if not events:
            continue
        times = [fit(m.ts) for m in events]
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


def peak_layer(memory: Sequence[MemoryEvent], ranges: Sequence[Range], fit: Callable[[int], int]) -> str | None:
    """The top-level layer whose range holds the highest live bytes (the CPU allocator's) of the first forward."""
    forwards = sorted((start, end) for kind, name, start, end in ranges if kind == "stage" and name == "forward")
    events = [(fit(m.ts), m.total) for m in memory if m.device_type == 0]
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


def live_bytes(memory: Sequence[MemoryEvent], fit: Callable[[int], int]) -> list[CounterSample]:
    """The allocator's live bytes after each event, per device, on the run's clock: a spike in the trace lies
    inside the layer slice that made it."""
    return [
        CounterSample(TRACKS[m.device_type], fit(m.ts), float(m.total), "B") for m in memory if m.device_type in TRACKS
    ]
