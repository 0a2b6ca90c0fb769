"""The sampler thread: one Sample of the process and the CPUs every interval, stamped with CLOCK_MONOTONIC."""

from __future__ import annotations

import itertools
import resource
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from hwprof.collectors.sysstat.procfs import FreqSource, ProcReader
from hwprof.collectors.sysstat.threads import thread_cpu_ns, thread_name

from hwprof.perf.threadcpu import name_this_thread

SAMPLER_THREAD = "hwprof-sysstat"


@dataclass(frozen=True, slots=True)
class Sample:
    t_ns: int
    rss: int
    cpu_s: float
    """Process user + system seconds (getrusage)."""
    vcsw: int
    ivcsw: int
    threads: dict[int, int]
    """tid -> CPU ns."""
    freq_khz: dict[int, int]


def take_sample(proc: ProcReader, freq: FreqSource, tids: Sequence[int]) -> Sample:
    t = time.monotonic_ns()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    threads = {tid: ns for tid in tids if (ns := thread_cpu_ns(tid)) is not None}
    return Sample(
        t,
        proc.rss_bytes(),
        usage.ru_utime + usage.ru_stime,
        usage.ru_nvcsw,
        usage.ru_nivcsw,
        threads,
        freq.read_khz() if freq.fds else {},
    )


class SystemSampler:
    """Takes a Sample every interval on its own thread, from start() to stop() (both included).

    The thread list is re-read every `rescan_s` (a directory listing is the dearest read here);
    a thread's name is read when it is first seen, since it cannot be read once it has exited.
    """

    def __init__(self, interval_s: float, proc: ProcReader, freq: FreqSource, rescan_s: float = 0.1) -> None:
        self.interval_ns = int(interval_s * 1e9)
        self.rescan_every = max(1, round(rescan_s / interval_s))
        self.proc, self.freq = proc, freq
        self.samples: list[Sample] = []
        self.cost_ns: list[int] = []
        self.names: dict[int, str] = {}
        self.tids: list[int] = []
        self.overruns = 0
        self.tid: int | None = None
        self.error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=SAMPLER_THREAD, daemon=True)
        self._thread.start()

    def _rescan(self) -> None:
        self.tids = self.proc.tids()
        for tid in self.tids:
            if tid not in self.names:
                self.names[tid] = thread_name(tid)

    def _loop(self) -> None:
        self.tid = threading.get_native_id()
        name_this_thread(SAMPLER_THREAD)
        next_ns = time.monotonic_ns()
        try:
            for k in itertools.count():
                t0 = time.perf_counter_ns()
                if k % self.rescan_every == 0:
                    self._rescan()
                self.samples.append(take_sample(self.proc, self.freq, self.tids))
                self.cost_ns.append(time.perf_counter_ns() - t0)
                if self._stop.is_set():
                    return
                next_ns += self.interval_ns
                wait_ns = next_ns - time.monotonic_ns()
                if wait_ns < 0:
                    self.overruns += 1
                    next_ns, wait_ns = time.monotonic_ns(), 0
                self._stop.wait(wait_ns / 1e9)
        except (OSError, ValueError) as exc:
            self.error = f"sampler stopped: {exc}"

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
