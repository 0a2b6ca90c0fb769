"""Whether a program makes enough calls of its model for advise's schedules, known before any candidate runs.

A candidate on a program runs the program and gives its calls of its model to the baseline and the variant by a
schedule (hwprof.program.advise_calls): a paired worker takes 2 x warm-up + 2 x SOLO_CALLS + 4 per block + 1 calls
once the model is found, a side alone in its process warm-up + 2 per block, and the finder's own calls come first
(2 for a model found by repetition, 1 for --program-model). A program that ends before its schedule is done has
measured nothing, after minutes of running. So the calls are compared first:
- each pass of the run recorded the calls it saw (result.json's `program.calls`); a pass that let the program end
  (ran to its end, or ended before or among its measured calls) saw all of them: that is the program's count;
- a pass that stopped the program after its measured calls saw a lower bound only; where that bound is short of
  the schedule, advise counts the calls first: one run of the unchanged program, stopped as soon as it made as
  many as the schedule needs (hwprof.advisor.program_worker, mode "count");
- too few calls: advise is refused at once, in one line that gives the calls it needs and the fixes: the
  `hwprof advise RUN` command whose --blocks and --only fit the calls the program makes (no fewer blocks than
  paired_cost.MIN_BLOCKS, from which a cost is resolved), and more input.

Refused rather than run again: a schedule spread over several runs of the program would pair calls from different
processes (their own allocator state, caches, thread pools), which is what a paired measure is there to avoid.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hwprof.analysis.advice.candidate import Candidate
from hwprof.analysis.paired_cost import MIN_BLOCKS
from hwprof.core.config import ADVISE_BLOCKS
from hwprof.program.advise_calls import SOLO_CALLS, schedule_calls
from hwprof.schema.program import ProgramOutcome

EXACT_ENDS = ("ran to its end", "ended before the measured calls", "ended after ")
"""ProgramOutcome.ended of a pass that let the program end by itself (before, or after some of its measured calls:
"ended after 4 of its 6 measured calls"): its calls are all the program makes."""
COUNT_MODE = "count"
"""The program worker's mode that counts the program's calls of its model (AdviseResult.calls)."""


@dataclass(frozen=True)
class CallsSeen:
    """The program's calls of its model as the run (or advise's count) saw them."""

    calls: int
    exact: bool
    """All of them (the program ended by itself); False: a lower bound (a pass stopped it)."""
    source: str
    """Where the figure comes from, in words."""


def calls_seen(outcomes: Iterable[tuple[str, ProgramOutcome]]) -> CallsSeen | None:
    """From the run's passes (name, outcome): the count of a pass that let the program end, else the most calls a
    pass saw before stopping it; None where no pass found the model."""
    found = [(name, o) for name, o in outcomes if o.model]
    if not found:
        return None
    ended = [(o.calls, name) for name, o in found if (o.ended or "").startswith(EXACT_ENDS)]
    if ended:
        calls, name = max(ended)
        return CallsSeen(calls, True, f"the run's {name} pass saw the program end after {calls}")
    calls, name = max((o.calls, name) for name, o in found)
    return CallsSeen(calls, False, f"the run's {name} pass stopped the program after {calls}")


@dataclass(frozen=True)
class Budget:
    """The calls of its model a program must make for each candidate's schedule."""

    warmup: int
    blocks: int
    before: int
    """The finder's calls: up to and including the one that chose the model."""

    def needs(self, c: Candidate) -> int:
        """A candidate made at the model's call runs paired (env: none); one of the environment, processes."""
        return self.before + schedule_calls(not c.env, self.warmup, self.blocks)

    def most(self, candidates: Sequence[Candidate]) -> int:
        return max((self.needs(c) for c in candidates), default=0)

    def most_blocks(self, paired: bool, calls: int) -> int:
        """The most ABBA blocks whose schedule fits in `calls` (0: not even one)."""
        spare = calls - self.before - schedule_calls(paired, self.warmup, 0)
        return max(0, spare // (4 if paired else 2))

    def at(self, blocks: int) -> Budget:
        """This budget at another block count."""
        return dataclasses.replace(self, blocks=blocks)

    def what(self, paired: bool) -> str:
        """The schedule's parts in words."""
        found = f"{self.before} to find the model"
        if paired:
            return (
                f"{found}, warm-up {self.warmup} per side, {SOLO_CALLS} alone per side, "
                f"{self.blocks} ABBA blocks of 4, 1 warm-up of the variant"
            )
        return f"{found}, warm-up {self.warmup}, {self.blocks} blocks of 2 per process"


def finder_calls(model_path: str | None) -> int:
    """The program's calls of its model before the schedule's first: the finder chooses a model at its second
    call (repetition), or at its first where --program-model names it."""
    return 1 if model_path else 2


@dataclass(frozen=True)
class Fit:
    """Candidates that all fit the program's calls at one block count: the advise options that run them."""

    blocks: int
    keys: tuple[str, ...]
    need: int
    """The calls the costliest of them needs at `blocks` (the finder's included)."""


def fits(calls: int, budget: Budget, candidates: Sequence[Candidate]) -> list[Fit]:
    """What runs in the program's `calls`, each from budget.needs: the candidates that fit at the blocks asked
    for, then, where more fit at fewer blocks, those at the most blocks that all of them fit. Never fewer blocks
    than paired_cost.MIN_BLOCKS (a cost is not resolved from fewer), or than those asked for where that is less;
    [] where no candidate fits even there."""
    out = []
    now = [c for c in candidates if budget.needs(c) <= calls]
    if now:
        out.append(Fit(budget.blocks, tuple(c.key for c in now), budget.most(now)))
    least = budget.at(min(MIN_BLOCKS, budget.blocks))
    more = [c for c in candidates if least.needs(c) <= calls]
    if len(more) > len(now):
        blocks = min([budget.blocks, *(budget.most_blocks(not c.env, calls) for c in more)])
        out.append(Fit(blocks, tuple(c.key for c in more), budget.at(blocks).most(more)))
    return out


def advise_command(run_dir: str, fit: Fit, candidates: Sequence[Candidate], only: bool, prefix: str) -> str:
    """The command that runs `fit` on the run kept (`hwprof advise RUN`, whichever door refused): --blocks where
    not the default, --only where fewer than `candidates` or where they were an --only already (`only`); collect's
    own options beside it where the refusal is collect's."""
    options = [] if fit.blocks == ADVISE_BLOCKS else ["--blocks", str(fit.blocks)]
    if only or len(fit.keys) < len(candidates):
        options += ["--only", ",".join(fit.keys)]
    command = f"`{shlex.join(['hwprof', 'advise', run_dir, *options])}`"
    if prefix and options:
        command += f" (collect's {' '.join(o.replace('--', f'--{prefix}', 1) for o in options)})"
    return command


def refusal(
    seen: CallsSeen,
    budget: Budget,
    candidates: Sequence[Candidate],
    run_dir: str | Path,
    prefix: str = "",
    only: bool = False,
) -> str:
    """The one line that refuses advise ("" where every candidate fits): the calls needed, and the fixes, each
    computed from the same Budget (fits): the advise command with the --blocks and --only that fit the calls the
    program makes, or where none fits even at MIN_BLOCKS, the calls that one would need; `prefix`: of the options
    collect --advise takes ("advise-"); `only`: the candidates are those of an --only."""
    short = [c for c in candidates if budget.needs(c) > seen.calls]
    if not short:
        return ""
    need = budget.most(short)
    paired = any(not c.env for c in short)
    head = (
        f"the program makes {seen.calls} calls of its model ({seen.source}); advise needs {need} for "
        f"{', '.join(c.key for c in short)} at {budget.blocks} blocks ({budget.what(paired)}): no candidate was run"
    )
    more = f"give the program more input (more images or frames) for at least {need} calls of its model"
    found = fits(seen.calls, budget, candidates)
    if not found:
        least = budget.at(min(MIN_BLOCKS, budget.blocks))
        cheapest = min(candidates, key=least.needs)
        return (
            f"{head}, and none fits in {seen.calls} calls even at --{prefix}blocks {least.blocks} (the fewest a "
            f"cost is resolved from: {cheapest.key} needs {least.needs(cheapest)} there); fix: {more}"
        )
    runs = [
        f"run {advise_command(str(run_dir), f, candidates, only, prefix)} ({f.need} calls at {f.blocks} blocks)"
        for f in found
    ]
    return f"{head}; fix: {', or '.join([*runs, more])}"


def refuse(
    seen: CallsSeen,
    budget: Budget,
    candidates: Sequence[Candidate],
    run_dir: str | Path,
    prefix: str = "",
    only: bool = False,
) -> None:
    """ValueError in one line (refusal) where the program makes too few calls for a candidate's schedule."""
    line = refusal(seen, budget, candidates, run_dir, prefix, only)
    if line:
        raise ValueError(line)


def count_needed(budget: Budget, seen: CallsSeen | None, candidates: Sequence[Candidate]) -> int:
    """The calls (the finder's included) to count before any candidate runs: those the schedules need, where the
    run saw fewer without seeing the program end; 0: no count needed."""
    need = budget.most(candidates)
    known = seen is not None and (seen.exact or seen.calls >= need)
    return 0 if known or not need else need


def calls_line(budget: Budget, seen: CallsSeen | None, candidates: Sequence[Candidate]) -> str:
    """What advise knows of a program's calls against its schedules, before it runs anything ("": no candidate)."""
    if not candidates:
        return ""
    need = budget.most(candidates)
    if count_needed(budget, seen, candidates):
        where = f"{seen.source} calls of its model" if seen is not None else "no pass recorded its calls"
        return f"{where}; the schedules need {need}: counting them first (one run of the program, stopped at {need})"
    assert seen is not None
    return f"{seen.source} calls of its model; the schedules need {need}"
