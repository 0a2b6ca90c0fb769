"""Metrics derived from counts by the events' roles (CPI, MPKI, cache traffic), and the cache line size."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

LINE_SIZE_DEFAULT = 64
ROLES: dict[str, tuple[str, ...]] = {
    "cycles": ("cycles", "PAPI_TOT_CYC"),
    "instructions": ("instructions", "PAPI_TOT_INS"),
    "l1d_misses": ("L1-dcache-load-misses", "PAPI_L1_DCM"),
    "branch_misses": ("branch-misses", "PAPI_BR_MSP"),
    "stalled_backend": ("stalled-cycles-backend",),
    "task_clock": ("task-clock",),
}
LLC_PAIRS: tuple[tuple[str, str], ...] = (
    ("LLC-load-misses", "LLC-loads"),
    ("cache-misses", "cache-references"),
    ("PAPI_L3_TCM", "PAPI_L3_TCA"),
)
LLC_MISSES: tuple[str, ...] = ("LLC-load-misses", "cache-misses", "PAPI_L3_TCM")
DERIVED_UNITS: dict[str, str] = {
    "CPI": "cycles/instruction",
    "IPC": "instructions/cycle",
    "L1D MPKI": "misses/1000 instructions",
    "LLC MPKI": "misses/1000 instructions",
    "LLC miss ratio": "ratio",
    "branch MPKI": "misses/1000 instructions",
    "backend-stall share": "ratio",
    "memory traffic (estimate)": "bytes",
    "CPUs utilized": "CPUs",
}


@dataclass(frozen=True)
class Derived:
    name: str
    value: float
    unit: str
    method: str


def _pick(counts: Mapping[str, float], role: str) -> tuple[str, float] | None:
    for name in ROLES[role]:
        if name in counts:
            return name, counts[name]
    return None


def derived_metrics(
    counts: Mapping[str, float], wall_ns: float | None = None, line_size: int = LINE_SIZE_DEFAULT
) -> list[Derived]:
    """Metrics computable from the measured counts; one whose inputs are missing is absent."""
    out: list[Derived] = []

    def ratio(name: str, num: tuple[str, float] | None, den: tuple[str, float] | None, k: float = 1.0) -> None:
        if num is None or den is None or den[1] <= 0:
            return
        per = f" per {k:g}" if k != 1.0 else " /"
        method = f"{num[0]}{per} {den[0]}"
        out.append(Derived(name, k * num[1] / den[1], DERIVED_UNITS[name], method))

    cycles, instructions = _pick(counts, "cycles"), _pick(counts, "instructions")
    ratio("CPI", cycles, instructions)
    ratio("IPC", instructions, cycles)
    ratio("L1D MPKI", _pick(counts, "l1d_misses"), instructions, 1000.0)
    llc = next(((m, counts[m]) for m in LLC_MISSES if m in counts), None)
    ratio("LLC MPKI", llc, instructions, 1000.0)
    for misses, refs in LLC_PAIRS:
        if misses in counts and refs in counts:
            ratio("LLC miss ratio", (misses, counts[misses]), (refs, counts[refs]))
            break
    ratio("branch MPKI", _pick(counts, "branch_misses"), instructions, 1000.0)
    ratio("backend-stall share", _pick(counts, "stalled_backend"), cycles)
    if llc is not None:
        out.append(
            Derived(
                "memory traffic (estimate)",
                llc[1] * line_size,
                DERIVED_UNITS["memory traffic (estimate)"],
                f"estimate: {llc[0]} x {line_size} B cache line (demand misses only: prefetches "
                "and write-backs are not counted)",
            )
        )
    task_clock = _pick(counts, "task_clock")
    if task_clock is not None and wall_ns:
        ratio("CPUs utilized", task_clock, ("wall time", wall_ns))
    return out


def cache_line_size(root: str = "/sys/devices/system/cpu/cpu0/cache") -> tuple[int, str]:
    """(bytes, where it came from): the last-level cache's coherency line size, else 64."""
    from pathlib import Path

    best: tuple[int, int] | None = None
    for index in sorted(Path(root).glob("index*")):
        try:
            level = int((index / "level").read_text())
            size = int((index / "coherency_line_size").read_text())
        except (OSError, ValueError):
            continue
        if best is None or level > best[0]:
            best = (level, size)
    if best is None:
        return LINE_SIZE_DEFAULT, "assumed 64 B (no cache description in sysfs)"
    return best[1], f"{root}/index*/coherency_line_size (L{best[0]})"
