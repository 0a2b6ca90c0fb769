"""run.json's "passes": one pass (child process) of the collect as the run records it: how it ended, what it cost
against the clean timing pass, the other work on its CPUs, where its wall time went, and how the timing pass decided
it had measured enough. RunDoc (hwprof.schema.run) holds one PassDoc per pass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from hwprof.schema.bounds import Count, NonNegative, Share
from hwprof.schema.check import UNUSABLE_PASS_STATUSES
from hwprof.schema.codec import Record
from hwprof.schema.frames import FramesDoc
from hwprof.schema.inputs import InputsDoc
from hwprof.schema.program import ProgramOutcome


@dataclass(kw_only=True)
class PassCostDoc(Record):
    """A pass's own cost as run.json records it (hwprof.analysis.paired_cost.PassCostFigure as written)."""

    method: str | None = None
    ratio: NonNegative | None = None
    low: NonNegative | None = None
    high: NonNegative | None = None
    q1: NonNegative | None = None
    q3: NonNegative | None = None
    blocks: Count | None = None
    block_ratios: list[Any] | None = None
    forward_on_ms: NonNegative | None = None
    forward_off_ms: NonNegative | None = None
    covers: list[Any] | None = None
    always_on: list[Any] | None = None
    added_blocks: Count | None = None
    extension: str | None = None
    shapes: str | None = None
    """The ABBA blocks that mixed input shapes (PassCostFigure.shapes)."""
    method_text: str | None = None
    resolved: bool | None = None
    """As written: a reader works it out again from the blocks (PassCostFigure.resolved; a run from before
    paired_cost.MIN_BLOCKS may say true of 1 block)."""
    unresolved_why: str | None = None
    """Why the cost is not resolved (PassCostFigure.unresolved_why), only where it is not."""


@dataclass(kw_only=True)
class NeighboursDoc(Record):
    """Other work on the run's CPUs during one pass (hwprof.perf.neighbours.NeighbourLoad as written), or why it
    could not be measured (status "unavailable", reason, fix)."""

    wall_s: NonNegative | None = None
    cpus: list[Any] | None = None
    other_cpu_s: NonNegative | None = None
    share: Share | None = None
    """other_cpu_s / (wall_s x len(cpus)): the share of the run's CPUs' capacity others took."""
    steal_s: NonNegative | None = None
    own_cpu_s: NonNegative | None = None
    top: list[Any] | None = None
    scans: Count | None = None
    method: str | None = None
    status: str | None = None
    reason: str | None = None
    fix: str | None = None


@dataclass(kw_only=True)
class PassPhasesDoc(Record):
    """Where a pass's wall time went (hwprof.session.pass_phases.STRETCHES), in seconds; a stretch the worker
    never reached is absent."""

    start_s: NonNegative | None = None
    build_s: NonNegative | None = None
    wait_s: NonNegative | None = None
    """A pass launched beside the previous pass's close (hwprof.session.turn): from its build's end until that pass
    had ended and its own warm-up could begin. Its start, build and wait lie before its wall_s, beside that pass."""
    warmup_s: NonNegative | None = None
    measure_s: NonNegative | None = None
    finish_s: NonNegative | None = None
    read_s: NonNegative | None = None


@dataclass(kw_only=True)
class StoppingDoc(Record):
    """How a pass decided it had measured enough: its rule (the timing pass's, hwprof.session.timing_stop; a paired
    pass's, hwprof.session.pass_stop), whether it was met before the planned iterations ran out, the timing pass's
    p50 half-widths (shares of the p50), and what a paired pass left unresolved."""

    rule: str | None = None
    resolved: bool | None = None
    iterations: Count | None = None
    forward_half_width: NonNegative | None = None
    iteration_half_width: NonNegative | None = None
    unresolved: list[str] | None = None
    budget_out: bool | None = None
    """True where the pass's share of --budget ended its measuring (hwprof.session.budget)."""
    clean_until: Count | None = None
    """A paired pass: the measured iterations when its clean ones ended, its cost resolved (hwprof.session.pass_stop);
    absent where clean ones ran beside every measured one."""
    text: str | None = None
    floor: Count | None = None
    """The fewest measured iterations its rule asked for before it could stop (its minimum: the timing pass's six, a
    paired pass's 4 ABBA blocks or what a collector of it needs, never past the plan); the measured iterations past
    it are what the figures' spread on this host took (absent in older runs and with --iters)."""
    warmup: Count | None = None
    """The warm-up iterations it ran, where they ended once warm (hwprof.session.warmup; absent with --warmup or
    --iters, and in older runs)."""
    warmup_text: str | None = None


@dataclass(kw_only=True)
class PassDoc(Record):
    """One pass (child process) of the collect: how it ended, and what it cost."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("status",)
    status: str = ""
    returncode: int | None = None
    wall_s: NonNegative | None = None
    pid: Count | None = None
    error: str | None = None
    collectors: list[Any] | None = None
    log: str | None = None
    host_steal_share: Share | None = None
    neighbours: NeighboursDoc | None = None
    forward_p50_ms: NonNegative | None = None
    overhead_vs_timing: NonNegative | None = None
    overhead: PassCostDoc | None = None
    overhead_pass_level: PassCostDoc | None = None
    lingering: list[Any] | None = None
    """Processes the pass's worker left behind, which the session stopped (name, pid, state, stopped_by, ...)."""
    program: ProgramOutcome | None = None
    """A program's pass: the module taken as the model and why, the calls seen, how the program ended."""
    frames: FramesDoc | None = None
    """A video input's frames read, and the annotated frames written (absent: images, no --annotate)."""
    inputs: InputsDoc | None = None
    """The input shapes its forwards were given, with their calls (absent in older runs)."""
    worker_start: str | None = None
    """How its worker began: "forked" from the collect's zygote (its imports shared, hwprof.session.zygote) or
    "started" as a new `python -P -m hwprof.session.worker` (absent in older runs)."""
    phases: PassPhasesDoc | None = None
    """Where its wall time went: start-up, build, warm-up, measuring, finish, reading (absent in older runs)."""
    stopping: StoppingDoc | None = None
    """A pass without --iters: how its stopping rule ended it (absent otherwise, and in older runs)."""

    @property
    def finished(self) -> bool:
        """False for a pass that was stopped (Ctrl-C, a lost session) before it finished."""
        return self.status not in UNUSABLE_PASS_STATUSES
