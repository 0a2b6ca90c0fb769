"""How a pass's worker stops on a signal: at the end of the iteration in flight, where no span is open."""

from __future__ import annotations

import _thread
import signal
import threading
from types import FrameType

from hwprof.core.markers import MarkerBus

ITERATION_GRACE_S = 8.0
"""After a stop signal, how long the iteration in flight may run on before the pass is cut mid-iteration
(the parent gives the worker child.TERM_GRACE_S = 20 s in all, closing its collectors included)."""
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
"""hwprof.session.stopping.SIGNALS but SIGABRT: an abort() in the worker (a C++ library's) kills it whatever a handler
does, and is recorded as a failed pass ("killed by SIGABRT"), not a stop."""


class Interrupted(BaseException):
    """The pass's stop. A BaseException: a user's program (hwprof.program) that catches Exception in its loop
    must not swallow it."""


class StopAtIteration:
    """A stop signal ends the pass at the end of the iteration in flight, where no span is open, so that
    every collector closes on whole iterations and keeps them (a signal raised inside a layer left begins
    without ends: torch.profiler failed with "markers do not nest" and dropped its trace). Outside the
    iterations (model build, export), a second signal, or an iteration still running ITERATION_GRACE_S
    after the signal: the pass is cut at once, and the marker bus is halted first."""

    def __init__(self) -> None:
        self.signal: str = ""
        self.at_boundaries = False
        """True while iterations run: the stop waits for the end of the one in flight."""
        self.bus: MarkerBus | None = None
        self._grace: threading.Timer | None = None

    def install(self) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        first = not self.signal
        self.signal = self.signal or signal.Signals(signum).name
        if first and self.at_boundaries:
            # No SIGALRM (a profiler may own it): the timer calls this handler again in the main thread.
            self._grace = threading.Timer(ITERATION_GRACE_S, _thread.interrupt_main, (signum,))
            self._grace.daemon = True
            self._grace.start()
            return
        self.disarm()
        if self.bus is not None:
            self.bus.halted = True
        raise Interrupted(f"stopped by {self.signal} mid-iteration")

    def disarm(self) -> None:
        self.at_boundaries = False
        if self._grace is not None:
            self._grace.cancel()
            self._grace = None

    def check(self, done: int, total: int) -> None:
        """At an iteration boundary: stop here if a signal came."""
        if self.signal:
            self.disarm()
            raise Interrupted(f"stopped by {self.signal} after {done} of {total} iterations")


STOP = StopAtIteration()
