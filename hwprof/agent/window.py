"""One pass of `hwprof attach`, inside the running service: a window of its own calls of its model.

The same pass as a program's (hwprof.session.program_moments: the model found at its calls, model.json, the
collectors prepared, started and stopped around the measured calls, result.json written), with what a service
needs instead of a program run to its end:

- nothing of the process is changed but the model's calls: no signal handler, no thread count, no stdout; the
  progress lines go to the attaching hwprof (hwprof.agent.channel), not to the service's stdout;
- while the window is open, the model's calls are let through one at a time (WindowDriver.lock): a layer's
  markers are those of the one call in flight, and hooks are put on and taken off only where no call of the
  model runs (in the call about to run, before its forward, or from the agent's thread while no call is in flight);
- hwprof's own failure inside a call (an exception of a collector, a full disk) never reaches the service: the
  window ends and the call is served as if hwprof were not there; the service's own exception is its own and is
  raised unchanged (the window ends with it in one line);
- the window ends when its schedule is done, at --seconds, when hwprof asks (a stop), or when hwprof's end of the
  connection closes (hwprof killed): every hook is off within a call of the model, or at once where none is in
  flight.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwprof.program.driver import ProgramDriver
from hwprof.program.finder import ModelFinder, ProgramAbort
from hwprof.program.launch import ProgramEnd
from hwprof.program.other_models import OtherModels
from hwprof.program.thread_stop import MainThreadStop
from hwprof.schema.program import ProgramOutcome
from hwprof.session.program_moments import ProgramMoments
from hwprof.session.program_record import program_outcome
from hwprof.session.worker_io import progress
from hwprof.session.worker_stop import Interrupted

POLL_S = 0.05
"""How often the agent's thread looks at the window's end (a stop, a closed connection, --seconds)."""
END_WAIT_S = 10.0
"""A pinned window ended from outside waits this long for its thread's next call to stop its collectors there."""
STALLED_S = 10.0
STALLED_CALLS = 5
"""A pinned window whose thread has not called the model for STALLED_S while other threads called it this often
ends: the service calls its model from a new thread per request."""
FIND_TIMEOUT_S = 120.0
"""A window whose model is not called twice in this long ends: the service is idle (no traffic to measure)."""


@dataclass
class WindowEnd:
    """Why the window must end before its schedule is done (set from any thread; the agent's thread acts)."""

    stop: str = ""
    """hwprof asked (its stop signal, in words), or its connection closed."""
    event: threading.Event = field(default_factory=threading.Event)

    def request(self, why: str) -> None:
        self.stop = self.stop or why
        self.event.set()


class WindowFinder(ModelFinder):
    """The program's finder, whose refusals (an ambiguous model, --program-model's name giving several modules) end
    the window instead of being raised into the service's call."""

    refused: str = ""

    def _pre(self, module: Any, args: tuple[Any, ...]) -> None:
        if self.refused:
            return
        try:
            super()._pre(module, args)
        except ProgramAbort as exc:
            self.refused = str(exc)
            self.close()


@dataclass
class WindowDriver(ProgramDriver):
    """The program's driver, whose calls go one at a time through `lock` while the window is open, and whose own
    failures are never the service's."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    end_asked: bool = False
    """A pinned window's end was asked from another thread: the window's thread's next call ends it there."""
    failure: str = ""
    """Why the window ended inside a call (hwprof's failure, or the service's exception), in one line."""
    _served: list[Any] = field(default_factory=list)
    """The call in flight's output once its forward returned (hwprof failing after it still returns it)."""
    _service_error: BaseException | None = None

    def _call(self, forward: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.done or self.bus.halted or self._internal:
            return forward(*args, **kwargs)
        with self.lock:
            if self.done or self.bus.halted:
                return forward(*args, **kwargs)
            here = threading.get_ident()
            if not self.any_thread and self._thread is None:
                self._thread = self.bus.owner = here  # pinned: this thread's calls are the window's
            if self.end_asked and (self.any_thread or here == self._thread):
                self.finish(unwrap=True)  # on the thread that started its thread-bound collectors
                return forward(*args, **kwargs)
            self._served, self._service_error = [], None
            try:
                return self._program_call(forward, args, kwargs)
            except BaseException as exc:
                self.bus.halted = True  # no marker more: the window ends here
                if exc is self._service_error:
                    self.failure = f"the service's call of its model raised {type(exc).__name__}: {exc}"
                    raise
                self.failure = f"hwprof failed inside the service's call: {type(exc).__name__}: {exc}"
                if self._served:
                    return self._served[0]
                return forward(*args, **kwargs)

    def model_forward(self, forward: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            out = forward(*args, **kwargs)
        except BaseException as exc:
            self._service_error = exc
            raise
        self._served.append(out)
        if self.sync is not None:
            self.sync()
        return out


class WindowRunner(ProgramMoments):
    """A pass over a window of the service's calls (see the module's docstring)."""

    def __init__(self, run_dir: Path, pass_name: str, names: list[str], end: WindowEnd, seconds: float | None) -> None:
        super().__init__(run_dir, pass_name, names)
        assert self.config.program is not None
        self.spec = self.config.program
        self.window_end = end
        self.seconds = seconds
        """--seconds: the measured calls end this long after the first (the schedule's count is its most)."""
        self.finder: ModelFinder | None = None
        self.pinned: list[str] = []
        """The pass's thread-bound collectors (Collector.thread_bound): the window marks one thread's calls."""
        self.end: ProgramEnd | None = None
        self.no_model: str | None = None
        self.whole_process = False
        self.main_stop = MainThreadStop(ends=())
        self.others = OtherModels()
        """Unused in a window (a program's: hwprof.session.program_record reads them)."""

    def _build(self) -> str:
        progress(phase="build", done=0, total=1)
        pinned = [c.name for c in self.collectors if c.thread_bound and self._ok(c)]
        self.driver = WindowDriver(
            self.bus, self, max(1, self.config.warmup), end="detach", per_call=True, any_thread=not pinned
        )
        self.pinned = pinned
        self.finder = WindowFinder(on_found=self.driver.adopt, model_path=self.spec.model_path)
        return "torch"

    @property
    def window(self) -> WindowDriver:
        """The driver as the window's (its lock, its failure, its end asked), from _build on."""
        assert isinstance(self.driver, WindowDriver)
        return self.driver

    @property
    def window_finder(self) -> WindowFinder:
        """The finder as the window's (its refusal), from _build on."""
        assert isinstance(self.finder, WindowFinder)
        return self.finder

    def _measure(self, runtime_name: str) -> None:
        self.window_finder.install()
        try:
            why = self._wait()
        finally:
            self._close_window()
        self._after_window(why)

    def _wait(self) -> str:
        """Until the window's schedule is done or something ends it first: what ended it ("" for its schedule)."""
        driver, finder, started = self.window, self.window_finder, time.monotonic()
        measuring_since: float | None = None
        marked, marked_at = 0, started
        while not driver.done:
            if self.window_end.event.wait(POLL_S):
                return self.window_end.stop
            if finder.refused or driver.failure:
                return ""
            now = time.monotonic()
            if driver.found is None and now - started > FIND_TIMEOUT_S:
                return f"the service called no model twice in {FIND_TIMEOUT_S:.0f} s (is it serving requests?)"
            if driver.calls.total != marked:
                marked, marked_at = driver.calls.total, now
            others = sum(driver.calls.other_threads.values())
            if self.pinned and others >= STALLED_CALLS and now - marked_at > STALLED_S:
                return self._other_threads(others)
            if measuring_since is None and driver.calls.measured + driver.calls.clean:
                measuring_since = now
            if self.seconds is not None and measuring_since is not None and now - measuring_since >= self.seconds:
                return "seconds"
        return ""

    def _other_threads(self, others: int) -> str:
        threads = len(self.driver.calls.other_threads) if self.driver is not None else 0
        return (
            f"the service called its model from {threads} other threads ({others} calls) and not again from the "
            f"window's: {', '.join(self.pinned)} measure the thread that starts them, so this window needs a "
            "service whose model runs on one thread (a model worker thread, or its event loop)"
        )

    def _close_window(self) -> None:
        """Every hook off, where no call of the model is in flight (under the driver's lock). A pinned window whose
        thread-bound collectors started is ended on its own thread, at that thread's next call (END_WAIT_S)."""
        driver = self.window
        with driver.lock:
            self.window_finder.close()
            on_its_thread = driver.any_thread or driver.done or driver.calls.total <= driver.warmup
            if on_its_thread:
                driver.finish(unwrap=True)
            else:
                driver.end_asked = True
        waited = time.monotonic() + END_WAIT_S
        while not driver.done and time.monotonic() < waited:
            time.sleep(POLL_S)
        if not driver.done:
            self.notes.append(
                f"the window's thread made no call of the model in {END_WAIT_S:.0f} s after its end: "
                f"{', '.join(self.pinned)} stop there at its next call"
            )
        with driver.lock:
            if self._remove_hooks is not None:
                self._remove_hooks()
                self._remove_hooks = None
            if self._layers is not None:
                self._layers.remove()
                self._layers = None

    def _after_window(self, why: str) -> None:
        """What the window's end means for the pass: its refusal or failure in one line, a stop, too few calls."""
        driver = self.window
        if self.window_finder.refused:
            raise WindowFailed(self.window_finder.refused)
        if driver.failure:
            raise WindowFailed(driver.failure)
        if why and why != "seconds" and driver.found is None:
            raise WindowFailed(why)
        if why and why != "seconds":
            raise Interrupted(f"{why} after {driver.calls.measured} measured calls")
        if driver.found is not None and driver.calls.total:
            with driver.internal():
                self._each("after_workload", self.ctx)
        planned = sum(1 for measured, _ in driver.steps if measured)
        if why == "seconds":
            self.notes.append(
                f"--seconds {self.seconds:g} ended the window after {driver.calls.measured} measured calls"
            )
        elif driver.calls.measured < planned:
            self.notes.append(f"{driver.calls.measured} measured calls of the {planned} planned")

    def _measured_iterations(self) -> int:
        """The window's calls: --calls (or --seconds' bound), never more: a collector's wish (perf's sampling plan)
        would be paid at the service's own rate of traffic. A larger wish is said in the pass's notes."""
        wished = super()._measured_iterations()
        if wished > self.config.iters:
            self.notes.append(
                f"this pass's collectors asked for {wished} measured calls; the window measured --calls "
                f"{self.config.iters} (give --calls {wished} for their full plan)"
            )
        return min(wished, self.config.iters)

    def _program_outcome(self, status: str, error: str) -> ProgramOutcome:
        self.end = self.end or ProgramEnd("served")
        return program_outcome(self, status)

    def _ignore_stop_signals(self) -> None:
        """The service's signals are its own: nothing is changed."""

    def _closing_gc(self) -> AbstractContextManager[None]:
        """The service's GC is its own: left on while the collectors close in its process. Held off, the service
        served the next seconds 35% slower in 1 of 3 attaches (test_attach: its model's median 7.9 -> 10.8 ms
        after the attach; 1.0x in 4 of 4 with it left on), the heap grown by what the close did not collect."""
        return nullcontext()

    def _is_user_error(self, exc: BaseException) -> bool:
        return isinstance(exc, WindowFailed) or super()._is_user_error(exc)


class WindowFailed(Exception):
    """The window measured nothing it can keep; the message is one line."""
