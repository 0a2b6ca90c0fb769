"""How a pass ended, as the session sees it once its worker has exited: the status (the session's, the
worker's result.json, the exit code), and a result for every collector of the pass, whether the worker or
an attached tool gave one or not. run.json's passes and collectors sections are made from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hwprof.collectors.base import Collector, CollectorResult
from hwprof.perf.neighbours import NeighbourLoad
from hwprof.rundir.names import RESULT_JSON
from hwprof.schema.frames import FramesDoc
from hwprof.schema.inputs import InputsDoc
from hwprof.schema.pass_files import PassResult, RuntimeFile
from hwprof.schema.program import ProgramOutcome
from hwprof.schema.run_passes import StoppingDoc
from hwprof.session import child


@dataclass
class PassOutcome:
    name: str
    status: str
    returncode: int | None
    wall_s: float
    pid: int
    error: str = ""
    results: dict[str, CollectorResult] = field(default_factory=dict)
    host_steal_share: float | None = None
    """Hypervisor steal over the pass as a share of all CPUs' time: how much a noisy neighbour took."""
    runtime: RuntimeFile | None = None
    """The worker's runtime info (its result.json's, as runtime.json holds it): runtime, executed precision,
    output difference, clock."""
    lingering: list[child.Lingering] = field(default_factory=list)
    """Processes left in the worker's session after it exited, which the session stopped."""
    neighbours: NeighbourLoad | None = None
    """Other processes' CPU time on the run's CPUs during the pass (None: /proc could not say)."""
    program: ProgramOutcome | None = None
    """A program's pass: the model its worker found and how the program ended."""
    frames: FramesDoc | None = None
    """A video input's frames read, and the annotated frames written."""
    inputs: InputsDoc | None = None
    """The input shapes the pass's forwards were given, with their calls."""
    limited: bool = False
    """Its worker could not start a thread or process (its error names the limit): the collect stops there."""
    forked: bool = False
    """Its worker was forked from the collect's zygote (else started as a new process)."""
    stopping: StoppingDoc | None = None
    """The timing pass's stopping rule, where it applied (its result.json's)."""
    phases: dict[str, float] = field(default_factory=dict)
    """Where its wall time went, stretch by stretch (hwprof.session.pass_phases)."""


def worker_results(worker: PassResult) -> dict[str, CollectorResult]:
    """Each collector's result as the worker's result.json gives it (its summary typed as the entry's)."""
    return {name: CollectorResult.of_entry(entry) for name, entry in worker.collectors.items()}


def pass_status(status: str, error: str, worker: PassResult, returncode: int, log: Path) -> tuple[str, str]:
    """The pass's (status, error): the session's own (time-out, stop signal) first, then the worker's, then
    its exit code with the reason its log gives."""
    if status != "ok":
        return status, error
    if worker.status not in (None, "ok"):
        return worker.status, worker.error or ""
    if returncode != 0:
        return "failed", child.exit_reason(returncode, log)
    if worker.status is None:  # it exited 0 all the same: something in it called os._exit before the pass's end
        return "failed", f"{child.exit_reason(returncode, log)} without writing its result ({RESULT_JSON})"
    return status, error


def complete_results(
    results: dict[str, CollectorResult], collectors: list[type[Collector]], status: str, error: str
) -> None:
    """A result for every collector of the pass: one the worker never wrote says why; one that was fine in a
    pass that was not is partial, with the pass's reason."""
    for cls in collectors:
        if cls.name not in results and status == "interrupted":
            results[cls.name] = CollectorResult(
                "interrupted",
                reason=f"{error}: the worker ended before it wrote this collector's results; "
                "only the pass's markers are kept",
            )
        elif cls.name not in results:
            results[cls.name] = CollectorResult("failed", reason=error or "the pass wrote no result")
        elif status != "ok" and results[cls.name].status in ("ok", "partial"):
            result = results[cls.name]
            result.status = "partial"
            if error not in result.reason:
                result.reason = "; ".join(r for r in (f"pass {status}: {error}", result.reason) if r)


def steal_share(stolen_ns: int | None, at_start_ns: int | None, wall_s: float, cpus: int) -> float | None:
    """Host steal over the pass as a share of all CPUs' time (None when /proc/stat could not say)."""
    if stolen_ns is None or at_start_ns is None or wall_s <= 0:
        return None
    return (stolen_ns - at_start_ns) / 1e9 / (wall_s * cpus)
