"""The `hwprof` command's entry point: stop signals are handled before anything heavy is imported.

`hwprof.cli.main` imports rich, the analysis and the renderers (about 0.3 s), and a command then imports
torch or perfetto. A Ctrl-C in that time printed a KeyboardInterrupt traceback and the process died of the
signal (exit -2); a SIGTERM killed it (-15). This module imports only `os`, `signal` and `sys` (loaded by the
interpreter already), installs a handler for SIGINT, SIGTERM and SIGHUP first, and only then imports the
command line:
- while it imports, a signal ends the process at once with one line and 128 + the signal (nothing was run);
- once the command is called, until it installs its own handling (hwprof.session.stopping.StopSignals, which
  replaces this handler and restores it when the command ends), a signal ends it the same way;
- after the command returned, a signal is ignored: its exit status stands.

What no Python code can cover is the interpreter's own start-up (before it runs this module: its `site`
import, some ms): a signal there ends the process as it ends any Python program.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []
_phase = "starting"
"""starting (importing: nothing run yet), running (hwprof.cli.main.main called), finished."""


class StartupInterrupted(KeyboardInterrupt):
    """A stop signal after the command was called but before it installed its own handling."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _line(signum: int, when: str = "") -> bytes:
    return f"interrupted ({signal.Signals(signum).name}){when}\n".encode()


def _handle(signum: int, _frame: FrameType | None) -> None:
    if _phase == "starting":
        # Nothing was run, nothing to finish: end here. Raising would reach the code being imported, which
        # may swallow it (a bare except) or print it as an "Exception ignored" traceback (a __del__ it cut).
        try:  # noqa: SIM105 (contextlib is an import this module does without)
            os.write(sys.stdout.fileno(), _line(signum, " while hwprof was starting: nothing was run"))
        except (OSError, ValueError, AttributeError):
            pass
        os._exit(128 + signum)
    _received.append(signum)
    if _phase == "running" and len(_received) == 1:  # once: a second signal must not cut the one line
        raise StartupInterrupted(signum)


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
        return run_command(argv)
    except KeyboardInterrupt as exc:  # before the command's own handling, or after it (then it is done)
        _phase = "finished"
        signum = getattr(exc, "signum", None) or (_received[0] if _received else signal.SIGINT)
        try:
            sys.stdout.write(_line(signum).decode())
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        return 128 + signum
    finally:
        _phase = "finished"
