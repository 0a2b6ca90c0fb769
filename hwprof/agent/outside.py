"""A pass of `hwprof attach PID --no-agent`: a process that did not opt in, sampled from outside.

The pass's worker (hwprof.session.worker) runs it where config.json's program is `outside`; nothing runs inside
the service: the pass is a program's whole-process pass (hwprof.session.program_pass_runner) whose "whole run" is
--seconds of the service's life, one iteration holding one stage, "program", while the tools the session attaches
to the service's PID sample it: perf record -p (its native kernels, every thread) and py-spy record -p (its Python
stacks). No model is found and no layer is named: the
figures are whole-process, and the report says so; py-spy's `forward` frames name the module classes that ran.
"""

from __future__ import annotations

import time
from pathlib import Path

from hwprof.program.launch import ProgramEnd
from hwprof.session.program_pass_runner import ProgramPassRunner
from hwprof.session.worker_io import progress

DEFAULT_SECONDS = 10.0
NO_AGENT = (
    "the service runs without hwprof's agent (`hwprof attach --no-agent`): sampled from outside for its whole "
    "window, no model found and no layer named"
)


class OutsideRunner(ProgramPassRunner):
    """The whole-process pass over --seconds of the service, sampled from outside."""

    def __init__(self, run_dir: Path, pass_name: str, names: list[str]) -> None:
        super().__init__(run_dir, pass_name, names)
        self.whole_process = True
        self.found_none = NO_AGENT
        self.seconds = float(self.config.extra.get("attach_seconds") or DEFAULT_SECONDS)

    def _build(self) -> str:
        progress(phase="build", done=0, total=1)
        return "none"

    def _measure(self, runtime_name: str) -> None:
        self._measure_whole()

    def _check_end(self) -> None:
        """The service serves on: its window always ends well."""

    def _run_whole(self) -> ProgramEnd:
        """--seconds of the service's life; a stop signal ends it sooner (Interrupted, from the handler)."""
        ends = time.monotonic() + self.seconds
        while (left := ends - time.monotonic()) > 0:
            time.sleep(min(left, 0.1))
        return ProgramEnd("sampled")
