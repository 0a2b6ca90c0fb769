"""Progress bars fed by the JSON progress lines of hwprof's children (collect's passes, advise's workers)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from hwprof.session.worker_io import ProgressEvent

COLLECT = "collect"
"""The collect's own line (hwprof.session.collection: passes done, the time expected for the others)."""


class PassProgress:
    """Rich progress bars fed by the children's JSON progress lines: one per pass (collect), or per candidate and
    layers collect (advise, label "advise")."""

    def __init__(self, progress: Progress, label: str = "pass") -> None:
        self.progress = progress
        self.label = label
        self.tasks: dict[str, TaskID] = {}

    def __call__(self, name: str, event: ProgressEvent) -> None:
        """A pass's event; `name` "collect": the passes done and the time the others are expected to take."""
        label = "" if name == COLLECT else f"{self.label} "
        if name not in self.tasks:
            self.tasks[name] = self.progress.add_task(f"{label}{name}", total=None)
        task = self.tasks[name]
        if event.total is not None and event.done is not None:
            phase = event.phase
            self.progress.update(
                task,
                total=event.total if phase != "build" else None,
                completed=event.done if phase != "build" else 0,
                description=f"{label}{name}: {phase}",
            )


def progress_bars(console: Console) -> Progress:
    """The bars of a collect's passes and an advise's candidates: name and phase, bar, done/total, time taken and the
    time left at the pass's pace (its total is what its stopping rule expects: hwprof.session.pass_runner)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )
