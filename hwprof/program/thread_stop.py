"""Ending a program whose model runs in a thread other than its main one (a capture/inference split, a worker
thread), as it ends when the model runs in the main thread.

hwprof ends a program by raising from the model's call (ProgramStop after the measured calls, the pass's stop
Interrupted, a ProgramAbort): in the main thread that unwinds the program. Raised in a worker thread it ended
that thread alone (threading printed "Exception in thread ...") and the main thread carried on, unmeasured, with
the pass's figures already closed. So the same exception is raised in the main thread too, through
hwprof.core.main_thread (a signal to the main thread alone, which also wakes it where it waits in `join()` or a
queue's `get()`). The worker thread's own traceback is not printed: it is hwprof's stop, not the program's
failure.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from hwprof.core.main_thread import MAIN, MainThread

UNWIND_WAIT_S = 5.0
"""How long the end waits for a stopped thread to unwind (one that catches hwprof's stop and goes on is left)."""


def ending(exc: BaseException) -> type[BaseException]:
    """`exc`'s class, fixed to `exc`'s message: raised anew in the main thread, it says the same line."""
    args = exc.args
    return type(type(exc).__name__, (type(exc),), {"__init__": lambda self: BaseException.__init__(self, *args)})


@dataclass
class MainThreadStop:
    """Raises hwprof's ends in the main thread when they come from another; hides their tracebacks there."""

    ends: tuple[type[BaseException], ...]
    """The exceptions that end the program (hwprof's own): not the program's failures."""
    main: MainThread = field(default_factory=lambda: MAIN)
    stopped_threads: list[str] = field(default_factory=list)
    """Threads other than the main one that hwprof's end unwound (their names)."""
    _stopped: list[threading.Thread] = field(default_factory=list)
    _hooked: set[int] = field(default_factory=set)
    _saved_hook: Any = None

    def install(self) -> None:
        """In the main thread, before the program runs."""
        self._saved_hook = threading.excepthook
        threading.excepthook = self._excepthook
        self.main.install()

    def close(self) -> None:
        """The program is over: a stop still pending for the main thread is dropped. The threads hwprof stopped are
        waited for (UNWIND_WAIT_S at most) before the program's excepthook is back: the main thread may get there
        first, and their end would then print its traceback."""
        deadline = time.monotonic() + UNWIND_WAIT_S
        while any(self._unwinding(thread) for thread in self._stopped) and time.monotonic() < deadline:
            time.sleep(0.005)
        self._stopped.clear()
        self._hooked.clear()
        if self._saved_hook is not None:
            threading.excepthook = self._saved_hook
            self._saved_hook = None
        self.main.close()

    def end_elsewhere(self, exc: BaseException) -> None:
        """`exc`, hwprof's end of the program, is being raised in this thread: raise it in the main thread too,
        unless this is the main thread."""
        if self.main.here() or not self.main.installed:
            return
        self.stopped_threads.append(threading.current_thread().name)
        self._stopped.append(threading.current_thread())
        self.main.raise_there(ending(exc))

    def _unwinding(self, thread: threading.Thread) -> bool:
        """Not `thread.is_alive()`: a join() in the main thread that hwprof's stop interrupted marks the thread it
        waited for as stopped while it runs (CPython's bpo-45274 handling, 3.11)."""
        return thread.ident not in self._hooked and thread.ident in sys._current_frames()

    def _excepthook(self, args: threading.ExceptHookArgs) -> None:
        if isinstance(args.exc_value, self.ends):
            if args.thread is not None and args.thread.ident is not None:
                self._hooked.add(args.thread.ident)
            return
        self._saved_hook(args)
