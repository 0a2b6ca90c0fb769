"""The `hwprof` command's entry point: stop signals are handled before anything heavy is imported.

`hwprof.cli.main` imports rich, the analysis and the renderers (about 0.3 s), and a command then imports
torch or perfetto. A Ctrl-C in that time printed a KeyboardInterrupt traceback and the process died of the
signal (exit -2); a SIGTERM killed it (-15). This module imports only `os`, `signal` and `sys` (loaded by the
interpreter already), installs a handler for the stop signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGABRT:
hwprof.session.stopping.SIGNALS) first, and only then imports the command line:
- while it imports, a signal ends the process at once with one line (on stderr, as every command's
  "interrupted") and 128 + the signal (nothing was run);
- once the command is called, until it installs its own handling (hwprof.session.stopping.StopSignals, which
  replaces this handler), and from its end (StopSignals restores this handler) until it returns, the same;
- after the command returned, a signal is ignored (SIG_IGN, which the interpreter's finalisation keeps): its
  exit status stands;
- a command that a stop signal ended (its status 128 + the signal: everything it kept is written by then) exits
  without the interpreter's finalisation: nothing the stop left running (a thread, a C extension's object cut
  mid-call) can act there. A stopped `hwprof report` aborted in it ("Fatal Python error: ... the current Python
  thread state is NULL", exit -6, a fresh clone's tests/test_early_signals.py): the stop handling's own delivery
  again of a swallowed interrupt, a timer thread, fired there (hwprof.session.stopping now cancels it).

SIGQUIT (Ctrl-\\, or a scheduler's "quit") and a SIGABRT sent by another process stop hwprof as SIGTERM does; their
default action killed a collect at once (exit -3, run.json left "running", its worker running on). An abort()
inside hwprof's own process (a C++ library's) still ends it: the C library restores the default action and
raises SIGABRT again when the handler returns, and a Python handler only runs later, between bytecodes.

What no Python code can cover is the interpreter's own start-up (before it runs this module: its `site`
import, some ms): a signal there ends the process as it ends any Python program.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGABRT)
"""hwprof.session.stopping.SIGNALS (that module's imports are what this one must come before)."""
_STOPPED = frozenset(128 + int(sig) for sig in _SIGNALS)
"""The exit statuses of a command a stop signal ended."""
_phase = "starting"
"""starting (importing: nothing run yet), running (hwprof.cli.main.main called), finished (it returned)."""


def _handle(signum: int, _frame: FrameType | None) -> None:
    """End the process here, with one line. Raising instead would reach the code being imported or run, which
    may swallow it (a bare except) or print it as an "Exception ignored ... Traceback" (importlib's module-lock
    callback, a __del__) and carry on. Nothing needs finishing: before the command installs its own handling
    nothing was started, and after it uninstalled it everything was finished."""
    if _phase == "finished":
        return  # the command's exit status stands
    when = " while hwprof was starting: nothing was run" if _phase == "starting" else ""
    _flush(sys.stdout)  # what the command printed (its own handling is gone once it is done)
    try:  # noqa: SIM105 (contextlib is an import this module does without)
        os.write(sys.stderr.fileno(), f"interrupted ({signal.Signals(signum).name}){when}\n".encode())
    except (OSError, ValueError, AttributeError):
        pass
    os._exit(128 + signum)


def install() -> None:
    """Handle the stop signals from now on (SIGHUP left ignored under nohup)."""
    for sig in _SIGNALS:
        if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
            continue
        signal.signal(sig, _handle)


def main(argv: list[str] | None = None) -> int:
    """The console script (`hwprof`) and `python -m hwprof`: the command's exit status. For this process's
    command only: the handlers stay installed (ignoring late signals) until it exits."""
    global _phase
    install()
    from hwprof.cli.main import main as run_command

    _phase = "running"
    try:
        code = run_command(argv)
    finally:
        _phase = "finished"
        # Ignored from here to the exit: the interpreter's finalisation resets a Python handler to the default
        # action (a SIGTERM there killed the finished command, exit -15), but leaves SIG_IGN.
        for sig in _SIGNALS:
            if signal.getsignal(sig) is _handle:
                signal.signal(sig, signal.SIG_IGN)
    if code in _STOPPED:
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    """The stopped command's status, its output flushed, without the interpreter's finalisation."""
    _flush(sys.stdout, sys.stderr)
    os._exit(code)


def _flush(*streams: object) -> None:
    """Flush what can be: a stream closed, gone, or being flushed already (a signal inside its flush) is left."""
    for stream in streams:
        try:  # noqa: SIM105
            stream.flush()  # type: ignore[attr-defined]
        except (OSError, ValueError, RuntimeError, AttributeError):
            pass
