"""When a paired pass has measured enough (issue 66): a pass that interleaves clean iterations with its measured
ones (hwprof.session.paired: the layers, trace and Scalene passes, and the kernels pass) stops after an ABBA block
once its figures are resolved, instead of always running its planned iterations, which stay its upper bound.

The rule, asked after each whole block (two measured iterations and two clean ones) from the floor on:
- the floor: MIN_BLOCKS blocks, the fewest whose paired cost can resolve, and at least what a collector of the
  pass asks for itself (a sampler's samples, the counter rotation's reads of every layer);
- the pass's cost resolved: hwprof.analysis.paired_cost's figure (MIN_BLOCKS blocks, quartiles within
  UNRESOLVED_IQR), the figure the report prints;
- in the layers pass, whose layer times the report ranks: every layer it ranks (the RANKED_LAYERS largest) at or
  above MIN_LAYER_SHARE of the forward has the median of its self time known, at 95% (the order-statistic interval
  of hwprof.analysis.order_stats), to within LAYER_TOLERANCE of itself or LAYER_POINTS of the forward, whichever is
  wider;
- in a pass with a sampler of the layers' windows (the kernels pass's perf: Collector.sample_rate), every layer it
  ranks the same way has the samples it needs (MIN_LAYER_SAMPLES, x LIVE_SAMPLES_MARGIN), as its self time in the
  pass's own measured iterations and the sampler's rate on each thread expect them: the sampling plan, sized from
  the earlier passes' shares with a wider margin, is its bound (yolov7-tiny at 320: 74 planned iterations).

A pass also stops, unresolved, once FUTILE_BLOCKS blocks or more show that its plan would not resolve what is
left, and says so:
- its cost, when the blocks' ratios have quartiles more than FUTILE_IQR apart: they estimate the spread of the
  pass's cost from one forward to the next, which more blocks measure better but do not narrow (Scalene's pass at
  yolov7 640 on the 2-vCPU Xeon, 2026-11-28: blocks from 0.97 to 1.58, quartiles 1.03-1.19 after 15 blocks and
  66 s, where 6 blocks had said as much);
- a ranked layer's share, when the interval its plan's iterations would give, drawn like those so far
  (hwprof.analysis.order_stats.projected_half_width), is still wider than its margin (yolov7's model.0 at 640 on
  the 2-vCPU EPYC, 2026-11-29: 21-23 ms, or 31-37 ms in one forward of three when its output took fresh pages;
  its median's interval was still +-42% at the 20 planned iterations, 8 of them run for nothing).
The report prints such a figure as not resolved, with its spread, as before.

It applies where the user did not ask for a number of iterations (`--iters` absent: RunConfig.extra's
"timing_resolve", as for the timing pass). A pass that reaches its plan unresolved goes on as before: its ABBA
blocks extended while the cost is not resolved (hwprof.session.paired.extend), and what stayed unresolved said.
Which way the pass ended is in result.json and run.json (passes.<pass>.stopping)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from hwprof.analysis.order_stats import CONFIDENCE, half_width, projected_half_width
from hwprof.analysis.paired_cost import MIN_BLOCKS, UNRESOLVED_IQR, PassCostFigure, blocks_text
from hwprof.core.kernels import LIVE_SAMPLES_MARGIN, MIN_LAYER_SAMPLES, MIN_LAYER_SHARE, RANKED_LAYERS, SampleRate
from hwprof.core.spans import LiveSpans
from hwprof.schema.run_passes import StoppingDoc

LAYER_TOLERANCE = 0.10
"""A ranked layer's self-time median known to within this share of itself..."""
LAYER_POINTS = 0.005
"""... or to within this share of the forward (half a percentage point), whichever is wider: a layer at 1% of the
forward is known to +-50% of itself, one at 30% to +-10%."""
FUTILE_BLOCKS = 6
FUTILE_IQR = 2 * UNRESOLVED_IQR
"""A cost whose blocks' quartiles lie this far apart after FUTILE_BLOCKS blocks ends the pass's measuring."""
LAYERS_NAMED = 3
"""Unresolved layers named in the text (the count says how many)."""
RULE = (
    f"after each ABBA block from {MIN_BLOCKS} blocks: the paired cost resolved (quartiles within "
    f"{UNRESOLVED_IQR:.0%}) and, in the layers pass, each layer at or above {MIN_LAYER_SHARE:.0%} of the forward "
    f"with its self-time median within +-{LAYER_TOLERANCE:.0%} of itself or +-{LAYER_POINTS:.1%} of the forward "
    f"at {CONFIDENCE:.0%} (order statistics); from {FUTILE_BLOCKS} blocks, a cost whose blocks' quartiles lie more "
    f"than {FUTILE_IQR:.2f} apart, or a layer whose interval at the plan (its spread so far) is wider than its "
    f"margin, ends the pass unresolved; in the kernels pass, each such layer with {MIN_LAYER_SAMPLES} "
    f"samples x{LIVE_SAMPLES_MARGIN} as its self time there and the sampler's rate on each thread expect them"
)


@dataclass(frozen=True)
class PassStopping:
    """How a paired pass ended: resolved (the rule met before its plan ran out) or at its plan, with what was not."""

    resolved: bool
    iterations: int
    """Measured iterations (as many clean ones ran beside them)."""
    planned: int
    unresolved: list[str] = field(default_factory=list)
    """What kept the rule from being met, each in words ('the cost: ...', 'model.51's share ...')."""
    budget: bool = False
    """Stopped because its share of --budget ran out (hwprof.session.budget), not by the rule or its plan."""
    clean_until: int | None = None
    """Measured iterations when the clean ones ended, the cost resolved (None: clean ones ran beside every one)."""
    futile: bool = False
    """Stopped unresolved: what was left (its cost, ranked layers' shares) spreads past what its plan would narrow."""

    @property
    def ends(self) -> bool:
        """Whether the pass stops measuring here: resolved, or its cost's spread says more blocks would not help."""
        return self.resolved or self.futile

    @property
    def text(self) -> str:
        ran = blocks_text(self.iterations, "measured iteration")
        if self.iterations < self.planned:
            ran += f" of the {self.planned} planned"
        elif self.iterations > self.planned:
            ran += f", {self.planned} planned and blocks added for the cost"
        else:
            ran += ", its plan"
        if self.clean_until is not None and self.clean_until < self.iterations:
            ran += f" ({blocks_text(self.clean_until // 2, 'ABBA block')}, then measured alone: the cost resolved)"
        else:
            ran += f" ({blocks_text(self.iterations // 2, 'ABBA block')})"
        if self.resolved:
            return f"{'stopped after' if self.iterations < self.planned else 'ran'} {ran}: resolved"
        how = "its share of the budget ran out after" if self.budget else "ran"
        return f"{how} {ran}: " + "; ".join(self.unresolved) + " not resolved"

    def doc(self) -> StoppingDoc:
        """result.json's and run.json's record of it (passes.<pass>.stopping)."""
        return StoppingDoc.of(
            rule=RULE,
            resolved=self.resolved,
            iterations=self.iterations,
            unresolved=self.unresolved,
            budget_out=self.budget or None,
            clean_until=self.clean_until,
            text=self.text,
        )


def floor(wished: int, planned: int) -> int:
    """Measured iterations before the rule is asked: MIN_BLOCKS blocks, a collector's own wish, never past the
    plan; even (whole blocks)."""
    least = max(2 * MIN_BLOCKS, wished)
    return min(least + least % 2, planned)


def check(
    spans: LiveSpans,
    cost: PassCostFigure | None,
    planned: int,
    layers: bool,
    clean_until: int | None = None,
    sampling: SampleRate | None = None,
) -> PassStopping:
    """The rule on the pass's spans so far (updated by the caller) and its paired cost figure; `layers`: the pass's
    layer shares count; `clean_until`: where its clean iterations ended (PassStopping.clean_until); `sampling`: the
    rate of the pass's sampler, whose samples per ranked layer count."""
    unresolved = [] if cost is not None and cost.resolved else [_cost_words(cost)]
    forwards, self_ns = list(spans.forward_ms.values()), spans.self_ns_by_iteration()
    loose = loose_layers(forwards, self_ns) if layers else []
    unsampled = unsampled_layers(forwards, self_ns, sampling) if sampling is not None else []
    varying = spans.iterations >= 2 * FUTILE_BLOCKS and all(layer.past(planned) for layer in loose)
    cost_futile = cost is not None and spread_past_use(cost)
    futile = not unsampled and varying and (not unresolved or cost_futile) and bool(loose or cost_futile)
    if futile and cost_futile and cost is not None:
        unresolved = [f"the cost ({_spread_words(cost)})"]
    note = f"; {_varying_words(loose, planned)}" if futile and loose else ""
    shares = _layers_words([layer.name for layer in loose], "shares", note)
    if layers and not forwards:
        shares, futile = ["the layers' shares (no forward measured)"], False
    left = unresolved + shares + unsampled
    return PassStopping(not left, spans.iterations, planned, left, clean_until=clean_until, futile=futile)


def spread_past_use(cost: PassCostFigure) -> bool:
    """A paired cost of FUTILE_BLOCKS blocks or more whose quartiles lie more than FUTILE_IQR apart."""
    if cost.resolved or cost.blocks < FUTILE_BLOCKS or cost.q1 is None or cost.q3 is None:
        return False
    return cost.q3 - cost.q1 > FUTILE_IQR


def _spread_words(cost: PassCostFigure) -> str:
    assert cost.q1 is not None and cost.q3 is not None
    return (
        f"its {cost.blocks} ABBA blocks' ratios have quartiles {cost.q1:.3f}-{cost.q3:.3f}, more than "
        f"{FUTILE_IQR:.2f} apart: the cost varies that much from one forward to the next, which more blocks would "
        "measure, not narrow"
    )


def _cost_words(cost: PassCostFigure | None) -> str:
    if cost is None:
        return "the cost (no block measured)"
    return f"the cost ({cost.unresolved_why})"


@dataclass(frozen=True)
class LooseLayer:
    """A ranked layer whose self-time median is not yet within its margin."""

    name: str
    values: list[float]
    """Its self ns per measured iteration."""
    margin: float
    """Its margin, as a share of its median: LAYER_TOLERANCE, or LAYER_POINTS of the forward where wider."""

    def past(self, planned: int) -> bool:
        """Whether its plan would not resolve it either: the interval of `planned` iterations drawn like those so
        far (order_stats.projected_half_width) is still wider than its margin. Its time moves that much from one
        forward to the next (yolov7's model.0 at 640 on a 2-vCPU EPYC: 21-23 ms, or 31-37 ms in one forward of
        three, when its 52 MB output took fresh pages), which more iterations measure but do not narrow."""
        width = projected_half_width(self.values, max(planned, len(self.values)))
        return width is not None and width > self.margin

    def quartiles_ms(self) -> tuple[float, float]:
        q1, _, q3 = statistics.quantiles(self.values, n=4)
        return q1 / 1e6, q3 / 1e6


def loose_layers(forwards: list[float], self_ns: dict[str, list[float]]) -> list[LooseLayer]:
    """The ranked layers whose self-time median is not yet within the margin, from the forwards' ms and each
    layer's self ns per measured iteration (LiveSpans); [] without a forward (check says so)."""
    if not forwards:
        return []
    forward_ns = statistics.median(forwards) * 1e6
    loose = []
    for name, p50, values in _ranked(forward_ns, self_ns):
        margin = max(LAYER_TOLERANCE, LAYER_POINTS * forward_ns / p50)
        if (width := half_width(values)) is None or width > margin:
            loose.append(LooseLayer(name, values, margin))
    return loose


def _varying_words(loose: list[LooseLayer], planned: int) -> str:
    first = loose[0]
    q1, q3 = first.quartiles_ms()
    whose = "its" if len(loose) == 1 else f"the first's, {first.name}'s,"
    return (
        f"{whose} self time has quartiles {q1:.2f}-{q3:.2f} ms: it varies that much from one forward to the next, "
        f"which {planned} iterations would measure, not narrow to +-{first.margin:.0%}"
    )


def unsampled_layers(forwards: list[float], self_ns: dict[str, list[float]], rate: SampleRate) -> list[str]:
    """The ranked layers whose samples so far, as their self time in the pass's measured iterations and the
    sampler's rate expect them, fall short of MIN_LAYER_SAMPLES x LIVE_SAMPLES_MARGIN, as one phrase ([] when none);
    without a forward or a layer measured, the samples are not counted (the plan's bound stands)."""
    if not forwards or not self_ns:
        return ["the layers' samples (no layer measured)"]
    need = MIN_LAYER_SAMPLES * LIVE_SAMPLES_MARGIN
    ranked = _ranked(statistics.median(forwards) * 1e6, self_ns)
    expected = {name: rate.expected(sum(values)) for name, _, values in ranked}
    short = [name for name, count in expected.items() if count < need]
    fewest = min((expected[name] for name in short), default=0.0)
    note = f"; the fewest {fewest:.0f} of the {need:.0f} needed at {rate.hz:g} Hz x {rate.threads} threads"
    return _layers_words(short, "samples", note)


def _ranked(forward_ns: float, self_ns: dict[str, list[float]]) -> list[tuple[str, float, list[float]]]:
    """The layers the report ranks (the RANKED_LAYERS largest by median self time) at or above MIN_LAYER_SHARE of
    the forward, the largest first: name, median self ns and self ns per measured iteration."""
    medians = sorted(((statistics.median(v), name, v) for name, v in self_ns.items() if v), reverse=True)
    return [(name, p50, v) for p50, name, v in medians[:RANKED_LAYERS] if p50 >= MIN_LAYER_SHARE * forward_ns]


def _layers_words(names: list[str], what: str, note: str = "") -> list[str]:
    """'3 ranked layers' WHAT (a, b, c and 1 more NOTE)' ([] when none)."""
    if not names:
        return []
    more = len(names) - LAYERS_NAMED
    named = ", ".join(names[:LAYERS_NAMED]) + (f" and {more} more" if more > 0 else "")
    whose = "layers'" if len(names) > 1 else "layer's"
    return [f"{len(names)} ranked {whose} {what} ({named}{note})"]
