"""advise's race: every candidate gets its first paired blocks; one that is clearly out stops there, the others run
the plan's blocks. Out: its output check failed (a CHANGED OUTPUT row is never advice), or its spread (the quartiles
of its blocks' ratios, as `Speedup.resolved` reads them) lies wholly below the spread of the best row measured so
far. The rule is the worker's (hwprof.advisor.paired_worker), after its first blocks; the row says how far it ran."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hwprof.schema.codec import JsonObject

if TYPE_CHECKING:
    from hwprof.analysis.advice.speedup import Speedup
    from hwprof.analysis.advice.table import AdviceRow
    from hwprof.schema.advise_result import AdviseResult

FIRST_BLOCKS = 4
"""The blocks every candidate gets (the fewest whose quartiles a spread is read from), of the plan's 8."""
NOT_AGAIN = "not measured again as processes: its output check failed, so its speed is never advice"
"""Where the pairing guard fires on a row that left the race for its output: yolov7 at 640, three such rows took
28 s of processes each (of advise's 401 s) for a figure no verdict reads."""


def race_bar(rows: Sequence[AdviceRow]) -> JsonObject | None:
    """The bar a candidate measured next must reach: the best ranked row so far, its key and the low end of its
    spread; None before any row is ranked."""
    ranked = [r for r in rows if r.ranked and r.forward is not None]
    if not ranked:
        return None
    best = max(ranked, key=lambda r: r.forward.ratio if r.forward else 0.0)
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
