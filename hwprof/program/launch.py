"""Run the user's program in this process as `python SCRIPT ARGS` / `python -m MODULE ARGS` would, and say how
it ended.

As the interpreter would: sys.argv is the program's, sys.path[0] is the script's folder (the working directory
for -m), and it runs in the directory hwprof was run from. Its stdin is --program-stdin's file, opened anew by each
pass, or /dev/null: every pass runs the program anew, so hwprof's own stdin (a stream) could feed the first pass
only; a program that reads stdin without the option reads end of file, and the run says so. Its stdout goes to
the pass's log with its stderr, so that hwprof's own progress lines stay apart.
"""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import sys
import threading
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hwprof.core.program_spec import ProgramSpec
from hwprof.program.driver import ProgramStop


@dataclass
class ProgramEnd:
    """How the program's run ended."""

    how: str
    """"stopped" (after the measured calls), "returned" (ran to its end), "exit" (sys.exit), "failed"; "os_exit"
    and "signal" (a fatal signal to itself): its own ends that skip Python's unwinding (hwprof.program.own_end);
    "served" (an attached service, hwprof.agent: it serves on after the window), "sampled" (a service sampled from
    outside, hwprof.agent.outside)."""
    exit_code: int | None = None
    error: str | None = None
    """The program's exception in one line (its traceback is printed to the pass's log); for its own end, how
    ("called os._exit(0)", "sent itself SIGTERM")."""
    stdin_eof: bool = False
    """It read end of file on stdin (hwprof gives it /dev/null): said where its failure or silence follows, and in
    the pass's notes where it ran well (hwprof.session.program_record); never where --program-stdin gave a file."""

    @property
    def ok(self) -> bool:
        if self.how in ("stopped", "returned", "served", "sampled"):
            return True
        return self.how in ("exit", "os_exit") and not self.exit_code


STDIN_EOF = (
    "hwprof gives a program /dev/null as stdin, since every pass runs it anew: give its input with "
    "--program-stdin FILE (read anew by every pass) or as a file argument"
)


class _Stdin(io.TextIOWrapper):
    """The program's sys.stdin (/dev/null): notes that the program read end of file from it."""

    eof = False

    def read(self, size: int | None = -1) -> str:
        return self._seen(super().read(size))

    def readline(self, size: int = -1) -> str:  # type: ignore[override]
        return self._seen(super().readline(size))

    def readlines(self, hint: int = -1) -> list[str]:  # type: ignore[override]
        lines = super().readlines(hint)
        _Stdin.eof = _Stdin.eof or not lines
        return lines

    def __next__(self) -> str:  # type: ignore[override]
        try:
            return super().__next__()
        except StopIteration:
            _Stdin.eof = True
            raise

    def _seen(self, text: str) -> str:
        _Stdin.eof = _Stdin.eof or not text
        return text


def stdin_eof_read() -> bool:
    """Whether the program has read end of file on its stdin so far."""
    return _Stdin.eof


def run_program(spec: ProgramSpec) -> ProgramEnd:
    """Run the program to its end (or its ProgramStop). The pass's stop (Interrupted) and hwprof's own
    aborts (ProgramAbort: an ambiguous model, a model on another device) propagate, being BaseExceptions; anything
    else the program raises is its failure."""
    with _as_interpreter(spec):
        end = _run(spec)
    end.stdin_eof = _Stdin.eof
    return end


def _run(spec: ProgramSpec) -> ProgramEnd:
    before = set(threading.enumerate())
    try:
        try:
            if spec.module is not None:
                runpy.run_module(spec.module, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(spec.argv[0], run_name="__main__")
        except ProgramStop:
            raise
        except BaseException:
            _join_threads(before)
            raise
        _join_threads(before)
    except ProgramStop:
        return ProgramEnd("stopped")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) or exc.code is None else 1
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
        return ProgramEnd("exit", exit_code=code or 0)
    except Exception as exc:
        print("the program raised:", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        return ProgramEnd("failed", error=f"{type(exc).__name__}: {exc}")
    return ProgramEnd("returned")


def _join_threads(before: set[threading.Thread]) -> None:
    """Wait for the threads the program started and left running (not daemons), as the interpreter does before it
    exits: the program has ended when they have (its model may be called from one of them)."""
    for thread in threading.enumerate():
        if thread not in before and not thread.daemon and thread is not threading.current_thread():
            thread.join()


@contextlib.contextmanager
def _as_interpreter(spec: ProgramSpec) -> Iterator[None]:
    saved_argv, saved_path, saved_cwd = list(sys.argv), list(sys.path), os.getcwd()
    saved_stdout, saved_stdin = sys.stdout, sys.stdin
    os.chdir(spec.cwd)
    sys.argv = list(spec.argv[1:]) if spec.module is not None else list(spec.argv)
    first = spec.cwd if spec.module is not None else str(Path(spec.argv[0]).parent)
    sys.path.insert(0, first)
    # --program-stdin's file, read from its start by each pass (its end is the input's: not noted), or /dev/null
    raw = open(spec.stdin if spec.stdin is not None else os.devnull, "rb")  # noqa: SIM115 - closed below
    stdin = _Stdin(raw) if spec.stdin is None else io.TextIOWrapper(raw)
    _Stdin.eof = False
    os.dup2(stdin.fileno(), 0)
    sys.stdin = stdin
    sys.stdout = sys.stderr  # the worker's stdout carries its progress lines to hwprof
    try:
        yield
    finally:
        sys.stdout, sys.stdin = saved_stdout, saved_stdin
        stdin.close()
        sys.argv, sys.path[:] = saved_argv, saved_path
        with contextlib.suppress(OSError):
            os.chdir(saved_cwd)
