"""A pass's child process: `python -P -m hwprof.session.worker RUN_DIR PASS C1,C2`.

It picks the pass's runner, the built-in pipeline's (hwprof.session.pass_runner) or a user's program's
(hwprof.session.program_pass_runner, where config.json names a program; hwprof.agent.outside's for a service
sampled from outside), and runs it. Progress goes to stdout as JSON
lines for the parent; logs go to stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from hwprof.core.atomic import DiskFullError
from hwprof.rundir.worker_files import read_config, write_worker_pid
from hwprof.session.pass_runner import PassRunner
from hwprof.session.program_pass_runner import ProgramPassRunner
from hwprof.session.worker_io import LossyStream, disk_full_exit
from hwprof.session.worker_stop import STOP


def _runner_class(run_dir: Path) -> type[PassRunner]:
    """The built-in pipeline's runner, or a user's program's (config.json's `program`), or a service's sampled from
    outside (`hwprof attach --no-agent`: hwprof.agent.outside)."""
    program = read_config(run_dir).program
    if program is None:
        return PassRunner
    if program.outside:
        from hwprof.agent.outside import OutsideRunner

        return OutsideRunner
    return ProgramPassRunner


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m hwprof.session.worker RUN_DIR PASS COLLECTOR[,COLLECTOR...]", file=sys.stderr)
        return 2
    STOP.install()
    run_dir, pass_name, names = Path(args[0]), args[1], [n for n in args[2].split(",") if n]
    sys.stderr = LossyStream(sys.stderr)
    runner = _runner_class(run_dir)(run_dir, pass_name, names)
    with contextlib.suppress(OSError):  # without it, a stop signal goes to the whole process group
        write_worker_pid(runner.ctx.out_dir, os.getpid())
    try:
        return runner.run()
    except DiskFullError as exc:  # writing result.json, after the collectors were closed: report the first
        return disk_full_exit(runner.disk_full or exc)


if __name__ == "__main__":
    sys.exit(main())
