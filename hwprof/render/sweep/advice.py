"""`sweep --advise` in the sweep's views: each point's advice cell and notes, and the table "which change wins,
per kind of machine" (hwprof.analysis.sweep.advice), for the terminal (fits 100 columns) and markdown."""

from __future__ import annotations

from collections.abc import Sequence

from hwprof.analysis.advice.speedup import METHOD_TEXT
from hwprof.analysis.paired_cost import PASS_LEVEL
from hwprof.analysis.sweep.advice import (
    ADVISED,
    RANKED,
    SWEEP_ADVICE_CSV,
    UNREADABLE,
    KindAdvice,
    advice_summary,
)
from hwprof.analysis.sweep.rows import SweepRow
from hwprof.render.tables import MISSING, Col, TableSpec

METHOD_SHORT = {PASS_LEVEL: "estimate"}
"""The method in a cell: a pass-level figure is an estimate, and says so."""


def speedup_text(ratio: float) -> str:
    return f"{ratio:.2f}x"


def advice_cell(row: SweepRow) -> str:
    """The point's best change: key, forward speed-up (spread, method); or why there is none, short."""
    if row.advice_status == RANKED and row.advice_forward is not None:
        method = METHOD_SHORT.get(row.advice_method, row.advice_method)
        return f"{row.advice} {speedup_text(row.advice_forward)} ({row.advice_spread}, {method})"
    if row.advice_status == UNREADABLE:
        return "advice.json unreadable (see notes)"
    return row.advice_status or MISSING


def advice_notes(rows: Sequence[SweepRow]) -> list[str]:
    """What the advice column means, and each point's reason for having no advice, one line each."""
    notes = [
        "advice = the point's top ranked change (its advice.json): forward speed-up baseline/variant "
        "(spread, method); ranked = measured faster, detections within tolerance of fp32"
    ]
    for r in rows:
        if r.advice_status not in ADVISED:
            notes.append(f"{r.name}: {r.advice_status}: {r.advice_note}")
    if any(r.advice_status not in ADVISED and r.status in ("complete", "reused") for r in rows):
        notes.append("a finished point without advice: `hwprof advise RUN_DIR` advises it")
    return notes


def _kind_rows(kind: KindAdvice) -> list[list[str]]:
    label = f"{kind.host_kind} ({kind.advised} of {kind.points} points advised)"
    if not kind.changes:
        why = "no change measured faster at any point" if kind.advised else "no point's advice was read"
        return [[label, why, MISSING, MISSING, MISSING]]
    return [
        [
            label if i == 0 else "",
            c.key,
            f"{c.wins} of {kind.advised}",
            str(c.ranked_at),
            speedup_text(c.median_forward)
            + ("" if c.ranked_at == 1 else f" ({speedup_text(c.min_forward)}-{speedup_text(c.max_forward)})"),
        ]
        for i, c in enumerate(kind.changes)
    ]


def advice_summary_spec(rows: Sequence[SweepRow]) -> TableSpec:
    summary = advice_summary(rows)
    cols = [
        Col("kind of machine", "left", max_width=36, wrap=True),
        Col("change", "left", max_width=22, wrap=True),
        Col("won at"),
        Col("ranked at"),
        Col("median (range)"),
    ]
    notes = [
        "won at = points of the kind where the change was the top ranked row; ranked at = points where it was "
        "measured faster with its detections within tolerance; median (range) = of its forward speed-up "
        "(baseline / variant) over those points",
        "speed-ups compare only within one kind of machine; the winner of each kind comes first",
    ]
    methods = sorted({r.advice_method for r in rows if r.advice_method})
    notes += [f"method {METHOD_TEXT.get(m, m)}" for m in methods]
    for k in summary:
        if k.none_faster:
            notes.append(f"{k.host_kind}: no change measured faster at {k.none_faster} of {k.advised} points")
    return TableSpec(
        "which change wins, per kind of machine",
        cols,
        [line for k in summary for line in _kind_rows(k)],
        notes,
        more=f"see {SWEEP_ADVICE_CSV}",
    )
