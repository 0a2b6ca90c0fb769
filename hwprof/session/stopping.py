"""Stopping a collect or a sweep: SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGABRT, once or repeatedly, all end the
same way.

SIGTERM is what systemd, Slurm, Kubernetes and Ray send; SIGHUP is a closed terminal; SIGINT is Ctrl-C; SIGQUIT is
Ctrl-\\ (its default action killed a collect at once: exit -3, run.json left "running" under a dead lock, its
worker running on, the completed passes unreported); SIGABRT is what another process sends to abort this one. An
abort() in this process itself is not stopped by a handler: the C library raises SIGABRT again with the default
action when the handler returns. A child that aborts (a worker, a tool) is a failed pass, "killed by SIGABRT".
Before this, a SIGTERM killed collect at once (run.json stayed "running", the perf FIFOs stayed), and a
second Ctrl-C orphaned the worker and py-spy, which went on writing after run.json was final.

- First signal: forwarded to the running child (SIGTERM to a pass's worker, which stops at the end of its
  iteration and closes its collectors; the signal itself to a sweep's point, whose collect then does the
  same). The parent waits for it, records the pass as interrupted, finalises run.json and writes the
  report of what was kept. With no child running (set-up, between passes, the report) it raises
  `Interrupted` at once.
- Second signal: escalates. Every process below this one (workers, py-spy, perf, conversions, and what a
  worker left in its session) gets SIGKILL, and `Interrupted` is raised unless run.json is being written
  (`deferred`), so nothing is orphaned and nothing writes after run.json is final.
- The exit status is 128 + the first signal's number.

A signal handler's exception can land where Python only prints it: in a weakref callback or a `__del__`
(importlib's module-lock callback, during a command's lazy imports). Python then prints "Exception ignored
in ... Traceback" and carries on as if no signal had come. While installed, StopSignals takes such an
Interrupted from sys.unraisablehook silently and delivers it again (`_thread.interrupt_main`) at the main
thread's next step (a few ms later), where it raises normally.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

import psutil

from hwprof.session.child import session_members

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGABRT)
"""hwprof.cli.entry._SIGNALS too (handled there before this module's imports)."""
REDELIVER_S = 0.005
"""How soon a swallowed Interrupted is raised again (hwprof's own code resumes within microseconds)."""


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread by a stop signal; a KeyboardInterrupt so that every Ctrl-C path handles it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


class StopSignals:
    """The stop signals of one collect or sweep, and the children they are forwarded to."""

    def __init__(self, forward: signal.Signals | None = signal.SIGTERM, forward_twice: bool = False) -> None:
        self.forward = forward
        """What a running child gets on the first signal (None: the signal that was received)."""
        self.forward_twice = forward_twice
        """A sweep: the second signal is forwarded too (the point's collect escalates itself and still
        finalises its run.json); only a third kills everything below."""
        self.signum: int | None = None
        """The first stop signal received."""
        self.count = 0
        self.first_at: float | None = None
        """Monotonic s of the first signal."""
        self._children: list[int] = []
        """Process groups (= session ids: they run with start_new_session) of the running children."""
        self._targets: dict[int, Callable[[], int | None]] = {}
        self._deferred = 0
        self._pending = False
        self.ending = False
        """The command is done (set by uninstall(), and by a caller's `finally` before it calls uninstall()): a
        signal is noted (requested, exit_code), never raised. A caller sets it by an attribute store, which runs
        no signal handler, where a call's entry may: a stop that Python had swallowed, delivered again by this
        object's timer at uninstall()'s entry, raised past every handler as a traceback (`hwprof trace` signalled
        at 0.3 s, its trace written, on a fresh clone)."""
        self._previous: dict[int, object] = {}
        self._previous_hook: Callable[[sys.UnraisableHookArgs], object] | None = None
        self._redeliver = False
        """An Interrupted was swallowed where Python ignores exceptions: the next handler call raises it again."""
        self._again: threading.Timer | None = None
        """The delivery again of a swallowed Interrupted, until it fires or uninstall() cancels it."""

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def escalated(self) -> bool:
        return self.count >= 2

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum or signal.SIGINT)

    @property
    def name(self) -> str:
        return signal_name(self.signum) if self.signum else ""

    def install(self) -> StopSignals:
        """Handle the stop signals in this (main) thread; a no-op elsewhere (signals go to the main thread)."""
        self.ending = False
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
                    continue  # nohup: the user asked to outlive the terminal
                # SIGINT is handled even when it starts ignored (a job started with `&` by a non-interactive
                # shell, some CI runners): `kill -INT` would be lost and a run could not be stopped cleanly.
                self._previous[sig] = signal.signal(sig, self._handle)
            self._previous_hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        return self

    def uninstall(self) -> None:
        """Restore the previous handlers. A signal that lands while this runs is noted, never raised: this runs in
        the callers' `finally`, where an Interrupted escapes every handler (a SIGINT 0.35 s into `hwprof trace`,
        its trace written, printed a traceback from here)."""
        self.ending = True
        if self._again is not None:  # the command is done: a delivery after it would land in the interpreter's
            self._again.cancel()  # finalisation (a stopped `hwprof report` aborted there, exit -6)
            self._again = None
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)  # type: ignore[arg-type]
        self._previous.clear()
        if self._previous_hook is not None:
            sys.unraisablehook, self._previous_hook = self._previous_hook, None

    def _unraisable(self, unraisable: sys.UnraisableHookArgs) -> None:
        """An Interrupted raised where Python ignores exceptions: not printed, delivered again."""
        if isinstance(unraisable.exc_value, Interrupted) and self._previous:
            self._redeliver = True
            # From another thread, a moment later: interrupted here, the main thread would run the handler
            # inside this hook, which ignores its exception too.
            signum = signal.Signals(unraisable.exc_value.signum)
            self._again = threading.Timer(REDELIVER_S, self._deliver_again, (signum,))
            self._again.daemon = True
            self._again.start()
        elif self._previous_hook is not None:
            self._previous_hook(unraisable)

    def _deliver_again(self, signum: signal.Signals) -> None:
        """The swallowed Interrupted raised again in the main thread, while these handlers are installed."""
        if self._previous:  # uninstall() empties it
            _thread.interrupt_main(signum)

    def __enter__(self) -> StopSignals:
        return self.install()

    def __exit__(self, *_exc: object) -> None:
        self.uninstall()

    def note(self, signum: int) -> None:
        """Record a stop signal and act on it (the handler's work, without raising)."""
        self.count += 1
        if self.signum is None:
            self.signum, self.first_at = signum, time.monotonic()
        if self.count == 1 or (self.count == 2 and self.forward_twice):
            for pgid in self._children:
                self._forward(pgid, self.forward or signum)
        else:
            self.kill_everything()

    @property
    def killed(self) -> bool:
        """Whether everything below was killed (the second signal, or a sweep's third)."""
        return self.count >= (3 if self.forward_twice else 2)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self._redeliver:  # the signal noted already, whose Interrupted was swallowed
            self._redeliver = False
        else:
            self.note(signum)
        if self.ending:
            return
        if self.killed or not self._children:
            if self._deferred:
                self._pending = True  # raised when the section that must not be cut ends
            else:
                raise Interrupted(signum)

    def kill_everything(self) -> None:
        """SIGKILL every process below this one and every member of a running child's session."""
        me = psutil.Process()
        with contextlib.suppress(psutil.Error):
            for proc in me.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    proc.kill()
        for sid in self._children:
            for pid in session_members(sid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    @contextlib.contextmanager
    def child(self, pgid: int, target: Callable[[], int | None] = lambda: None) -> Iterator[None]:
        """While a child process group runs: the first signal is forwarded to it instead of raising.
        target: the one process of the group to signal, when known (a pass's worker under a launcher such
        as Scalene's, which would otherwise die of the signal and leave the worker to be killed)."""
        self._children.append(pgid)
        self._targets[pgid] = target
        try:
            if self.killed:
                self.kill_everything()
            elif self.requested:
                self._forward(pgid, self.forward or self.signum or signal.SIGTERM)
            yield
        finally:
            self._children.remove(pgid)
            del self._targets[pgid]

    def _forward(self, pgid: int, sig: int) -> None:
        pid = self._targets.get(pgid, lambda: None)()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if pid is not None:
                os.kill(pid, sig)
            else:
                os.killpg(pgid, sig)

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """Inside a deferred section, a part that a stop signal may cut (a tool's conversion of its output): a
        signal noted already and not raised is raised here, and one that comes in it raises at once."""
        saved, self._deferred = self._deferred, 0
        try:
            if self._pending:
                self._pending = False
                raise Interrupted(self.signum or signal.SIGINT)
            yield
        finally:
            self._deferred = saved

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """A section that must not be cut (run.json being written): signals are noted, raised after it."""
        self._deferred += 1
        try:
            yield
        finally:
            self._deferred -= 1
        if self._deferred == 0 and self._pending:
            self._pending = False
            raise Interrupted(self.signum or signal.SIGINT)
