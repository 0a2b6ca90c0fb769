"""A user's program as a workload describes itself (hwprof.analysis.workload): the report header's lines (the
command, the module taken as the model and why, the calls each pass saw and how the program ended), the exit
status's lines, and what its stages table's rows are."""

from __future__ import annotations

import shlex

from hwprof.schema.program import ProgramOutcome
from hwprof.schema.run import RunDoc
from hwprof.schema.summaries_cpu import TimingSummary

WHOLE_PROCESS = (
    "whole-process only: the passes after the one that found no model profiled the program's whole run as one span "
    '("program") with the collectors that need no forward (kernels, py-spy, Scalene); the others are unavailable'
)


STAGES_NOTE = (
    "the program's stages per iteration: a stage's calls in the iteration added up (0 where none ran); "
    "other = the iteration's time that no stage claims (the program's own code between them: mark it "
    "with --stage NAME=module:function or hwprof.stage)"
)


def program_lines(run: RunDoc) -> list[tuple[str, str]]:
    """The header's lines about the program; [] for a run that holds none."""
    program = run.config.program
    if program is None:
        return []
    argv = program.argv or []
    command = shlex.join(["python", *argv])
    out = [("program", f"{command} (in {program.cwd})")]
    outcomes = {name: p.program for name, p in run.passes.items() if p.program is not None}
    first = next(iter(outcomes.values()), None)
    if first is None:
        return [*out, ("model found", "no pass recorded what it found")]
    out.append(("model found", _found(first, program.model_path)))
    if any(o.whole_process for o in outcomes.values()):
        out.append(("figures", WHOLE_PROCESS))
    out.append(("calls", "; ".join(f"{name}: {_calls(o)}" for name, o in outcomes.items())))
    timed = _timed(first)
    if timed:
        out.append(("stages timed", timed))
    notes = dict.fromkeys(note for o in outcomes.values() for note in o.notes)
    out += [("note", note) for note in notes]
    return out + _not_run(run)


def _not_run(run: RunDoc) -> list[tuple[str, str]]:
    """The checks of hwprof's own that a program's run cannot have, in one line (not a failure)."""
    why = run.summary(TimingSummary).forward_reference_unavailable
    if not why:
        return []
    return [("checks not run", f"harness forward / plain model(x) loop (the timing pass's reference): {why}")]


def program_problems(run: RunDoc) -> list[str]:
    """The exit status's lines for a program's run beyond its passes' own: no model, so no per-forward figure."""
    reasons = [p.program.no_model for p in run.passes.values() if p.program is not None and p.program.no_model]
    if not reasons or run.config.outside:  # `attach --no-agent`: whole-process
        return []
    return [f"no model: {reasons[0]}; the figures made are whole-process, not per forward"]


def _found(outcome: ProgramOutcome, named: str | None) -> str:
    if outcome.model is None:
        return outcome.no_model or outcome.ended or "no model found"
    besides = _other_roots(outcome)
    at = f" at {outcome.model_at}" if outcome.model_at else ""
    at += f", called from thread {outcome.model_thread!r}" if outcome.model_thread else ""
    calls = f", {outcome.calls} call{'s' if outcome.calls != 1 else ''}"
    inside = (
        f"; called inside the program's call of {outcome.outer_call}: its forward {outcome.outer_share:.0%} of it"
        if outcome.outer_call and outcome.outer_share is not None
        else ""
    )
    return (
        f"{outcome.model} ({outcome.model_class}{at}{calls}): {outcome.why}; layers: {outcome.layers_from}"
        + (" [TorchScript]" if outcome.scripted else "")
        + inside
        + besides
    )


def _other_roots(outcome: ProgramOutcome) -> str:
    """The other modules the program called at the outermost level: each timed as a stage of its own (with its
    true count), or, in an older run, counted until the warm-up's end."""
    others = outcome.other_roots
    if not others:
        return ""
    staged = {label: stage for stage, label in outcome.other_model_stages.items()}
    if not staged:
        return "; also called at the outermost level (counted until the warm-up's end): " + ", ".join(
            f"{k} x{v}" for k, v in others.items()
        )
    return "; also called at the outermost level: " + ", ".join(
        f"{k} x{v}" + (f" (its calls from the warm-up's end on: the stage {staged[k]!r})" if k in staged else "")
        for k, v in others.items()
    )


def _calls(outcome: ProgramOutcome) -> str:
    """ "14 calls (2 choosing the model, 2 warm-up, 10 measured), ended ...": every call the pass saw, by kind."""
    kinds = [
        (outcome.before_calls, "choosing the model"),
        (outcome.traced_calls, "inside torch.jit.trace"),
        (outcome.warmup_calls, "warm-up"),
        (outcome.measured_calls, "measured"),
        (outcome.clean_calls, "clean"),
        (outcome.after_calls, "after the measured ones, unmarked"),
    ]
    parts = [f"{n} {what}" for n, what in kinds if n or what in ("warm-up", "measured")]
    parts += [f"{n} from thread {name!r}, not measured" for name, n in outcome.other_thread_calls.items()]
    counted = sum(n or 0 for n, _ in kinds) + sum(outcome.other_thread_calls.values())
    if counted != outcome.calls:  # an older run, which did not record every kind
        parts.append(f"{outcome.calls - counted} other")
    return f"{outcome.calls} calls ({', '.join(parts)}), {outcome.ended or '?'}{_stopped_threads(outcome)}"


def _stopped_threads(outcome: ProgramOutcome) -> str:
    """The threads hwprof's stop ended: the model's (a worker thread), then the main thread with it."""
    if not outcome.stopped_threads:
        return ""
    threads = ", ".join(repr(name) for name in dict.fromkeys(outcome.stopped_threads))
    return f" (in thread {threads}; hwprof stopped the main thread with it: the whole program ended there)"


def _timed(outcome: ProgramOutcome) -> str:
    """The functions that made the stages, by stage, with their calls in the pass (all of its calls)."""
    by_stage: dict[str, list[str]] = {}
    for label, calls in outcome.stage_calls.items():
        stage, _, function = label.partition("=")
        by_stage.setdefault(stage, []).append(f"{function} x{calls}")
    return "; ".join(f"{stage}: {', '.join(functions)}" for stage, functions in by_stage.items())
