"""The exit statuses of every `hwprof` command, in one table: `hwprof --help` prints it (exit_code_lines) and the
documentation's command-line reference renders the same EXIT_CODES.

Where each status comes from, and a test that sees it:
- 0: every command that did what it was asked; a closed standard output (`hwprof report RUN | head`) ends the
  command quietly with 0 too (hwprof.cli.closed_pipe). Seen by tests/test_cli_help.py (--help, --version, a
  report into `head -1`) and most command tests.
- 1: collect with a failed pass or collector, or a run with problems (hwprof.analysis.run_status: run_problems,
  the report that could not be written), a full disk or a run directory deleted while written (hwprof.cli.main:
  DiskFullError, FolderGoneError), the gate (hwprof.analysis.gate.verdict.EXIT_FAIL), a sweep with a point that did
  not complete (hwprof.cli.sweep), `sweep-job status` of a failed job (hwprof.cli.sweep_job); also Python's own
  status for an error hwprof did not foresee (a traceback). Seen by tests/test_cli.py (a pass that times out),
  tests/test_disk_full.py, tests/test_gate_programs.py, tests/test_programs.py.
- 2: argparse's usage errors, and hwprof.cli.main's ValueError, OSError and CollectError (a bad value, model,
  file, run directory, environment value; a workload that failed, its partial run kept), and `hwprof trace`
  that could not build the trace. Seen by tests/test_cli_help.py (`report /nonexistent`), tests/test_cli.py
  (bad inputs), tests/test_user_values.py.
- 3: `--track` (collect, sweep, advise) or `hwprof track` whose store could not take the runs (hwprof.cli.track:
  TrackingError): the command itself succeeded and its runs are kept. Seen by tests/test_tracking.py (a store
  that refuses, one that never answers, a web server that is not MLflow).
- 128 + a stop signal (SIGHUP 129, SIGINT 130, SIGQUIT 131, SIGABRT 134, SIGTERM 143):
  hwprof.session.stopping.StopSignals.exit_code, and hwprof.cli.entry's handler when the signal comes while hwprof
  starts. Seen by tests/test_fault_signals.py (all five signals, mid-pass) and tests/test_early_signals.py (SIGINT,
  SIGTERM, SIGQUIT and SIGABRT at start-up). SIGQUIT (Ctrl-\\) and a SIGABRT sent from outside stop hwprof as
  SIGTERM does; a worker or tool that aborts is a failed pass (1), not a stop.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass


@dataclass(frozen=True)
class ExitCode:
    """One exit status and what it means, in a user's words."""

    code: int
    meaning: str


EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_TRACKED = 3
EXIT_INTERRUPTED = 128 + int(signal.SIGINT)

EXIT_CODES: tuple[ExitCode, ...] = (
    ExitCode(
        EXIT_OK,
        "done: the run is complete, the report or table printed, the gate passed (or could not resolve a "
        "difference, with --unresolved pass); also when the reader of the output went away (| head)",
    ),
    ExitCode(
        EXIT_FAILED,
        "done with a failure: a pass or collector failed (what it kept is written), the report could not be "
        "written, the gate failed, a sweep point did not complete, a submitted sweep job failed, or the disk "
        "filled",
    ),
    ExitCode(
        EXIT_USAGE,
        "refused: a bad option or value, an unknown model, a file or run directory that cannot be read, an "
        "environment value hwprof cannot use, a workload that failed (its partial run is kept), or a trace that "
        "could not be built; one `hwprof: error:` line on stderr",
    ),
    ExitCode(
        EXIT_NOT_TRACKED,
        "done, but --track could not log the runs (the store refused, timed out or is not MLflow): the runs are "
        "kept, and the `hwprof track RUN` line said logs them later",
    ),
    ExitCode(128 + int(signal.SIGHUP), "stopped by SIGHUP (the terminal closed); what was collected is kept"),
    ExitCode(EXIT_INTERRUPTED, "stopped by Ctrl-C (SIGINT); what was collected is kept"),
    ExitCode(128 + int(signal.SIGQUIT), "stopped by SIGQUIT (Ctrl-\\); what was collected is kept"),
    ExitCode(
        128 + int(signal.SIGABRT),
        "stopped by a SIGABRT sent to hwprof (a child that aborts is a failed pass instead); what was collected is "
        "kept",
    ),
    ExitCode(128 + int(signal.SIGTERM), "stopped by SIGTERM (kill, systemd, a CI timeout); what was collected is kept"),
)


def exit_code_lines(width: int = 100) -> str:
    """The table as `--help` prints it: the code, then its meaning wrapped under itself."""
    import textwrap

    lines = ["exit status:"]
    for row in EXIT_CODES:
        wrapped = textwrap.wrap(row.meaning, width=max(40, width - 8))
        lines.append(f"  {row.code:<4}{wrapped[0]}")
        lines.extend(f"      {more}" for more in wrapped[1:])
    return "\n".join(lines)
