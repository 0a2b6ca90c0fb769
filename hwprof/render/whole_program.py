"""The report's section for a user's program that called no model: its whole run's kernels, Python functions and
lines, labelled as whole-process figures (hwprof.analysis.whole_program)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwprof.render.fmt import pct
from hwprof.render.tables import MISSING, Col, TableSpec

if TYPE_CHECKING:
    from hwprof.analysis.run_analysis import Analysis

TITLE = "the program's whole run (no model: whole-process figures, not per forward)"


def whole_program_spec(a: Analysis) -> TableSpec | None:
    view = a.whole_program
    if view is None:
        return None
    cols = [
        Col("source", "left"),
        Col("kernel, function or line", "left", max_width=56),
        Col("share"),
        Col("detail", "left", priority=1, max_width=40),
    ]
    rows = [[r.source, r.name, pct(r.share) if r.share is not None else MISSING, r.detail] for r in view.rows]
    notes = [f"no model: {view.reason}", *view.notes]
    if not rows:
        notes.append("no whole-process collector ran (kernels: perf_sampling, trace: pyspy, scalene)")
    return TableSpec(TITLE, cols if rows else [], rows, notes)
