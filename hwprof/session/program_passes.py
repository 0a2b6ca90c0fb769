"""What one pass of a user's program tells the session about the passes after it.

- No model (the program called no torch module, or none more than once): every later pass runs in whole-process
  mode (hwprof.session.program_pass_runner, WHOLE_PROCESS_ENV), and the pass that found out runs once more that way
  when it holds a collector that needs no forward (perf's kernels, py-spy, Scalene): its first run started none
  of them, since they start at the model's first measured call.
- The program failed before its first measured call: the later passes are not run, since each runs the program
  anew and it would fail again the same way; the pass's error says so. A failure after measured calls (a
  program left to run to its end with --program-end run, say) lets the later passes run and keep their figures.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from hwprof.core.program_spec import WHOLE_PROCESS_ENV
from hwprof.session.outcome import PassOutcome
from hwprof.session.pass_runner import EXIT_PROGRAM_FAILED
from hwprof.session.plan import PassPlan

NOT_RUN = "the passes after it were not run: the program failed before its first measured call, as it would again"


@dataclass
class ProgramPasses:
    found_none: str = ""
    """Why a pass found no model (its one line): later passes run in whole-process mode."""

    def env(self) -> dict[str, str]:
        """What a pass's worker starts with."""
        return {WHOLE_PROCESS_ENV: self.found_none} if self.found_none else {}

    def run_again(self, plan: PassPlan, outcome: PassOutcome, pass_dir: Path) -> bool:
        """Whether the pass must run again in whole-process mode (its folder is then emptied for it)."""
        program = outcome.program
        if program is None or program.no_model is None or program.whole_process or outcome.status != "ok":
            return False
        self.found_none = program.no_model
        if not any(c.whole_process for c in plan.collectors):
            return False
        shutil.rmtree(pass_dir)
        return True

    def ends_collect(self, outcome: PassOutcome) -> bool:
        """The program failed before its first measured call: the pass's error says the later ones are not run."""
        program = outcome.program
        if program is None or outcome.returncode != EXIT_PROGRAM_FAILED or program.measured_calls:
            return False
        outcome.error = f"{outcome.error}; {NOT_RUN}" if outcome.error else NOT_RUN
        return True
