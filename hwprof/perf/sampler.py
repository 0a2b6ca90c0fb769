"""A thread that reads counters every interval, for counter tracks over time.

Create it BEFORE the perf events are opened: a thread that already exists when an inherited
event is opened is not counted by it, so the sampler's own reads stay out of the counts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class IntervalSampler(Generic[T]):
    def __init__(self, interval_ms: float, name: str = "hwprof-sampler") -> None:
        if interval_ms <= 0:
            raise ValueError("the sampling interval must be positive")
        self.interval_ns = int(interval_ms * 1e6)
        self.samples: list[tuple[int, T]] = []
        self._read: Callable[[], T] | None = None
        self._go = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        assert self._thread.ident is not None
        self._clock = time.pthread_getcpuclockid(self._thread.ident)
        self._final_cpu_ns = 0

    def cpu_ns(self) -> int:
        """CPU time this thread has used (its own clock while it runs, then its final figure)."""
        try:
            return time.clock_gettime_ns(self._clock)
        except OSError:
            return self._final_cpu_ns

    def begin(self, read: Callable[[], T]) -> None:
        """Start sampling with `read` (or resume after pause())."""
        self._read = read
        self._go.set()

    def pause(self) -> None:
        """Stop sampling until begin() again; the thread stays (a new one would not be excluded
        from inherited counters opened before it)."""
        self._go.clear()

    def finish(self, timeout_s: float = 5.0) -> list[tuple[int, T]]:
        self._stop.set()
        self._go.set()
        self._thread.join(timeout_s)
        return self.samples

    def _run(self) -> None:
        try:
            self._sample()
        finally:
            self._final_cpu_ns = time.thread_time_ns()

    def _sample(self) -> None:
        self._go.wait()
        read = self._read
        if read is None:
            return
        deadline = time.monotonic_ns()
        try:
            while not self._stop.is_set():
                if not self._go.is_set():
                    self._go.wait()
                    read = self._read or read
                    deadline = time.monotonic_ns()
                    continue
                now = time.monotonic_ns()
                self.samples.append((now, read()))
                deadline += self.interval_ns
                if deadline < now:
                    deadline = now + self.interval_ns
                self._stop.wait((deadline - now) / 1e9)
            self.samples.append((time.monotonic_ns(), read()))
        except OSError:
            return  # the counters were closed under us: keep what was sampled
