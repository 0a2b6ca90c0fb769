"""Host steal and IRQ time: why task-clock can read more than the CPU time of the same threads.

task-clock advances with the scheduler's clock while a counted thread is on a CPU; the CPU time
the C library reports (sum_exec_runtime) leaves out the time the hypervisor gave that vCPU to
someone else (steal, with paravirtual steal accounting) and, with IRQ time accounting, interrupt
time. On a VM the two differ by up to the steal time of the window (seen here: 3.2 ms of excess
in a window with one 10 ms steal tick; on a contended CI runner task-clock read 1.17x the CPU
time of a 110 ms window). /proc/stat is the only place the kernel shows these, in USER_HZ ticks
summed over CPUs, so a window's share is known to one tick per CPU at each end.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

PROC_STAT = "/proc/stat"
SWITCH_SLACK_NS = 10_000
"""task-clock stops at perf's sched-out hook and restarts at its sched-in hook; the thread's CPU
clock also runs through the context switch between them. Measured here (yolov7-tiny, 2 threads,
OMP_WAIT_POLICY=PASSIVE: ~600 switches per forward): task-clock 2.0-4.0 ms below the threads' CPU
time per forward, 3.4-6.6 us per switch; with ACTIVE waiting (~12 switches) within 0.1 ms. The
band allows 10 us per switch."""
STEAL_COLUMN = 8
UNCHARGED_COLUMNS = (6, 7, 8)  # cpu user nice system idle iowait [irq softirq steal] guest ...
BUSY_COLUMNS = (1, 2, 3, 6, 7, 8)
"""Everything but idle and iowait (guest time is already inside user and nice)."""


def tick_ns() -> int:
    return 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def _all_cpus_ns(columns: tuple[int, ...], path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            fields = f.readline().split()
        if len(fields) <= max(columns) or fields[0] != "cpu":
            return None
        return sum(int(fields[k]) for k in columns) * tick_ns()
    except (OSError, ValueError):
        return None


def cpus_ns(columns: tuple[int, ...], cpus: set[int], path: str = PROC_STAT) -> int | None:
    """The columns' time summed over the cpuN lines of `cpus` only, in ns: what happened on the CPUs
    a run may use (its affinity), not on the whole host. None where the kernel does not say."""
    total, seen = 0, 0
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if not line.startswith("cpu") or line.startswith("cpu "):
                    continue
                fields = line.split()
                if not fields[0][3:].isdigit() or int(fields[0][3:]) not in cpus or len(fields) <= max(columns):
                    continue
                total += sum(int(fields[k]) for k in columns)
                seen += 1
    except (OSError, ValueError):
        return None
    return total * tick_ns() if seen else None


def uncharged_ns(path: str = PROC_STAT) -> int | None:
    """Steal + irq + softirq time of all CPUs since boot in ns; None where the kernel does not say."""
    return _all_cpus_ns(UNCHARGED_COLUMNS, path)


def busy_ns(path: str = PROC_STAT) -> int | None:
    """Busy time of all CPUs since boot in ns, whoever used it (steal included)."""
    return _all_cpus_ns(BUSY_COLUMNS, path)


def steal_ns(path: str = PROC_STAT) -> int | None:
    """Steal time of all CPUs since boot in ns: time the hypervisor ran something else on our vCPUs."""
    return _all_cpus_ns((STEAL_COLUMN,), path)


@dataclass(frozen=True)
class CpuTimeBand:
    """Where a task-clock total may fall given the CPU time and host steal/IRQ time of the same windows.

    lower: the CPU time less `rel` and SWITCH_SLACK_NS per context switch of the counted threads;
    upper: CPU time plus every CPU's steal and IRQ time plus one tick per CPU at each end of each
    window (the resolution of /proc/stat), plus `rel`.
    """

    cpu_ns: float
    uncharged_ns: float
    windows: int
    cpus: int
    rel: float = 0.03
    switches: float = 0.0

    @property
    def lower(self) -> float:
        return self.cpu_ns * (1 - self.rel) - self.switches * SWITCH_SLACK_NS

    @property
    def upper(self) -> float:
        resolution = 2 * self.windows * self.cpus * tick_ns()
        return (self.cpu_ns + self.uncharged_ns + resolution) * (1 + self.rel)

    def holds(self, counted: float) -> bool:
        return self.lower <= counted <= self.upper


def cpu_count() -> int:
    return os.cpu_count() or 1
