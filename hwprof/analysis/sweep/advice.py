"""Advice in a sweep (`hwprof sweep --advise`): each point's best measured change, read from the advice.json
its collect wrote, and per kind of machine which change wins.

A point's advice is the top row of its Advice.ordered() when that row is ranked (measured faster, output
within tolerance); otherwise the reason there is none, in one line: nothing was measured faster, the advice
was not run (no advice.json), every candidate failed, or advice.json could not be read. The summary counts,
per kind of machine (hwprof.core.host_kinds, from each point's run.json host), at how many points each change was
the top ranked row, and the median of its forward speed-up over the points where it was ranked: a speed-up
is only comparable between points of one kind, so kinds are never pooled.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hwprof.analysis.advice.table import ADVICE_FILE, CHANGED_OUTPUT, MEASURED, load_advice
from hwprof.core.csvtext import CsvRow
from hwprof.rundir.names import SWEEP_ADVICE_CSV as SWEEP_ADVICE_CSV_NAME

ADVISE_FLAG = "--advise"
SWEEP_ADVICE_CSV = SWEEP_ADVICE_CSV_NAME
NO_HOST = "host not recorded"

RANKED = "ranked"
NONE_FASTER = "no change measured faster"
NOT_RUN = "advice not run"
FAILED = "advice failed"
UNREADABLE = "advice unreadable"
ADVISED = (RANKED, NONE_FASTER)
"""The statuses of a point whose advice was read and measured something."""


class AdvisedRow(Protocol):
    """The advice columns of a sweep row (hwprof.analysis.sweep.rows.SweepRow, which imports this module)."""

    host_kind: str
    advice: str
    advice_forward: float | None
    advice_spread: str
    advice_method: str
    advice_status: str
    advice_note: str
    advice_ranked: dict[str, float]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def set_advice(row: AdvisedRow, run_dir: Path) -> None:
    """The row's advice columns from the run directory's advice.json (or the reason it has none)."""
    advice, why = load_advice(run_dir)
    row.advice_note = ""
    if advice is None:
        if why:
            row.advice_status, row.advice_note = UNREADABLE, _one_line(why)
        else:
            row.advice_status, row.advice_note = NOT_RUN, f"no {ADVICE_FILE} in the point's run directory"
        return
    ordered = advice.ordered()
    row.advice_ranked = {r.key: r.forward.ratio for r in ordered if r.ranked and r.forward is not None}
    top = ordered[0] if ordered else None
    if top is not None and top.ranked and top.forward is not None:
        row.advice_status, row.advice = RANKED, top.key
        row.advice_forward, row.advice_spread = top.forward.ratio, top.forward.spread_text()
        row.advice_method = top.forward.method
        return
    measured = [r for r in ordered if r.status in (MEASURED, CHANGED_OUTPUT)]
    if measured:
        row.advice_status = NONE_FASTER
        row.advice_note = f"{len(measured)} changes measured, none faster with its output within tolerance"
        return
    row.advice_status = FAILED
    first = next((r for r in ordered if r.reason), None)
    why = f" (first: {first.key}: {_one_line(first.reason)})" if first else ""
    row.advice_note = f"none of {len(ordered)} candidates was measured: each failed or was not run{why}"


@dataclass
class ChangeWins:
    """One change at the points of one kind of machine."""

    key: str
    wins: int
    """Points where it was the top ranked row."""
    ranked_at: int
    """Points where it was ranked (measured faster, output within tolerance)."""
    median_forward: float
    """Median of its forward speed-up over those points."""
    min_forward: float
    max_forward: float


@dataclass
class KindAdvice:
    host_kind: str
    points: int
    advised: int
    """Points whose advice was read and measured something (the rest: see each point's reason)."""
    none_faster: int
    """Advised points where no change was measured faster."""
    changes: list[ChangeWins] = field(default_factory=list)
    """The winner first: most wins, then the larger median speed-up."""

    @property
    def winner(self) -> str:
        return self.changes[0].key if self.changes and self.changes[0].wins else ""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "winner": self.winner}


def advice_summary(rows: Sequence[AdvisedRow]) -> list[KindAdvice]:
    """Per kind of machine (in order of its first point): which change wins, from the rows' advice columns."""
    kinds: dict[str, list[AdvisedRow]] = {}
    for r in rows:
        kinds.setdefault(r.host_kind or NO_HOST, []).append(r)
    out = []
    for kind, mine in kinds.items():
        advised = [r for r in mine if r.advice_status in ADVISED]
        speedups: dict[str, list[float]] = {}
        for r in advised:
            for key, ratio in r.advice_ranked.items():
                speedups.setdefault(key, []).append(ratio)
        changes = [
            ChangeWins(k, sum(r.advice == k for r in advised), len(v), statistics.median(v), min(v), max(v))
            for k, v in speedups.items()
        ]
        changes.sort(key=lambda c: (-c.wins, -c.median_forward, c.key))
        none_faster = sum(r.advice_status == NONE_FASTER for r in advised)
        out.append(KindAdvice(kind, len(mine), len(advised), none_faster, changes))
    return out


def summary_csv_rows(summary: Sequence[KindAdvice]) -> list[CsvRow]:
    """sweep_advice.csv: one line per (kind, change), and one per kind where no change was ranked."""
    lines: list[CsvRow] = []
    for k in summary:
        base: CsvRow = {"host_kind": k.host_kind, "points": k.points, "points_advised": k.advised}
        for c in k.changes:
            lines.append({**base, **asdict(c), "winner": c.key == k.winner, "note": ""})
        if not k.changes:
            note = NONE_FASTER + " at any point" if k.advised else "no point's advice was read"
            lines.append({**base, "key": "", "winner": False, "note": note})
    return lines


SUMMARY_CSV_FIELDS = (
    "host_kind",
    "key",
    "winner",
    "wins",
    "ranked_at",
    "median_forward",
    "min_forward",
    "max_forward",
    "points_advised",
    "points",
    "note",
)
