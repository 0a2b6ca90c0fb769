"""A pass whose worker was launched, as the collect follows it (hwprof.session.pass_process): what finishing it needs,
and where it was launched beside the previous pass's close (hwprof.session.early_launch), when its turn came."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from hwprof.collectors.base import AttachedTool, Collector, PassContext
from hwprof.perf.neighbours import NeighbourWatch
from hwprof.session.child import Lines, Worker
from hwprof.session.pass_phases import PhaseClock
from hwprof.session.plan import PassPlan


@dataclass
class RunningPass:
    """A pass whose worker was launched: what finishing it needs."""

    plan: PassPlan
    ctx: PassContext
    proc: Worker
    started: float
    """Monotonic s at its launch."""
    steal_at_start: int | None
    """Host steal ns at its launch (at its turn, where it was launched early)."""
    collectors: list[Collector] = field(default_factory=list)
    log: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    """Its worker's log (stderr) file, open until the pass is followed to its end."""
    attached: dict[str, AttachedTool] = field(default_factory=dict)
    exited_at: float | None = None
    """Monotonic s when its exit was seen (None: not seen, it was stopped)."""
    turn: Path | None = None
    """Launched beside the previous pass's close: the file its worker waits for before its warm-up
    (hwprof.session.turn); None: launched when its turn came."""
    turn_at: float | None = None
    """Monotonic s when its turn came (its wall time counts from its warm-up's start, after it)."""
    lines: Lines | None = None
    """Its stdout's reader, started with it where it was launched before the collect followed it."""
    attach_error: str = ""
    """Why a tool attached at an early launch could not be ("": each could)."""
    watch: NeighbourWatch | None = None
    """Its watch on other work on the run's CPUs, from its launch (from its turn, where it was launched early)."""
    clock: PhaseClock = field(init=False)
    """When its progress lines of each phase came (passes.<name>.phases)."""

    def __post_init__(self) -> None:
        self.clock = PhaseClock(self.started)

    @property
    def since(self) -> float:
        """Where its wall time begins: its launch, or where it was launched early, its warm-up's start (its turn
        came and its build was over: what lay before is beside the previous pass, or between the two)."""
        if self.turn is None:
            return self.started
        warmup = self.clock.first.get("warmup")
        return warmup if warmup is not None else self.turn_at if self.turn_at is not None else self.started
