"""A user's program as advise's target (hwprof.advisor.targets): its candidates (what can change from outside its
code), the worker's command, the advised run in words, the table's notes, and why a program's rows have no
per-layer times. Apart from hwprof.advisor.program_worker, which imports torch: the runner imports this module at
its start."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.advisor.children import OnProgress, run_child
from hwprof.advisor.program_budget import COUNT_MODE, Budget, CallsSeen, calls_seen, finder_calls
from hwprof.advisor.program_failure import PROGRAM_FAILED_EXIT, stopped_by
from hwprof.analysis.program.candidates import program_candidates, program_facts
from hwprof.core.config import RunConfig
from hwprof.rundir.advise_files import read_advise_result, write_advise_spec
from hwprof.schema.advise_result import AdviseSpec
from hwprof.schema.runtime_checks import BLIND
from hwprof.session.stopping import StopSignals

if TYPE_CHECKING:
    from hwprof.analysis.advice.candidate import Candidate, RunFacts
    from hwprof.analysis.advice.output import OutputCheck
    from hwprof.analysis.finding import Finding
    from hwprof.rundir.reader import RunData

PROGRAM_LAYERS_NOTE = (
    "no per-layer times: a program's variants are measured by their whole forward (a layers collect of a change "
    "made inside the program is not built)"
)

PROGRAM_NOTE = (
    "a program's rows: its own calls of its model are the iterations; paired = the program's model and a changed "
    "copy of it alternate over those calls; the output check = the model's raw output on the program's measured "
    "calls against the unchanged model's on the same inputs (the baseline's run recorded them for a change that "
    "needs a process of its own)"
)

PROGRAM_BLIND_NOTE = (
    "the program's model gives the same head whatever its input (another input moves it {sens:.2g}): its rows' "
    "output checks are blind. hwprof rescales only its own models' random init (hwprof collect --model), never a "
    "program's model: run the program with its trained weights for a check that sees"
)


@dataclass(frozen=True)
class ProgramTarget:
    """A user's program (`collect -- python SCRIPT`): its candidates are what can change from outside its code,
    measured over its own calls of its model by the program worker (hwprof.advisor.program_worker)."""

    config: RunConfig

    def candidates(self, data: RunData, facts: RunFacts, findings: list[Finding]) -> list[Candidate]:
        return program_candidates(program_facts(data, facts), findings)

    def baseline(self) -> str:
        return program_baseline(self.config)

    def notes(self) -> list[str]:
        return [PROGRAM_NOTE]

    def closing_notes(self, checks: list[OutputCheck]) -> list[str]:
        blind = [c for c in checks if c.verdict == BLIND]
        return [PROGRAM_BLIND_NOTE.format(sens=blind[0].head_sensitivity)] if blind else []

    def layers_note(self) -> str:
        return PROGRAM_LAYERS_NOTE

    def worker_command(self, spec: AdviseSpec, spec_path: Path) -> list[str]:
        return program_command(spec, spec_path)

    def forkable_workers(self) -> tuple[str, ...]:
        return ()  # the program expects a fresh interpreter, as a program's passes do

    def schedule(self, data: RunData, blocks: int) -> tuple[CallsSeen | None, Budget | None]:
        assert self.config.program is not None
        seen = calls_seen((n, p.program) for n, p in data.doc.passes.items() if p.program is not None)
        return seen, Budget(max(1, self.config.warmup), blocks, finder_calls(self.config.program.model_path))


def program_command(spec: AdviseSpec, spec_path: Path) -> list[str]:
    """The program's advise worker (hwprof.advisor.program_worker) on this spec, written to spec_path."""
    write_advise_spec(spec_path, spec)
    return [sys.executable, "-P", "-m", "hwprof.advisor.program_worker", str(spec_path)]


def program_baseline(config: RunConfig) -> str:
    """The advised run as the user types it: hwprof's options (its thread count, the model named), then `--` and
    the program's command."""
    program = config.program
    assert program is not None
    options = ["--threads", str(config.threads)]
    if program.model_path:
        options += ["--program-model", program.model_path]
    if program.stdin:
        options += ["--program-stdin", program.stdin]
    return f"{shlex.join(options)} -- python {shlex.join(program.argv)}"


def count_calls(
    config: RunConfig, run_dir: Path, need: int, work: Path, stop: StopSignals, on_progress: OnProgress
) -> int | None:
    """advise's count of a program's calls of its model once found (hwprof.advisor.program_budget): one run of the
    unchanged program, stopped once it made `need`; None where a stop signal cut it; ValueError where it failed
    (ProgramFailed: the program itself, in its own words)."""
    spec = AdviseSpec.of(
        key=COUNT_MODE,
        baseline=config.to_dict(),
        variant=config.to_dict(),
        warmup=max(1, config.warmup),
        work_dir=str(work / COUNT_MODE),
        run_dir=str(run_dir),
    )
    out = work / f"{COUNT_MODE}.json"
    spec = spec.for_mode(COUNT_MODE, str(out))
    spec.update(calls=need)
    command = program_command(spec, work / f"{COUNT_MODE}.spec.json")
    log = work / f"{COUNT_MODE}.log"
    outcome = run_child(command, log, config.pass_timeout_s, stop, on_progress)
    if stop.requested:
        return None
    result = read_advise_result(out) if out.is_file() else None
    if outcome.returncode == PROGRAM_FAILED_EXIT and result is not None and result.error:
        raise stopped_by(result.error, "count of its calls of its model", log)
    if not outcome.ok or result is None or result.error is not None or result.calls is None:
        why = (result.error if result is not None else None) or outcome.error or "it wrote no count"
        raise ValueError(f"advise could not count the program's calls of its model ({why}; {log})")
    return int(result.calls)
