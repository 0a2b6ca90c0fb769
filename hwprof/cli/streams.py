"""Where a command writes: its report, tables and progress on standard output; `hwprof: error:` lines, warnings
and the "interrupted" line on standard error, so that `hwprof report RUN > report.txt` shows the error and
keeps the file clean. A reader that goes away (`hwprof report RUN | head -3`) ends the command quietly with
exit 0, as a command-line tool should (Python's "Note on SIGPIPE").

The library's functions (hwprof.api) print to the one console they are given, the command line's; they mark
each error, warning and interruption with the same opening markup (ERROR_MARKUP), which CommandConsole sends
to standard error: the library stays one console for its callers, and the command line splits it here.
"""

from __future__ import annotations

import os
import select
import sys
from typing import Any

from rich.console import Console

ERROR_MARKUP = ("[red]hwprof: error:[/]", "[red]interrupted[/]", "[yellow]warning:[/]")
"""How a line the library prints as an error, an interruption or a warning opens."""


class OutputClosed(BaseException):
    """Standard output's reader went away. A BaseException, as rich's own SystemExit for it: a library's
    `except Exception` (a report's rendering keeps the run when it fails) must not take it for a failure."""


class ErrorConsole(Console):
    """Standard error. Nobody is left to tell when it is closed: what it would print is dropped."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(stderr=True, **kwargs)

    def on_broken_pipe(self) -> None:
        self.quiet = True


class CommandConsole(Console):
    """Standard output, whose error, warning and interruption lines (ERROR_MARKUP) go to `errors`; a closed
    standard output raises OutputClosed (rich's default exits 1)."""

    def __init__(self, errors: Console, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.errors = errors

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if objects and isinstance(objects[0], str) and objects[0].startswith(ERROR_MARKUP):
            self.errors.print(*objects, **kwargs)
            return
        super().print(*objects, **kwargs)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise OutputClosed


def stdout_reader_gone() -> bool:
    """Standard output is a pipe or socket whose reader has closed it (poll says POLLERR), not some other
    pipe a command wrote to: only then is a BrokenPipeError the reader's leaving."""
    try:
        fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else 1
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False


def silence_stdout() -> None:
    """Point standard output at /dev/null: the interpreter's last flush of what is still buffered would fail
    again (and print "Exception ignored ... BrokenPipeError", exit 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def flush_stdout() -> bool:
    """Flush standard output; False (and it silenced) where its reader is gone. argparse's help and --version
    write into its buffer (argparse drops an OSError of its own write), and a closed pipe shows here first."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        return False
    except (OSError, ValueError):
        pass
    return True
