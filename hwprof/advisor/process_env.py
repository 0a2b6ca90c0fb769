"""What an advise worker's own process shows of an environment change: which LD_PRELOAD libraries the dynamic
linker mapped (/proc/self/maps), the GLIBC_TUNABLES it started with, and its minor page faults.

A variant that needs a process of its own (an allocator, an OpenMP policy) is only a variant if its environment
reached that process and took: a preload the linker could not load is skipped with a message on stderr, and the
variant would then measure the baseline again. The row of such a candidate fails instead (advice_rows).
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

from hwprof.schema.advise_result import SideFigures

TUNABLES = "GLIBC_TUNABLES"
PRELOAD = "LD_PRELOAD"


def preload_entries(value: str) -> list[str]:
    """LD_PRELOAD's libraries: separated by spaces or colons (ld.so(8))."""
    return [p for p in value.replace(":", " ").split() if p]


def mapped_preloads(environ: dict[str, str] | None = None, maps: str | None = None) -> dict[str, bool]:
    """Each LD_PRELOAD entry of this process -> whether a file of that name is mapped in it."""
    env = os.environ if environ is None else environ
    text = Path("/proc/self/maps").read_text() if maps is None else maps
    paths = {line.split()[-1] for line in text.splitlines() if len(line.split()) >= 6}
    names = {Path(p).name for p in paths}

    def mapped(entry: str) -> bool:  # a symlink (libz.so.1 -> libz.so.1.2.13) is mapped as its target
        return Path(entry).name in names or os.path.realpath(entry) in paths

    return {p: mapped(p) for p in preload_entries(env.get(PRELOAD, ""))}


def minor_faults() -> int:
    """This process's minor page faults so far, all threads (getrusage)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def resident_bytes() -> int:
    """This process's resident memory now (/proc/self/statm: resident pages x the page size); 0 where unreadable."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def env_not_taken(wanted: dict[str, str], alone: SideFigures) -> str:
    """Why the variant's process (`alone`: its side, measured in a process of its own) did not run with `wanted`,
    the candidate's env, or "" when it did: each LD_PRELOAD library mapped in it, and GLIBC_TUNABLES as asked."""
    if PRELOAD in wanted:
        missing = [p for p in preload_entries(wanted[PRELOAD]) if not (alone.preloaded or {}).get(p)]
        if missing:
            return (
                f"{PRELOAD}={' '.join(missing)} was not loaded in the variant's process (not in /proc/self/maps); "
                "its figures would be the baseline's: check that the library exists and matches this Python's "
                "architecture"
            )
    if TUNABLES in wanted and alone.glibc_tunables != wanted[TUNABLES]:
        return f"the variant's process ran with {TUNABLES}={alone.glibc_tunables!r}, not {wanted[TUNABLES]!r}"
    return ""
