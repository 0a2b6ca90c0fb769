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

import threading
from dataclasses import dataclass, field
from typing import Any

from hwprof.core.main_thread import MAIN, MainThread


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
    _saved_hook: Any = None

    def install(self) -> None:
        """In the main thread, before the program runs."""
        self._saved_hook = threading.excepthook
        threading.excepthook = self._excepthook
        self.main.install()

    def close(self) -> None:
        """The program is over: a stop still pending for the main thread is dropped."""
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
        self.main.raise_there(ending(exc))

    def _excepthook(self, args: threading.ExceptHookArgs) -> None:
        if isinstance(args.exc_value, self.ends):
            return
        self._saved_hook(args)
