"""CPU time of exactly the threads a perf event counts (inherited or not), read precisely.

An event opened with inherit=1 by a thread counts that thread and every thread created after it,
not the threads that already existed (samplers of other collectors, the perf sampler itself).
CLOCK_PROCESS_CPUTIME_ID is the wrong yardstick twice over: it includes those threads, and it
reads other running threads' CPU time as of their last scheduler tick (CONFIG_HZ=250 here: up to
4 ms stale per thread; seen 1.1 ms median, 2.1 ms max with two busy threads). Each thread's own
CPU clock (CLOCK_THREAD_CPUTIME_ID semantics via its tid) brings a running thread up to date.
"""

from __future__ import annotations

import os
import threading
import time

TASKS = "/proc/self/task"


def thread_clock_id(tid: int) -> int:
    """The clockid of a thread's CPU clock (the kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED))."""
    return ((~tid) << 3) | 6


def live_tids() -> set[int]:
    return {int(t) for t in os.listdir(TASKS)}


class CountedThreadsCpu:
    """Create it right before opening the events, on the thread that opens them; `inherit`: as they are
    opened (False: they count the opening thread alone, and so does this)."""

    def __init__(self, inherit: bool = True) -> None:
        self.opener = threading.get_native_id()
        self.not_counted = live_tids() - {self.opener}
        self.inherit = inherit
        self._exited_before = self._read()[1]
        """CPU time of the threads that had exited before the events were opened (never counted)."""
        self._exited = 0
        """The most CPU time seen of the counted threads that exited since (it only grows)."""

    def ns(self) -> int:
        """Summed CPU time of the threads the events count: the live ones, each read on its own clock, and those
        that exited since the events were opened (a pool's worker that ended: the inherited event keeps its
        count, so this must keep its time; a thread joined inside a layer left /proc/self/task before the layer's
        end marker on the 2-vCPU Xeon, and its time was missing: task-clock 3.2x the counted threads' CPU)."""
        if not self.inherit:
            return time.clock_gettime_ns(thread_clock_id(self.opener))
        counted, exited = self._read()
        self._exited = max(self._exited, exited - self._exited_before)
        return counted + self._exited

    def _read(self) -> tuple[int, int]:
        """One pass over the live threads' own clocks: the counted ones' sum, and the exited threads' time (the
        process's CPU time less every live thread's). The process clock has a running thread's time as of its last
        tick (up to 4 ms stale), so that the exited time errs low while threads run, never high; ns() keeps the
        most it saw. A thread that existed before the events and exited since would count too (hwprof starts none
        that exits during a pass)."""
        process = time.clock_gettime_ns(time.CLOCK_PROCESS_CPUTIME_ID)
        counted = live = 0
        for tid in live_tids():
            try:
                own = time.clock_gettime_ns(thread_clock_id(tid))
            except OSError:  # exited between the listing and the read: its time is in the process clock read again
                process = time.clock_gettime_ns(time.CLOCK_PROCESS_CPUTIME_ID)
                continue
            live += own
            if tid not in self.not_counted:
                counted += own
        return counted, max(process - live, 0)


def name_this_thread(name: str) -> None:
    """Set the calling OS thread's name (comm, 15 characters), seen in /proc, per-thread CPU tables and traces."""
    try:
        with open("/proc/thread-self/comm", "w") as f:
            f.write(name[:15])
    except OSError:
        pass
