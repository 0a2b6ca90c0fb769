"""advise's race: every candidate gets its first paired blocks; one that is clearly out stops there, the others run
the plan's blocks, and the contenders among the first rows get more until their order is resolved.

Out: its output check failed (a CHANGED OUTPUT row is never advice), or its spread (the quartiles of its blocks'
ratios, as `Speedup.resolved` reads them) lies wholly below the spread of the best row measured so far. The rule is
the worker's (hwprof.advisor.paired_worker), after its first blocks.

Then the order of the first SETTLE_TOP ranked rows (and the next one, which could take the third place): two
neighbours are in a resolved order when the 95% interval of the first one's median speed-up (the order statistics
of its blocks' ratios: analysis.order_stats) lies wholly above the second's. A paired row in a neighbourly pair
that is not gets SETTLE_BLOCKS more blocks in a paired process of its own, its blocks pooled with its earlier ones
(the same statistics over all of them: speedup.pooled_speedup), for at most SETTLE_ROUNDS such processes and within
SETTLE_SHARE of the time the candidates took (hwprof.advisor.runner). A row measured as processes has no blocks to
add (its figure stands as it is). Each row says how far it ran (AdviceRow.race)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING

from hwprof.analysis.order_stats import median_interval
from hwprof.schema.codec import JsonObject

if TYPE_CHECKING:
    from hwprof.analysis.advice.speedup import Speedup
    from hwprof.analysis.advice.table import AdviceRow
    from hwprof.schema.advise_result import AdviseResult

FIRST_BLOCKS = 4
"""The blocks every candidate gets (the fewest whose quartiles a spread is read from), of the plan's 8."""
SETTLE_TOP = 3
"""The first rows whose order the race settles (with the next one, which could take the last place)."""
SETTLE_BLOCKS = 8
"""The blocks a contender gets in each more paired process."""
SETTLE_ROUNDS = 2
"""The most paired processes a contender gets after its first."""
SETTLE_SHARE = 0.25
"""The settling's processes take at most this share of the time the candidates took (advise's budget for them)."""
NOT_AGAIN = "not measured again as processes: its output check failed, so its speed is never advice"
"""Where the pairing guard fires on a row that left the race for its output: yolov7 at 640, three such rows took
28 s of processes each (of advise's 401 s) for a figure no verdict reads."""


def race_bar(rows: Sequence[AdviceRow]) -> JsonObject | None:
    """The bar a candidate measured next must reach: the best ranked row so far, its key and the low end of its
    spread; None before any row is ranked."""
    ranked = [r for r in rows if r.ranked and r.forward is not None]
    if not ranked:
        return None
    best = max(ranked, key=_ratio)
    assert best.forward is not None
    return {"key": best.key, "low": best.forward.interval[0], "spread": best.forward.spread_text()}


def out_of_race(speedup: Speedup | None, output_broken: bool, bar: JsonObject | None) -> str:
    """Why a candidate stops after its first blocks, or "" where it runs on."""
    if output_broken:
        return "its output check failed (never ranked)"
    if speedup is None or bar is None:
        return ""
    low = bar.get("low")
    high = speedup.interval[1]
    if isinstance(low, int | float) and high < low:
        return f"its spread {speedup.spread_text()} lies wholly below that of {bar.get('key')} ({bar.get('spread')})"
    return ""


def output_failed(paired: AdviseResult | None) -> bool:
    """The paired worker's output check failed (the row is CHANGED OUTPUT, never ranked)."""
    from hwprof.analysis.advice.output import OutputCheck

    if paired is None or paired.output is None:
        return False
    return not OutputCheck.from_dict(paired.output).within_tolerance


def left_race(stopped: str) -> str:
    """A row's race text from its worker's `stopped` ('after 4 of 8 blocks: why')."""
    return f"left the race {stopped}" if stopped else ""


def race_text(race: str) -> str:
    """A row's race text as the table says it (an advice.json of 2026-11-29 or before holds the worker's words)."""
    return left_race(race) if race.startswith("after ") else race


@dataclass(frozen=True)
class Order:
    """Whether the first rows' order is resolved: the rows (keys, fastest first), their medians' intervals, the
    neighbours whose intervals overlap, and which rows more blocks could settle."""

    keys: list[str]
    bands: dict[str, tuple[float, float]]
    open_pairs: list[tuple[str, str]] = field(default_factory=list)
    extend: list[str] = field(default_factory=list)

    @property
    def settled(self) -> bool:
        return not self.open_pairs

    def text(self) -> str:
        """The order in words, with the intervals, and what is not resolved."""
        if len(self.keys) < 2:
            return "the first rows' order: fewer than two ranked rows, nothing to order"
        bands = ", ".join(f"{k} {self.bands[k][0]:.2f}-{self.bands[k][1]:.2f}" for k in self.keys)
        if self.settled:
            return (
                f"the first rows' order is resolved: each one's median speed-up lies above the next's at 95% "
                f"({bands}; order statistics of the blocks' ratios, a process-level row's spread)"
            )
        pairs = "; ".join(f"{a} and {b}" for a, b in self.open_pairs)
        return (
            f"the first rows' order is not resolved: the 95% intervals of their median speed-ups overlap for "
            f"{pairs} ({bands}); their rank between them is not a verdict"
        )


def top_order(ordered: Sequence[AdviceRow], ratios: Mapping[str, list[float]], extendable: set[str]) -> Order:
    """The order of the first SETTLE_TOP ranked rows and the next one, as the table ranks them (`ordered`:
    Advice.ordered()). `ratios`: a paired row's blocks' ratios (all its processes'); a row without them is held to
    its spread; `extendable`: the rows more blocks may be given to."""
    first = [r for r in ordered if r.ranked and r.forward is not None][: SETTLE_TOP + 1]
    bands = {r.key: _band(r, ratios.get(r.key)) for r in first}
    open_pairs = [(a.key, b.key) for a, b in pairwise(first) if bands[a.key][0] <= bands[b.key][1]]
    extend: list[str] = []
    for pair in open_pairs:
        extend += [k for k in pair if k in extendable and k not in extend]
    return Order([r.key for r in first], bands, open_pairs, extend)


def _ratio(row: AdviceRow) -> float:
    return row.forward.ratio if row.forward is not None else 0.0


def _band(row: AdviceRow, ratios: list[float] | None) -> tuple[float, float]:
    """The 95% interval of the row's median speed-up from its blocks' ratios; its spread where it has too few
    blocks for one, or none (a process-level figure)."""
    interval = median_interval(ratios) if ratios else None
    if interval is not None:
        return interval
    assert row.forward is not None
    return row.forward.interval


def settled_text(earlier: str, first: int, blocks: int, processes: int) -> str:
    """A contender's race text once more blocks were pooled into its figure: what its first process ran
    (`earlier`: its race text then, "" where it ran the plan's `first` blocks), then the blocks added."""
    more = processes - 1
    head = earlier or f"ran the plan's {first} blocks"
    return (
        f"{head}; then {blocks - first} more in {more} paired process{'es' * (more != 1)} of its own to settle the "
        f"order of the first rows ({blocks} blocks in all, the same statistics over all of them)"
    )
