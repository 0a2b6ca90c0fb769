"""A cluster sweep's attempts in its table: the count where a point ran more than once, and one note per
such point with each attempt's node, host, start and end, and outcome (SweepRow.attempts)."""

from __future__ import annotations

from typing import Any

from hwprof.analysis.sweep_rows import SweepRow
from hwprof.render.fmt import clock


def attempt_text(attempt: dict[str, Any]) -> str:
    """ "node 1c4f331c (vm) 17:40:16-17:40:25 lost: its node left the cluster"."""
    end = clock(attempt["end"]) if attempt.get("end") is not None else "..."
    node = f"node {str(attempt.get('node_id') or '')[:8]} ({attempt.get('host') or 'unknown host'})"
    return f"{node} {clock(attempt['start'])}-{end} {attempt.get('outcome', '')}"


def retried(rows: list[SweepRow]) -> bool:
    return any(len(r.attempts) > 1 for r in rows)


def attempts_cell(row: SweepRow) -> str:
    return str(len(row.attempts) or 1)


def attempts_notes(rows: list[SweepRow]) -> list[str]:
    """One note per point that ran more than once."""
    return [
        f"{r.name}: {len(r.attempts)} attempts: " + "; ".join(attempt_text(a) for a in r.attempts)
        for r in rows
        if len(r.attempts) > 1
    ]
