"""--budget: the time a collect's passes share (issue 66).

The collect gives each pass, as it starts, an even share of what is left of the budget among the passes left (a
pass that ends early leaves its rest to those after it), less FINISH_SHARE kept for the run's own finish (the
trace and the report). The share reaches the worker as a deadline on CLOCK_MONOTONIC, which every process of the
machine reads alike (DEADLINE_ENV); the worker stops measuring before the next block (or iteration) that would end
past it, at the pace of the last, once it has measured one, and says which of its figures that left unresolved
(hwprof.session.pass_stop, timing_stop). Start-up, build and warm-up count against the pass's share: they are its
time too. A budget cuts measuring only: a pass's set-up and its collectors' closing run whatever is left."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

DEADLINE_ENV = "HWPROF_PASS_DEADLINE"
"""time.monotonic() seconds by which the pass's worker ends its measuring (absent: no budget)."""
FINISH_SHARE = 0.1
"""Of the budget, kept for the collect's finish (the trace's build, the report): about that at yolov7 640."""


@dataclass(frozen=True)
class Budget:
    total_s: float
    started: float
    """time.monotonic() at the collect's start."""

    def deadline(self, passes_left: int, now: float | None = None) -> float:
        """The deadline of the pass starting now, `passes_left` of them counting it."""
        now = time.monotonic() if now is None else now
        left = self.total_s * (1 - FINISH_SHARE) - (now - self.started)
        return now + max(left, 0.0) / max(passes_left, 1)

    def env(self, passes_left: int) -> dict[str, str]:
        return {DEADLINE_ENV: repr(self.deadline(passes_left))}


def pass_deadline() -> float | None:
    """The worker's deadline (DEADLINE_ENV), None without a budget or with a value that is not a time."""
    try:
        return float(os.environ[DEADLINE_ENV])
    except (KeyError, ValueError):
        return None


def out_of_time(deadline: float | None, pace_s: float, now: float | None = None) -> bool:
    """Whether the next block (or iteration), at the last one's pace, would end past the deadline."""
    if deadline is None:
        return False
    return (time.monotonic() if now is None else now) + pace_s > deadline
