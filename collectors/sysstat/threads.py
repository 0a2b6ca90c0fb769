"""Per-thread CPU clocks and thread names, read without leaving the process."""

from __future__ import annotations

import time

_CPUCLOCK_PERTHREAD_SCHED = 4 | 2


def thread_clock_id(tid: int) -> int:
    """The CPU-time clock of any thread of this process: MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)."""
    return ((~tid) << 3) | _CPUCLOCK_PERTHREAD_SCHED


def thread_cpu_ns(tid: int) -> int | None:
    """CPU time (user + system) of a thread of this process; None once it has exited."""
    try:
        return time.clock_gettime_ns(thread_clock_id(tid))
    except OSError:
        return None


def thread_name(tid: int) -> str:
    try:
        with open(f"/proc/self/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""
