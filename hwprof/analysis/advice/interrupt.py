"""What an interrupted `hwprof advise` says: which candidates finished, which a stop signal cut (and where), and
which never started; each never-started one keeps a row of its own in advice.json, so that the file and the table
name every candidate planned."""

from __future__ import annotations

from collections.abc import Sequence

from hwprof.analysis.advice.candidate import Candidate
from hwprof.analysis.advice.table import FAILED, NOT_RUN, AdviceRow

INTERRUPTED = "interrupted"
"""The reason of a row whose worker a stop signal cut (followed by where, for a program: " at 13 of 45 calls")."""
NOT_STARTED = "not started: advise was interrupted before it"


def cut(row: AdviceRow) -> bool:
    """A row whose worker a stop signal cut."""
    return row.status == FAILED and row.reason.startswith(INTERRUPTED)


def interrupted_rows(runnable: Sequence[Candidate], rows: Sequence[AdviceRow]) -> list[AdviceRow]:
    """A not-run row for each runnable candidate with no row yet (the stop came before it)."""
    have = {r.key for r in rows}
    return [
        AdviceRow(c.key, c.change, c.how, c.finding, status=NOT_RUN, reason=NOT_STARTED)
        for c in runnable
        if c.key not in have
    ]


def interrupted_note(signal: str, runnable: Sequence[Candidate], rows: Sequence[AdviceRow]) -> str:
    """One line: the runnable candidates that finished (measured, or failed by themselves), cut, or not started."""
    keys = {c.key for c in runnable}
    mine = [r for r in rows if r.key in keys]
    finished = [r.key for r in mine if not cut(r) and r.reason != NOT_STARTED and r.status != NOT_RUN]
    stopped = [f"{r.key} ({r.reason})" for r in mine if cut(r)]
    never = [r.key for r in mine if r.status == NOT_RUN and r.reason == NOT_STARTED]
    parts = [f"{len(finished)} of {len(keys)} candidates finished ({', '.join(finished) or 'none'})"]
    if stopped:
        parts.append(f"cut: {', '.join(stopped)}")
    if never:
        parts.append(f"not started: {', '.join(never)}")
    return f"interrupted by {signal}: " + "; ".join(parts)
