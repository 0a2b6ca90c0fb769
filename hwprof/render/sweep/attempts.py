"""A cluster sweep's attempts in its table: the count where a point ran more than once, and one note per
such point with each attempt's node, host, start and end, and outcome (SweepRow.attempts)."""

from __future__ import annotations

from hwprof.analysis.sweep.rows import SweepRow
from hwprof.render.fmt import clock
from hwprof.rundir.names import SWEEP_JSON
from hwprof.schema.codec import JsonObject
from hwprof.schema.sweep_attempt import SweepAttempt


def attempt_text(attempt: JsonObject) -> str:
    """ "node 1c4f331c (vm) 17:40:16-17:40:25 lost: its node left the cluster"."""
    a = SweepAttempt.from_json(attempt, SWEEP_JSON, "attempts.")
    end = clock(a.end) if a.end is not None else "..."
    node = f"node {(a.node_id or '')[:8]} ({a.host or 'unknown host'})"
    return f"{node} {clock(a.start)}-{end} {a.outcome or ''}"


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
