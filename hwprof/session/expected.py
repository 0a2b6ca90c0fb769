"""How long a collect's passes left are expected to take, for the progress line (issue 66): an estimate, and said
to be one.

Each pass left is taken at its floor (hwprof.session.pass_stop.floor: 4 ABBA blocks, a measured and a clean
iteration each) at the timing pass's whole-iteration p50, plus the start-up,
build, warm-up and finish the passes that ran took (their median, run.json passes.<pass>.phases). A pass whose
figures do not resolve at its floor, or a collector that asks for more (a sampler's samples), runs longer: the
estimate is the least the rule allows, said as "about"."""

from __future__ import annotations

import statistics
from pathlib import Path

from hwprof.core.spans import timing_iteration_s
from hwprof.session.outcome import PassOutcome
from hwprof.session.pass_stop import floor

MEASURING = ("measure_s",)
"""The phase the floor replaces; the others (start, build, warm-up, finish, read) are taken as they ran."""
BESIDE = ("start_s", "build_s", "wait_s")
"""A pass launched beside the previous pass's close (its phases hold wait_s, hwprof.session.turn): these lay beside
that pass, outside its own wall."""


def expected_left_s(
    run_dir: Path, done: list[PassOutcome], passes_left: int, iters: int, resolving: bool
) -> float | None:
    """Seconds the `passes_left` passes are expected to take, or None before the timing pass measured an
    iteration. `resolving`: the passes stop at their floor (no --iters), else each measures `iters` beside as many
    clean ones."""
    iteration = timing_iteration_s(run_dir)
    if iteration is None or passes_left <= 0:
        return None if iteration is None else 0.0
    overheads = [_overhead(o.phases) for o in done if o.phases]
    overhead = statistics.median(overheads) if overheads else 0.0
    measured = floor(0, iters) if resolving else iters
    return passes_left * (overhead + 2 * measured * iteration)


def _overhead(phases: dict[str, float]) -> float:
    """A pass's own seconds outside its measuring: an early-launched pass's start, build and wait left out."""
    beside = BESIDE if "wait_s" in phases else ()
    return sum(v for k, v in phases.items() if k not in MEASURING and k not in beside)


def expected_words(seconds: float) -> str:
    """The progress line's phase: 'about 85 s left (estimate: ...)'."""
    minutes = f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"
    return f"about {minutes} left (estimate: each pass at its floor)"
