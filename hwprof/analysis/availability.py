"""Why a metric is missing from a run: the reason and fix, taken from run.json's collectors section.

A report never shows a zero for something that was not measured: it shows `unavailable: <reason>`
and, where there is one, the exact fix the collector gave.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hwprof.schema.run import RunDoc


AT_THE_END = "(why: not measured, at the end)"
"""Ends a table's note on a metric whose cause the report's "not measured" block says (Missing.note)."""


@dataclass(frozen=True)
class Missing:
    reason: str
    fix: str = ""
    head: str = ""
    """The reason's part that says what is missing, without the collector's cause ("cycles could not be counted
    (perf_events)" of "...: the kernel exposes no PMU for this event"); "" where the reason is all one."""

    def text(self) -> str:
        return f"unavailable: {self.reason}" + (f"; fix: {self.fix}" if self.fix else "")

    def short(self) -> str:
        """Without the fix: when the run header already gives the fix."""
        return f"unavailable: {self.reason}"

    def note(self) -> str:
        """A report table's note: what is missing, its cause left to the "not measured" block, which says it once
        (under every table a cause touched, it was said five times for a missing PMU)."""
        if not self.head:
            return self.short()
        return f"unavailable: {self.head} {AT_THE_END}"

    def to_dict(self) -> dict[str, str]:
        return {"status": "unavailable", "reason": self.reason, "fix": self.fix}


def collector_missing(
    run: RunDoc,
    collectors: Iterable[str],
    what: str,
    events: Iterable[str] = (),
    passes: Mapping[str, str] | None = None,
) -> Missing:
    """Why none of `collectors` gave `what`.

    `passes`: pass name -> why its figures are unavailable (RunData.missing_passes); a collector of such
    a pass gives that reason, whatever its own status says (a pass stopped mid-way, a folder lost).

    The first collector that is not "ok" gives its own reason and fix. A collector that ran
    but could not open the needed `events` (perf_events, papi) gives that event's reason. A
    collector that ran and still left no such figure says so plainly.
    """
    entries = run.collectors
    names = [n for n in collectors if n in entries]
    ran = [n for n in names if entries[n].ran]
    return (
        _lost_pass(run, names, passes or {})
        or _blocked_events(run, ran, list(events))
        or (Missing(f"{', '.join(ran)} ran but recorded no {what}") if ran else None)
        or _not_ok(run, names)
        or _absent(run, list(collectors))
    )


def _lost_pass(run: RunDoc, names: list[str], passes: Mapping[str, str]) -> Missing | None:
    """The first collector that ran in a pass whose figures are unavailable: the pass's reason."""
    for name in names:
        gone = passes.get(str(run.collectors[name].pass_name))
        if gone and run.collectors[name].ran:
            return Missing(f"{name}: {gone}", f"collect again: hwprof collect {rerun_hint(run)}".rstrip())
    return None


def _blocked_events(run: RunDoc, ran: list[str], wanted: list[str]) -> Missing | None:
    """The first collector that ran but could not open one of the `wanted` events: that event's reason."""
    for name in ran:
        summary = run.collectors[name].summary
        unavailable = summary.unavailable_events() if summary is not None else {}
        blocked = [e for e in wanted if e in unavailable]
        if blocked:
            first = unavailable[blocked[0]]
            head = f"{', '.join(blocked)} could not be counted ({name})"
            return Missing(f"{head}: {first.reason}", first.fix or "", head)
    return None


def _not_ok(run: RunDoc, names: list[str]) -> Missing | None:
    """The first collector that did not run (a skipped one last): its own reason and fix."""
    not_ok = sorted(names, key=lambda n: run.collectors[n].status == "skipped")
    if not not_ok:
        return None
    entry = run.collectors[not_ok[0]]
    status = entry.status
    reason = str(entry.reason or status)
    head = f"{not_ok[0]} {status}" if status != "unavailable" else not_ok[0]
    fix = str(entry.fix if entry.fix is not None else "")
    return Missing(f"{head}: {reason}", fix, head if status != "skipped" else "")  # skipped: not in the block


def _absent(run: RunDoc, listed: list[str]) -> Missing:
    """None of `listed` is in the run: stopped before they ran, or not collected at all."""
    if run.status in ("interrupted", "running"):
        return Missing(
            f"the run was {run.status} before {' or '.join(listed)} ran",
            f"collect again: hwprof collect {rerun_hint(run)}".rstrip(),
        )
    return Missing(
        f"no {' or '.join(listed)} collector in this run",
        f"collect again with {' or '.join(listed)} available (see hwprof doctor)",
    )


def rerun_hint(run: RunDoc) -> str:
    """The --model and --out to collect a run again with (empty when run.json does not say)."""
    model = run.config.model
    return f"--model {model}" if model else ""
