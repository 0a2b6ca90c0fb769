"""When the timing pass has measured enough (issue 66): it stops once its forward's and its whole iteration's p50
are each known to within TOLERANCE of themselves at CONFIDENCE, instead of always running its planned iterations.

The interval is the distribution-free one of a median: the order statistics x(j) <= p50 <= x(n+1-j) with the
largest j whose coverage, 1 - 2 P(B <= j-1) for B ~ Binomial(n, 1/2), is at least CONFIDENCE (no assumption on
the latencies' shape: a host's noise makes them skewed). Its half-width is the larger distance from the p50 to
either end. Six measured iterations are the fewest that have such an interval at 95% (it is then their range).

The rule applies where the user did not ask for a number of iterations (`--iters` absent: RunConfig.extra's
"timing_resolve"); the planned iterations (--iters' default) stay its upper bound, so a noisy host's timing pass
takes no longer than before. Which way the pass ended, and the half-widths, are in run.json
(passes.timing.stopping)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hwprof.analysis.paired_cost import blocks_text
from hwprof.schema.run_passes import StoppingDoc

TOLERANCE = 0.02
CONFIDENCE = 0.95
MIN_ITERATIONS = 6
"""The fewest measured iterations with a 95% interval of the median (coverage of [x(1), x(6)]: 96.9%)."""


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The order-statistic interval of the median of `values` at `confidence`; None where there are too few."""
    n = len(values)
    best = interval_rank(n, confidence)
    if best == 0:
        return None
    ordered = sorted(values)
    return ordered[best - 1], ordered[n - best]


def interval_rank(n: int, confidence: float = CONFIDENCE) -> int:
    """The largest j whose [x(j), x(n+1-j)] covers the median of n values at `confidence`; 0 where none does."""
    below = 0.0  # P(B <= j-1), B ~ Binomial(n, 1/2)
    best = 0
    for j in range(1, n // 2 + 1):
        below += math.comb(n, j - 1) / 2**n
        if 1 - 2 * below < confidence:
            break
        best = j
    return best


def half_width(values: Sequence[float], confidence: float = CONFIDENCE) -> float | None:
    """The interval's half-width as a share of the median (the larger side); None without an interval."""
    interval = median_interval(values, confidence)
    if interval is None:
        return None
    p50 = statistics.median(values)
    if p50 <= 0:
        return None
    return max(p50 - interval[0], interval[1] - p50) / p50


def projected_half_width(values: Sequence[float], n: int, confidence: float = CONFIDENCE) -> float | None:
    """half_width's figure as n values drawn like `values` would give it: the order statistics the interval of n
    uses, read as the same quantiles of `values` (linearly between them). Where it is wider than a tolerance,
    measuring up to n would not resolve the median at the spread seen so far (a layer whose time jumps between two
    modes from one forward to the next); None without an interval at n, or with fewer than two values."""
    j = interval_rank(n, confidence)
    if j == 0 or len(values) < 2 or n < 2:
        return None
    ordered = sorted(values)
    p50 = statistics.median(ordered)
    if p50 <= 0:
        return None
    low, high = _quantile(ordered, (j - 1) / (n - 1)), _quantile(ordered, (n - j) / (n - 1))
    return max(p50 - low, high - p50) / p50


def _quantile(ordered: Sequence[float], level: float) -> float:
    at = level * (len(ordered) - 1)
    below = math.floor(at)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (at - below) * (ordered[above] - ordered[below])


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
