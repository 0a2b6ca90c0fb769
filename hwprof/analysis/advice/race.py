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

FIRST_BLOCKS = 4
"""The blocks every candidate gets (the fewest whose quartiles a spread is read from), of the plan's 8."""


def race_bar(rows: Sequence[AdviceRow]) -> JsonObject | None:
    """The bar a candidate measured next must reach: the best ranked row so far, its key and the low end of its
    spread; None before any row is ranked."""
    ranked = [r for r in rows if r.ranked and r.forward is not None]
    if not ranked:
        return None
    best = max(ranked, key=lambda r: r.forward.ratio if r.forward else 0.0)
    assert best.forward is not None
    return {"key": best.key, "low": best.forward.interval[0], "spread": best.forward.spread_text()}


def out_of_race(speedup: Speedup | None, output_ok: bool | None, bar: JsonObject | None) -> str:
    """Why a candidate stops after its first blocks, or "" where it runs on."""
    if output_ok is False:
        return "its output check failed (never ranked)"
    if speedup is None or bar is None:
        return ""
    low = bar.get("low")
    high = speedup.interval[1]
    if isinstance(low, int | float) and high < low:
        return f"its spread {speedup.spread_text()} lies wholly below that of {bar.get('key')} ({bar.get('spread')})"
    return ""
