"""What a program's pass saw of the program, for result.json's `program` record (hwprof.schema.program)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from hwprof.core.program_spec import STDIN_EOF_NOTE
from hwprof.program.call_facts import MEASURED
from hwprof.program.driver import Calls
from hwprof.schema.program import ProgramOutcome
from hwprof.workload.script_scopes import class_name

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig
    from hwprof.core.program_spec import ProgramSpec
    from hwprof.program.driver import ProgramDriver
    from hwprof.program.finder import Found, ModelFinder
    from hwprof.program.launch import ProgramEnd
    from hwprof.program.other_models import OtherModels
    from hwprof.program.stage_hooks import StageHooks
    from hwprof.program.thread_stop import MainThreadStop


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
    main_stop: MainThreadStop
    others: OtherModels


ENDED = {
    "stopped": "stopped after the measured calls",
    "returned": "ran to its end",
    "exit": "ran to its end (sys.exit)",
    "os_exit": "ran to its end",
    "signal": "ended",
    "failed": "failed",
    "served": "served on (attached: a window of its calls measured)",
    "sampled": "served on (sampled from outside: no agent)",
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
    _threads(outcome, calls, runner)
    whole = driver.whole.result() if driver is not None and driver.whole is not None else None
    if whole is not None:
        outcome.update(outer_call=whole[0], outer_share=whole[1])
    if end is not None and end.exit_code is not None:
        outcome.update(exit_code=end.exit_code)
    if end is not None and end.error is not None:
        outcome.update(error=end.error)
    _call_facts(outcome, driver)
    if end is not None and end.ok and end.stdin_eof and found is not None and runner.spec.stdin is None:
        outcome.update(notes=[*outcome.notes, STDIN_EOF_NOTE])  # its failure's or silence's line says it otherwise
    return outcome


def _call_facts(outcome: ProgramOutcome, driver: ProgramDriver | None) -> None:
    """What the measured calls ran under that the program may change: torch's thread counts, grad mode."""
    if driver is None or not driver.facts.calls[MEASURED]:
        return
    facts = driver.facts
    outcome.update(
        torch_threads=facts.thread_counts(MEASURED),
        grad_calls=facts.grad[MEASURED],
        inference_mode_calls=facts.inference_mode[MEASURED],
    )


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
    short = _short_of_schedule(runner)
    if runner.end.ok and short is not None:
        return short + (" (sys.exit)" if runner.end.how == "exit" else own)
    return (ENDED[runner.end.how] if runner.end.ok or runner.end.how == "signal" else "failed") + own


def _short_of_schedule(runner: ProgramPassRunner) -> str | None:
    """The program ended by itself before its pass's measured calls were made: "ended before the measured calls"
    where it made none, "ended after 4 of its 6 measured calls" where some (a pass's schedule can ask more than
    --iters: a collector's wish); None where it made them all."""
    driver = runner.driver
    if driver is None:
        return None
    planned = sum(1 for measured, _ in driver.steps if measured) or runner.config.iters
    made = driver.calls.measured
    if made >= planned:
        return None
    return f"ended after {made} of its {planned} measured calls" if made else "ended before the measured calls"


def _threads(outcome: ProgramOutcome, calls: Calls, runner: ProgramPassRunner) -> None:
    """The other models' stages; which thread called the model, the other threads' calls of it, and the threads
    hwprof's end stopped."""
    if runner.others.stages:
        outcome.update(other_model_stages=dict(runner.others.stages))
    if calls.thread is not None:
        outcome.update(model_thread=calls.thread)
    if calls.other_threads:
        outcome.update(other_thread_calls=dict(calls.other_threads))
    if runner.main_stop.stopped_threads:
        outcome.update(stopped_threads=list(runner.main_stop.stopped_threads))
