"""The distribution-free interval of a median: the order statistics x(j) <= p50 <= x(n+1-j) with the largest j
whose coverage, 1 - 2 P(B <= j-1) for B ~ Binomial(n, 1/2), is at least CONFIDENCE (no assumption on the
values' shape: a host's noise makes latencies skewed). What hwprof's stopping rules read (the timing pass, a paired
pass's layer shares: hwprof.session.timing_stop, pass_stop) and advise's race (whether its first rows' order is
resolved: analysis.advice.race)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

CONFIDENCE = 0.95


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
