"""When the timing pass has measured enough (issue 66): it stops once its forward's and its whole iteration's p50
are each known to within TOLERANCE of themselves at CONFIDENCE, instead of always running its planned iterations.

The interval is the distribution-free one of a median (hwprof.analysis.order_stats). Its half-width is the larger
distance from the p50 to either end. Six measured iterations are the fewest that have such an interval at 95% (it
is then their range).

The rule applies where the user did not ask for a number of iterations (`--iters` absent: RunConfig.extra's
"timing_resolve"); the planned iterations (--iters' default) stay its upper bound, so a noisy host's timing pass
takes no longer than before. Which way the pass ended, and the half-widths, are in run.json
(passes.timing.stopping)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hwprof.analysis.order_stats import CONFIDENCE, half_width
from hwprof.analysis.paired_cost import blocks_text
from hwprof.schema.run_passes import StoppingDoc

TOLERANCE = 0.02
MIN_ITERATIONS = 6
"""The fewest measured iterations with a 95% interval of the median (coverage of [x(1), x(6)]: 96.9%)."""


@dataclass(frozen=True)
class Stopping:
    """How the timing pass ended: resolved (the rule met) or at its plan, with the half-widths it had."""

    resolved: bool
    iterations: int
    forward: float | None
    iteration: float | None
    budget: bool = False
    """Stopped because its share of --budget ran out (hwprof.session.budget), not by the rule or its plan."""

    @property
    def text(self) -> str:
        widths = ", ".join(
            f"{name} p50 +-{share:.1%}" for name, share in (("forward", self.forward), ("iteration", self.iteration))
            if share is not None
        )  # fmt: skip
        widths = f" ({widths}, {CONFIDENCE:.0%})" if widths else ""
        if self.resolved:
            return f"stopped after {self.iterations} iterations: resolved to {TOLERANCE:.0%}{widths}"
        if self.budget:
            ran = blocks_text(self.iterations, "iteration")
            return f"its share of the budget ran out after {ran}{widths}: not resolved"
        return f"ran its {self.iterations} planned iterations{widths}"

    def doc(self) -> StoppingDoc:
        """result.json's and run.json's record of it (passes.timing.stopping)."""
        return StoppingDoc.of(
            rule=f"forward and iteration p50 within +-{TOLERANCE:.0%} at {CONFIDENCE:.0%} (order statistics)",
            resolved=self.resolved,
            iterations=self.iterations,
            forward_half_width=self.forward,
            iteration_half_width=self.iteration,
            budget_out=self.budget or None,
            text=self.text,
        )


def check(forwards_ms: Iterable[float], iterations_ms: Iterable[float]) -> Stopping:
    """The rule on the measured iterations so far: resolved where both half-widths are within TOLERANCE."""
    forwards, iterations = list(forwards_ms), list(iterations_ms)
    forward, iteration = half_width(forwards), half_width(iterations)
    done = min(len(forwards), len(iterations))
    resolved = (
        done >= MIN_ITERATIONS
        and forward is not None
        and iteration is not None
        and max(forward, iteration) <= TOLERANCE
    )
    return Stopping(resolved, done, forward, iteration)
