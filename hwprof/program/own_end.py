"""A program's own ends that skip Python's unwinding: `os._exit` and a fatal signal it sends itself (`os.kill`,
`os.killpg`, `signal.raise_signal` on its own process).

Python's unwinding (a return, sys.exit, an exception) brings the program's run back to the pass, which closes its
collectors and writes result.json. These ends do not: `os._exit` ends the process at once, and a signal the
program sends itself either ends it (SIGKILL, a default disposition) or reaches hwprof's own stop handler, which
would take it for a stop from outside. So, while the program runs, these functions are wrapped: the wrapper tells
the pass how the program is ending (`OwnEnd`), and the pass closes what it can and ends the worker itself, with
the program's end recorded; it never returns to the program. A signal the program handles itself (its own
handler, or SIG_IGN) and anything a forked child does are passed through unchanged.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

HARMLESS = {signal.SIGCHLD, signal.SIGCONT, signal.SIGURG, signal.SIGWINCH, signal.SIGSTOP, signal.SIGTSTP}
"""Signals whose default action does not end the process."""
HARMLESS |= {signal.SIGTTIN, signal.SIGTTOU}


@dataclass(frozen=True)
class OwnEnd:
    """How the program ended itself."""

    how: str
    """"os_exit" (os._exit) or "signal" (a fatal signal to itself)."""
    code: int | None = None
    """os._exit's status."""
    signal: str | None = None
    """The signal's name ("SIGTERM")."""

    def text(self) -> str:
        """ "called os._exit(0)", "sent itself SIGTERM"."""
        return f"called os._exit({self.code})" if self.how == "os_exit" else f"sent itself {self.signal}"


def real_exit() -> Callable[[int], NoReturn]:
    """os._exit as it was before any wrapper (the pass ends the worker with it)."""
    return _REAL.exit if _REAL is not None else os._exit


@dataclass(frozen=True)
class _Originals:
    """The functions the hooks wrap, as they were before the first wrapper (never a wrapper of its own)."""

    exit: Callable[[int], NoReturn]
    kill: Callable[[int, int], None]
    killpg: Callable[[int, int], None]
    raise_signal: Callable[[int], None]


_REAL: _Originals | None = None
"""The originals, from the first install of the hooks on."""


def _originals() -> _Originals:
    if _REAL is None:  # pragma: no cover  (a wrapper exists only once the hooks were installed)
        raise AssertionError("own_end's wrappers called before install")
    return _REAL


class OwnEndHooks:
    """The wrappers, installed while the program runs; `on_end` must not return (it ends the worker)."""

    def __init__(self, on_end: Callable[[OwnEnd], NoReturn], hwprof_handler: Callable[..., Any]) -> None:
        self.on_end = on_end
        self.hwprof_handler = hwprof_handler
        """The pass's own stop handler: a signal that reaches it would be taken for a stop from outside."""
        self.pid = os.getpid()
        self._ending = False

    def install(self) -> None:
        global _REAL
        self._ending = False
        if _REAL is None:  # the functions as they were before the first wrapper (never a wrapper of its own)
            _REAL = _Originals(os._exit, os.kill, os.killpg, signal.raise_signal)
        os._exit = self._exit  # type: ignore[assignment]
        os.kill = self._kill
        os.killpg = self._killpg
        signal.raise_signal = self._raise

    def close(self) -> None:
        real = _REAL
        if real is None:
            return
        os._exit = real.exit  # type: ignore[assignment]
        os.kill, os.killpg, signal.raise_signal = real.kill, real.killpg, real.raise_signal

    def _mine(self) -> bool:
        """In the worker itself (not a forked child), and not already ending."""
        return os.getpid() == self.pid and not self._ending

    def _end(self, end: OwnEnd) -> NoReturn:
        self._ending = True
        self.close()
        self.on_end(end)

    def _exit(self, code: int) -> NoReturn:
        if self._mine():
            self._end(OwnEnd("os_exit", code=code))
        _originals().exit(code)
        raise AssertionError("unreachable")  # pragma: no cover

    def _kill(self, pid: int, sig: int) -> None:
        if self._mine() and pid in (0, self.pid) and self.fatal(sig):
            self._end(OwnEnd("signal", signal=_name(sig)))
        _originals().kill(pid, sig)

    def _killpg(self, pgid: int, sig: int) -> None:
        if self._mine() and pgid in (0, os.getpgrp()) and self.fatal(sig):
            self._end(OwnEnd("signal", signal=_name(sig)))
        _originals().killpg(pgid, sig)

    def _raise(self, sig: int) -> None:
        if self._mine() and self.fatal(sig):
            self._end(OwnEnd("signal", signal=_name(sig)))
        _originals().raise_signal(sig)

    def fatal(self, sig: int) -> bool:
        """Whether the signal ends the process (its default action) or reaches hwprof's stop handler."""
        if sig == signal.SIGKILL:
            return True
        if sig == 0 or sig in HARMLESS:
            return False
        handler = signal.getsignal(sig)
        return handler == signal.SIG_DFL or handler == self.hwprof_handler


def _name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"
