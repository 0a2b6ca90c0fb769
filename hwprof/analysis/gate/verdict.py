"""The performance gate's verdict and the terms it is given in: the gate's options, a judged figure, and the
verdict (its outcome, its exit status and the one line that says why, with the method's text) built from the judged
figures. Two judges build it: hwprof.analysis.gate.judge from two separately collected runs, and
hwprof.analysis.gate.paired from ABBA blocks of one process.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

PASS, FAIL, UNRESOLVED = "pass", "fail", "not resolved"
PAIRED = "paired"
"""The kind of a figure measured in ABBA blocks of both sides in one process (--paired)."""
SHARE = "share"
"""The kind of a layer figure judged on its share of forward per iteration (--layer-stat share)."""
TIMED = ("time", PAIRED, SHARE)
EXIT_PASS, EXIT_FAIL = 0, 1

MIN_SAMPLES = 5
"""A timed figure with fewer measured iterations in either run is not judged (its interval would be a guess): it
is "not resolved", with the count and the way to more."""

COUNT_FLOOR = 1000
"""A count below this in both runs is not gated: a few cache misses either way is no regression."""


@dataclass(frozen=True)
class GateOptions:
    fail_above: float
    """Relative slow-down that fails (0.05: NEW more than 5% slower)."""
    share: float = 0.02
    """Layers whose share of forward (in either run) is at least this are gated on time."""
    confidence: float = 0.95
    resamples: int = 2000
    seed: int = 0
    unresolved_fails: bool = False
    """A figure the spreads cannot resolve fails the gate (else the verdict is "not resolved", exit 0)."""
    count_threshold: float = 0.005
    """Relative growth of a callgrind count that fails (0.005: 0.5%)."""
    miss_threshold: float | None = None
    """Relative growth of a simulated cache-miss count that fails; None: misses are not gated."""
    allow_different: bool = False
    """Gate runs of different models, sizes, batches, runtimes or precisions (else refused)."""
    layer_stat: str = SHARE
    """Layers judged on their share of forward per iteration (free of a shift of the whole process between
    the two runs, which the forward answers for) or on their self ms ("ms")."""
    gate_on: str = "both"
    """"time", "counts" (callgrind's alone: a verdict free of the machine's noise) or "both"."""


@dataclass
class Figure:
    name: str
    kind: str
    """"time" (bootstrap of medians) or an event name (exact counts)."""
    base: float
    new: float
    ratio: float
    outcome: str
    low: float | None = None
    high: float | None = None
    n: tuple[int, int] = (0, 0)
    kernels: tuple[str, str] = ("", "")
    why: str = ""
    """Why a figure is not resolved whatever its spread says ("" where the spreads decided): too few samples, or
    a run's pass that measured it unfit for a verdict (disturbed)."""
    way: str = ""
    """What gets a verdict on it where `why` says it has none."""

    @property
    def text(self) -> str:
        return self._measure() + (f" (not judged: {self.why})" if self.why else "")

    def _interval(self) -> str:
        return f", CI x{self.low:.3f}-x{self.high:.3f}" if self.low is not None and self.high is not None else ""

    def _measure(self) -> str:
        if self.kind == PAIRED:
            return (
                f"{self.name} (paired): {self.base:.3f} -> {self.new:.3f} ms (medians), median block ratio "
                f"x{self.ratio:.3f}{self._interval()} over {self.n[0]} ABBA blocks"
            )
        if self.kind == SHARE:
            return (
                f"{self.name}: {self.base:.2%} -> {self.new:.2%} of forward (median share), x{self.ratio:.3f}"
                f"{self._interval()}"
            )
        if self.kind == "time":
            return f"{self.name}: {self.base:.3f} -> {self.new:.3f} ms (median), x{self.ratio:.3f}{self._interval()}"
        return f"{self.name}: {self.kind} {self.base:,.0f} -> {self.new:,.0f} ({(self.ratio - 1) * 100:+.2f}%)"


@dataclass
class Verdict:
    outcome: str
    exit_code: int
    line: str
    figures: list[Figure]
    notes: list[str]
    method: str
    base: str
    new: str

    @property
    def failed(self) -> list[Figure]:
        return [f for f in self.figures if f.outcome == FAIL]

    @property
    def unresolved(self) -> list[Figure]:
        return [f for f in self.figures if f.outcome == UNRESOLVED]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class GateError(ValueError):
    """The gate cannot be meaningful for these runs (one line; exit 2)."""


def parse_percent(text: str, option: str) -> float:
    """'5%' or '5' -> 0.05 (a percentage); GateError naming the option for anything else."""
    try:
        value = float(str(text).strip().removesuffix("%")) / 100
    except ValueError:
        raise GateError(f"{option} takes a percentage such as 5% (got {text!r})") from None
    if not 0 <= value < 10:
        raise GateError(f"{option} takes a percentage from 0% to 1000% (got {text!r})")
    return value


def method_text(opts: GateOptions) -> str:
    return (
        f"timed figures: {opts.confidence:.0%} percentile bootstrap interval ({opts.resamples} resamples, seed "
        f"{opts.seed}) of median(NEW)/median(BASE) over each run's measured iterations; fail when the whole "
        f"interval is above x{1 + opts.fail_above:.3f} (--fail-above {opts.fail_above:.1%}), pass when it is below, "
        f"not resolved when it straddles; layers gated: share of forward >= {opts.share:.1%}, each judged on "
        f"{'its share of forward per iteration' if opts.layer_stat == SHARE else 'its self ms per iteration'}; "
        "callgrind counts "
        f"(exact): fail when NEW's instructions exceed BASE's by more than {opts.count_threshold:.2%}"
        + (f", its cache misses by more than {opts.miss_threshold:.1%}" if opts.miss_threshold is not None else "")
        + f" (counts below {COUNT_FLOOR:,} in both runs are not gated)"
    )


def _rules(figures: list[Figure], opts: GateOptions, passed: bool = False) -> str:
    """What failing (or, `passed`, passing) meant for the kinds of figure gated: timed figures and counts have
    their own thresholds."""
    kinds = {f.kind in TIMED for f in figures}
    if passed:
        timed = f"timed: whole interval below x{1 + opts.fail_above:.3f}"
        counted = f"callgrind counts: none grew by more than {opts.count_threshold:.2%}"
    else:
        timed = f"timed: resolved slower by more than {opts.fail_above:.1%}"
        counted = f"callgrind counts: grew by more than {opts.count_threshold:.2%}"
    return "; ".join(text for text, kind in ((timed, True), (counted, False)) if kind in kinds)


def unresolved_text(unresolved: list[Figure], total: int, opts: GateOptions) -> str:
    """Why the figures are not resolved: those not judged (too few samples, a disturbed pass: each reason once,
    with the way to a verdict), then those whose spreads straddle the threshold."""
    parts = []
    unjudged_figures = [f for f in unresolved if f.why]
    if unjudged_figures:
        names = ", ".join(f.name for f in unjudged_figures[:4]) + ("..." if len(unjudged_figures) > 4 else "")
        reasons = "; ".join(dict.fromkeys(f.why for f in unjudged_figures))
        ways = " or ".join(dict.fromkeys(f.way for f in unjudged_figures if f.way))
        parts.append(f"{len(unjudged_figures)} of {total} figures not judged ({names}): {reasons}; {ways}")
    spread = [f for f in unresolved if not f.why]
    if spread:
        parts.append(
            f"the runs' spreads cannot tell whether {len(spread)} of {total} figures are within "
            f"{opts.fail_above:.1%}: " + "; ".join(f.text for f in spread[:3])
        )
    return "; ".join(parts)


def verdict_of(
    figures: list[Figure], notes: list[str], opts: GateOptions, base: str, new: str, n_layers: int
) -> Verdict:
    failed = [f for f in figures if f.outcome == FAIL]
    unresolved = [f for f in figures if f.outcome == UNRESOLVED]
    rules = _rules(figures, opts)
    if failed:
        outcome, code = FAIL, EXIT_FAIL
        worst = sorted(failed, key=lambda f: (f.kind not in TIMED, f.name not in ("forward", "iteration"), -f.ratio))
        line = f"FAIL: {len(failed)} of {len(figures)} figures regressed against BASE ({rules}): " + (
            "; ".join(f.text for f in worst[:5]) + (f"; and {len(worst) - 5} more" if len(worst) > 5 else "")
        )
    elif unresolved:
        outcome = UNRESOLVED
        code = EXIT_FAIL if opts.unresolved_fails else EXIT_PASS
        rule = "fails (--unresolved fail)" if opts.unresolved_fails else "exit 0 (--unresolved pass)"
        line = f"NOT RESOLVED, {rule}: " + unresolved_text(unresolved, len(figures), opts)
    else:
        outcome, code = PASS, EXIT_PASS
        line = f"PASS: none of {len(figures)} figures regressed against BASE ({_rules(figures, opts, passed=True)})"
    if any(f.kind in ("time", SHARE) for f in figures):  # paired figures are the forward and the iteration alone
        line += f" ({n_layers} layers gated on time)"
    if notes and any(n.startswith("the runs differ") for n in notes):
        line += "; " + "; ".join(n for n in notes if n.startswith("the runs differ"))
    return Verdict(outcome, code, line, figures, notes, method_text(opts), base, new)
