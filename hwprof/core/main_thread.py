"""Running something in the main thread from another: what only the main thread may do (set a signal handler:
Scalene's start and stop), and hwprof's end of a program raised there.

A user's program may call its model from a worker thread, so the pass's moments (a collector's start, hwprof's
stop after the measured calls) happen in that thread. A signal sent to the main thread alone (`pthread_kill`) runs
a handler there between two bytecodes, and wakes it where it waits (`join()`, a queue's `get()`, `sleep`): the
handler runs the calls queued for it, then raises the exception queued for it, if any.

A signal that arrives after the main thread released the GIL and before it blocks in the wait's syscall is lost for
that wait (the interpreter sees it only at its next bytecode, and the wait has none): the signal is sent again every
RESEND_S until its work is done.
"""

from __future__ import annotations

import ctypes
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

WAKE_SIGNAL = signal.SIGUSR2
"""A signal no profiler here uses (Scalene takes SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGILL and SIGBUS); not a
real-time one: Scalene's wrapper of signal.signal raises ValueError for any signal outside signal.Signals. Where the
program sets a handler of its own for it, an exception reaches the main thread as an asynchronous exception
(raised at its next bytecode: it does not wake a wait), and a call waits for CALL_WAIT_S, then fails."""
CALL_WAIT_S = 10.0
RESEND_S = 0.05


class MainThreadBusy(RuntimeError):
    """The main thread did not run the call in time (busy in native code, or its wake signal taken)."""


@dataclass
class _Call:
    run: Callable[[], Any]
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None


@dataclass
class MainThread:
    """The wake signal's handler, while installed (by the main thread, around the program's run)."""

    _calls: list[_Call] = field(default_factory=list)
    _raise: type[BaseException] | None = None
    _raised: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _send_lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while the signal is sent and while its handler is put back: never sent once the handler is gone."""
    _ident: int = 0
    _saved: Any = None
    installed: bool = False

    def install(self) -> None:
        self._ident = threading.main_thread().ident or 0
        self._saved = signal.getsignal(WAKE_SIGNAL)
        signal.signal(WAKE_SIGNAL, self._wake)
        self.installed = True

    def close(self) -> None:
        """Nothing more is run or raised there: a pending exception is dropped."""
        if self._raise is not None and self.installed:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._ident), None)
        self._raise = None
        with self._send_lock:
            if self.installed:
                self.installed = False
                signal.signal(WAKE_SIGNAL, self._saved if self._saved is not None else signal.SIG_DFL)

    @staticmethod
    def here() -> bool:
        return threading.current_thread() is threading.main_thread()

    def call(self, run: Callable[[], Any]) -> Any:
        """`run()` in the main thread (at once where this is it, or nothing is installed); its result or its
        exception. MainThreadBusy where it did not run within CALL_WAIT_S."""
        if self.here() or not self.installed:
            return run()
        call = _Call(run)
        with self._lock:
            self._calls.append(call)
        if not self._wake_until(call.done):
            with self._lock:
                if call in self._calls:
                    self._calls.remove(call)
            raise MainThreadBusy(f"the main thread did not run it within {CALL_WAIT_S:g} s")
        if call.error is not None:
            raise call.error
        return call.result

    def raise_there(self, exc: type[BaseException]) -> bool:
        """Raise `exc` (a class) in the main thread, once; False where one is already on its way."""
        if self._raise is not None or not self.installed:
            return False
        self._raise = exc
        self._raised.clear()
        if not self._wake_main():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._ident), ctypes.py_object(exc))
        elif not self.here():  # the raising thread goes on to its end: the resends are another thread's
            threading.Thread(target=self._wake_until, args=(self._raised,), name="hwprof-wake", daemon=True).start()
        return True

    def _wake_until(self, done: threading.Event) -> bool:
        """The wake signal, sent again every RESEND_S until `done` is set (True) or CALL_WAIT_S passed (False)."""
        deadline = time.monotonic() + CALL_WAIT_S
        while not done.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or not self.installed:
                return done.is_set()
            self._wake_main()
            done.wait(min(RESEND_S, left))
        return True

    def _wake_main(self) -> bool:
        """The wake signal to the main thread; False where the program took the signal for itself."""
        with self._send_lock:
            if not self.installed or signal.getsignal(WAKE_SIGNAL) != self._wake:
                return False
            signal.pthread_kill(self._ident, WAKE_SIGNAL)
        return True

    def _wake(self, _signum: int, _frame: FrameType | None) -> None:
        with self._lock:
            calls, self._calls = self._calls, []
        for call in calls:
            try:
                call.result = call.run()
            except BaseException as exc:  # given back to the caller's thread
                call.error = exc
            call.done.set()
        pending, self._raise = self._raise, None
        if pending is not None:
            self._raised.set()
            raise pending()


MAIN = MainThread()
"""The process's one handler of the wake signal."""
