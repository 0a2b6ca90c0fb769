"""A user's program that fails in one of advise's runs of it: its own error, never a guess at what hwprof saw.

The program worker (hwprof.advisor.program_worker) runs the program unmodified; where the program raises or exits
non-zero before advise's schedule is done, what it says is its exception line (hwprof.program.launch.ProgramEnd):
- where hwprof had changed nothing of the run yet (advise's count of its calls, a candidate's baseline process, a
  paired process before the variant's first call), the failure is the program's, and every other candidate
  would meet it too: the worker exits PROGRAM_FAILED_EXIT, and advise stops with ProgramFailed (a ValueError:
  `hwprof: error:` and a non-zero exit) naming the program's error and the log that holds its traceback;
- where the change ran (a variant's process, or a paired process once the variant was called), it may be the
  change's doing: the candidate's row fails, its reason the program's error.
"""

from __future__ import annotations

from pathlib import Path

PROGRAM_FAILED_EXIT = 3
"""The program worker's exit status where the unchanged program failed (its out file holds the error line)."""


class ProgramFailed(ValueError):
    """The program failed where advise had changed nothing of it: its own error, in one line."""


def failure_line(error: str | None, exit_code: int | None) -> str:
    """The program's own last error: its exception line, else the status it exited with."""
    return error or f"it exited with status {exit_code}"


def stopped_by(error: str, run: str, log: Path) -> ProgramFailed:
    """advise's error where the worker said the unchanged program failed (`error`, the worker's line) in `run`."""
    return ProgramFailed(
        f"{error}, in advise's {run} (the program unchanged; its traceback is in {log}): no candidate can run "
        "until the program runs"
    )
