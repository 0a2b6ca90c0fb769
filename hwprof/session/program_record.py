"""What a program's pass saw of the program, for result.json's `program` record (hwprof.schema.program)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from hwprof.program.driver import Calls
from hwprof.schema.program import ProgramOutcome
from hwprof.workload.script_scopes import class_name

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig
    from hwprof.core.program_spec import ProgramSpec
    from hwprof.program.driver import ProgramDriver
    from hwprof.program.finder import Found, ModelFinder
    from hwprof.program.launch import ProgramEnd
    from hwprof.program.stage_hooks import StageHooks


class ProgramPassRunner(Protocol):
    """What the record reads of a program's pass (hwprof.session.program_pass_runner.ProgramPassRunner)."""

    driver: ProgramDriver | None
    finder: ModelFinder | None
    end: ProgramEnd | None
    stages: StageHooks | None
    notes: list[str]
    no_model: str | None
    whole_process: bool
    config: RunConfig
    spec: ProgramSpec


ENDED = {
    "stopped": "stopped after the measured calls",
    "returned": "ran to its end",
    "exit": "ran to its end (sys.exit)",
    "os_exit": "ran to its end",
    "signal": "ended",
    "failed": "failed",
}


def program_outcome(runner: ProgramPassRunner, status: str) -> ProgramOutcome:
    """result.json's `program`: what the pass saw of the program (its calls, its model, how it ended)."""
    driver, finder, end = runner.driver, runner.finder, runner.end
    found = driver.found if driver is not None else None
    calls = driver.calls if driver is not None else Calls()
    outcome = ProgramOutcome.of(
        calls=calls.seen,
        before_calls=calls.before,
        warmup_calls=calls.warmup,
        measured_calls=calls.measured,
        clean_calls=calls.clean,
        after_calls=calls.after,
        traced_calls=calls.traced,
        other_roots=finder.other_roots() if finder is not None else {},
        ended=_ended(runner, status, found),
        notes=runner.notes,
    )
    if runner.stages is not None:
        outcome.update(
            stages_wrapped=[h.target.label for h in runner.stages.hooked],
            stages_unmatched=[t.label for t in runner.stages.unresolved_targets()],
            stage_calls=runner.stages.calls(),
        )
    if runner.no_model is not None:
        outcome.update(no_model=runner.no_model, whole_process=runner.whole_process)
    if found is not None:
        outcome.update(
            model=found.name,
            model_class=class_name(found.module),
            why=found.why,
            layers_from=found.layers_from,
            scripted=found.scripted,
        )
        if found.at is not None:
            outcome.update(model_at=str(found.at))
    whole = driver.whole.result() if driver is not None and driver.whole is not None else None
    if whole is not None:
        outcome.update(outer_call=whole[0], outer_share=whole[1])
    if end is not None and end.exit_code is not None:
        outcome.update(exit_code=end.exit_code)
    if end is not None and end.error is not None:
        outcome.update(error=end.error)
    return outcome


def _ended(runner: ProgramPassRunner, status: str, found: Found | None) -> str:
    """How the program ended, in words (ENDED, or why it did not run or call a model)."""
    driver = runner.driver
    if status == "interrupted":
        complete = driver is not None and driver.done and driver.calls.measured >= runner.config.iters
        return "stopped by a signal after its measured calls" if complete else "interrupted"
    if runner.end is None:
        return "not run (no model)" if runner.whole_process else "failed"
    if runner.whole_process:
        return ENDED[runner.end.how]
    if found is None and runner.finder is not None and runner.spec.model_path is None:
        return "called no torch module" if not runner.finder.roots else "called no torch module more than once"
    own = f" ({runner.end.error})" if runner.end.how in ("os_exit", "signal") else ""
    if runner.end.ok and runner.driver is not None and runner.driver.calls.measured < runner.config.iters:
        return "ended before the measured calls" + (" (sys.exit)" if runner.end.how == "exit" else own)
    return (ENDED[runner.end.how] if runner.end.ok or runner.end.how == "signal" else "failed") + own
