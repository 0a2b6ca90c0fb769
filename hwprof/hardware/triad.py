"""The memory-bandwidth probe: a STREAM-like triad `a = b + s*c`, sized by the cache and bounded by memory.

STREAM's rule makes each array at least 4x the last-level cache, so that the passes stream from memory.
A VM may report a large LLC (480 MiB here on one host: 3 arrays of 1,920 MiB, a 6 GB peak for the collect's
parent), so the arrays are also bounded: the three together take at most TRIAD_MEMORY_SHARE of the memory
available when measuring, and each at most TRIAD_MAX_BYTES. Where a bound wins over the 4x rule, the
record says so, and that the figure may include cache hits (an array of 1-4x the LLC is partly served
from it; the measured GB/s is then an upper estimate of memory bandwidth).
"""

from __future__ import annotations

from dataclasses import dataclass

TRIAD_MIN_BYTES = 64 * 2**20
"""Each triad array is at least this big, and at least 4x the last-level cache (unless a bound below wins)."""
TRIAD_MAX_BYTES = 320 * 2**20
"""Each triad array at most this big: 3 x 320 MiB in all, whatever the cache a VM reports, so that a first run's
probe (in the collect's process, torch loaded) stays within 1.5 GB of resident memory. At 3 x 512 MiB, a Xeon VM
reporting a 260 MiB LLC peaked at 1.88 GB (issue 66). Three arrays of 320 MiB still stream 3.7x such an LLC per
pass; the record says where the cap made them smaller than STREAM's 4x rule asks."""
TRIAD_MEMORY_SHARE = 0.25
"""The three arrays together take at most this share of the memory available (psutil) when measuring."""
TRIAD_FLOOR_BYTES = 2**20
"""No array smaller than this, however little memory is available (the probe then says so)."""
STREAM_RULE = 4
"""STREAM's sizing rule: each array at least this many times the last-level cache."""
MEMORY = "memory"
SIZE_CAP = "the size cap"


def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


@dataclass(frozen=True)
class TriadSize:
    """How large the triad's arrays were, and why."""

    array_bytes: int
    llc_bytes: int | None
    available_bytes: int | None
    """Memory available when sizing (psutil.virtual_memory().available); None where unknown."""
    capped_by: str = ""
    """MEMORY or SIZE_CAP where a bound made the arrays smaller than the cache rule asks; '' where not."""

    @property
    def elements(self) -> int:
        return self.array_bytes // 4

    @property
    def below_stream_rule(self) -> bool:
        """The arrays are smaller than 4x the LLC: part of each pass may be served from the cache."""
        return self.llc_bytes is not None and self.array_bytes < STREAM_RULE * self.llc_bytes

    @property
    def text(self) -> str:
        """'arrays 3x320 MiB, capped by memory (1/4 of 1,800 MiB available); LLC 480 MiB: the figure may include
        cache hits'."""
        out = f"arrays 3x{_mib(self.array_bytes)}"
        if self.capped_by == MEMORY and self.available_bytes is not None:
            out += f", capped by memory (1/{round(1 / TRIAD_MEMORY_SHARE)} of {_mib(self.available_bytes)} available)"
        elif self.capped_by == SIZE_CAP:
            out += f", capped at {_mib(TRIAD_MAX_BYTES)} each"
        if self.llc_bytes is None:
            return out + "; last-level cache size unknown"
        out += f"; LLC {_mib(self.llc_bytes)}"
        if self.below_stream_rule:
            out += f": below STREAM's {STREAM_RULE}x the LLC, the figure may include cache hits"
        return out


def triad_size(llc: int | None, available: int | None) -> TriadSize:
    """Each array max(TRIAD_MIN_BYTES, 4x LLC), at most TRIAD_MAX_BYTES and a third of TRIAD_MEMORY_SHARE of
    the available memory (never below TRIAD_FLOOR_BYTES); a multiple of 4 KiB."""
    wanted = max(TRIAD_MIN_BYTES, STREAM_RULE * (llc or 0))
    by_memory = int(available * TRIAD_MEMORY_SHARE / 3) if available is not None else None
    size, capped = wanted, ""
    if size > TRIAD_MAX_BYTES:
        size, capped = TRIAD_MAX_BYTES, SIZE_CAP
    if by_memory is not None and by_memory < size:
        size, capped = by_memory, MEMORY
    size = max(TRIAD_FLOOR_BYTES, size // 4096 * 4096)
    return TriadSize(size, llc, available, capped)


def available_memory() -> int | None:
    """Memory available to new allocations now (psutil), or None where it cannot be read."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # pragma: no cover - psutil is a dependency; a sandbox may hide /proc/meminfo
        return None
