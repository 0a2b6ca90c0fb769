"""The collector interface: every measurement source is one small plug-in.

A collector declares which pass it runs in, probes its capability up front (really calling the
API it needs) and either measures or says `unavailable: <reason>; fix: <command>`.
No collector imports another; the session and the worker only know the registry.

Life cycle inside the pass's child process (hwprof.session.worker), in this order:

    open(ctx)        before torch is imported: perf fds with inherit=1 must exist before
                     torch creates its thread pool
    prepare(ctx)     model built, layer table and a sample input ready, before warm-up
    on_marker(m)     every stage/layer/iteration marker, if `subscribes` is true
    start(ctx)       after warm-up, before the measured iterations
    after_iteration(ctx, i)   after each measured iteration
    stop(ctx)        after the measured iterations
    pause(ctx) / resume(ctx)  around each clean iteration of a paired pass (hwprof.session.paired), for
                     collectors that are `switchable`: no markers reach a paused collector and
                     the layer hooks are off, so a clean iteration is the timing pass's forward
    close(ctx)       always called (also after an error or Ctrl-C): write artifacts, return result

Out-of-process collectors instead implement `wrap_command` (run the worker under a tool, e.g.
Scalene) or `attach` (attach a tool to the worker's pid, e.g. py-spy, perf record); both run in
the parent. `child_env` adds environment variables to the worker (e.g. ONEDNN_JIT_PROFILE, which
oneDNN reads once as it loads).

Modules must not import torch at import time: the registry imports them all in the parent, and
in the child `open` must run before torch is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

from hwprof.core.atomic import SIZE_LIMIT_COMMAND, size_limit_cut
from hwprof.schema.probes import ProbeDetails
from hwprof.schema.run import CollectorEntry
from hwprof.schema.summaries_cpu import Summary

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig
    from hwprof.core.kernels import SampleRate
    from hwprof.core.markers import Marker, MarkerBus
    from hwprof.workload.pipeline import Pipeline
    from hwprof.workload.script_scopes import LayerScopes

Status = Literal["ok", "unavailable", "failed", "partial", "skipped", "interrupted"]


@dataclass(frozen=True)
class Capability:
    """Whether this host can run a collector, and if not, why and how to fix it."""

    available: bool
    reason: str = ""
    fix: str = ""
    details: ProbeDetails = field(default_factory=ProbeDetails)
    """What the probe found: the collector's ProbeDetails subclass (hwprof.schema.probes), or an empty one;
    run.json keeps it for an unavailable collector."""

    @classmethod
    def ok(cls, *, details: ProbeDetails | None = None) -> Capability:
        return cls(True, details=ProbeDetails() if details is None else details)

    @classmethod
    def unavailable(cls, reason: str, fix: str = "", *, details: ProbeDetails | None = None) -> Capability:
        return cls(False, reason, fix, ProbeDetails() if details is None else details)

    def sentence(self) -> str:
        if self.available:
            return "available"
        return f"unavailable: {self.reason}" + (f"; fix: {self.fix}" if self.fix else "")


@dataclass
class CollectorResult:
    """What a collector reports about itself; `summary` lands in run.json under its name.

    `summary` is the collector's typed summary (hwprof.schema: the documentation of what it produces); a
    result with nothing to say keeps the empty default (written as {}). entry() is the record result.json
    and run.json keep it as; of_entry() reads one back."""

    status: Status
    reason: str = ""
    fix: str = ""
    summary: Summary = field(default_factory=Summary)
    artifacts: list[str] = field(default_factory=list)
    """Paths relative to the run directory."""

    def entry(self, pass_name: str | None = None) -> CollectorEntry:
        """The result as result.json (and, with its pass, run.json) records it: every key, in this order."""
        entry = CollectorEntry.of(
            status=self.status, reason=self.reason, fix=self.fix, summary=self.summary, artifacts=list(self.artifacts)
        )
        if pass_name is not None:
            entry.update(pass_name=pass_name)
        return entry

    @classmethod
    def of_entry(cls, entry: CollectorEntry) -> CollectorResult:
        """The result a pass's result.json recorded (its summary as typed as the entry's)."""
        return cls(
            cast(Status, entry.status),
            entry.reason or "",
            entry.fix or "",
            Summary() if entry.summary is None else entry.summary,
            list(entry.artifacts or []),
        )

    def to_dict(self) -> dict[str, Any]:
        return self.entry().to_json()


def unconverted(ctx: PassContext, output: Path, what: str, why: str, artifacts: list[str]) -> CollectorResult:
    """A tool's output (`what`: "py-spy's output") that could not be converted: "failed", saying it was cut at the
    file-size limit and the fix where it was (size_limit_cut), else `why`; the output kept after `artifacts`."""
    cut = size_limit_cut(output, what)
    return CollectorResult(
        "failed",
        reason=cut or why,
        fix=SIZE_LIMIT_COMMAND if cut else "",
        artifacts=[*artifacts, ctx.relpath(output)],
    )


@dataclass
class PassContext:
    """What the worker hands to the collectors of one pass."""

    config: RunConfig
    run_dir: Path
    pass_name: str
    bus: MarkerBus
    pipeline: Pipeline | None = None
    """Set before prepare(): model, layer table, sample batch, forward()."""
    interrupted: str = ""
    """Set before close() when a stop signal ended the pass ("stopped by SIGTERM after 1 of 7 iterations"):
    a collector that has nothing to show then says "interrupted" with it, not "failed"."""
    layer_scopes: LayerScopes | None = None
    """Set before prepare() for a TorchScript model (a user's traced program): its layers run inside
    TorchScript, so no layer marker is emitted; a collector that sees each op's module hierarchy can find them
    (hwprof.workload.script_scopes)."""
    replayed: list[Marker] = field(default_factory=list)
    """Layer markers a collector made after the fact (in close()), from what it recorded: the worker appends
    them to the pass's markers (Marker.replayed: no collector gets them)."""

    @property
    def out_dir(self) -> Path:
        """This pass's folder in the run directory (created by the worker)."""
        return self.run_dir / "passes" / self.pass_name

    def relpath(self, path: Path) -> str:
        return str(path.relative_to(self.run_dir))


class Collector:
    """Base class: override what the collector needs; every hook defaults to doing nothing."""

    name: ClassVar[str]
    title: ClassVar[str] = ""
    pass_name: ClassVar[str]
    subscribes: ClassVar[bool] = False
    """Receive markers through on_marker()."""
    order: ClassVar[int] = 50
    """Subscription order: lower subscribes first and so brackets the others (see markers.py)."""
    needs_layer_markers: ClassVar[bool] = False
    default_enabled: ClassVar[bool] = True
    """False for collectors that only run when asked for (e.g. the PAPI backend)."""
    switchable: ClassVar[bool] = False
    """Its cost can be switched off between iterations inside the worker (pause/resume, and no
    markers while paused). A pass with such a collector interleaves clean iterations with its
    measured ones and so measures its own cost; others (a process under Scalene or Valgrind, py-spy
    with --pyspy-native) cost the clean iterations as much and leave a pass-level estimate. py-spy,
    attached from outside, switches by signals (collectors/pyspy/switch.py)."""
    clean_markers: ClassVar[bool] = False
    """Not switchable, and gets the stage and iteration markers of the clean iterations too (they have
    Marker.clean set): a sampler that stays on and measures those iterations, e.g. NVML's energy."""
    finds_scripted_layers: ClassVar[bool] = False
    """Places a TorchScript model's layer spans from what it records (PassContext.layer_scopes, replayed)."""
    clean_iterations: ClassVar[bool] = True
    """False: its pass runs no clean iterations at all (under a simulator every iteration is 50-150x
    slower and the layer hooks' cost is nothing beside it): the pass gets a pass-level estimate."""
    zygote_modules: ClassVar[tuple[str, ...]] = ()
    """Modules besides the pass worker that a worker forked from the collect's zygote may run for its pass (a
    launcher that wraps the worker: Scalene's, collectors/scalene/forked_cli.py); the zygote imports them at its
    start."""
    zygote_imports: ClassVar[tuple[str, ...]] = ()
    """What the zygote imports besides, where a collect asks for this collector: modules its first use would import
    in every pass's worker (torch.profiler's: Inductor)."""
    attach_reads_run: ClassVar[bool] = False
    """Its attach() reads what the earlier passes wrote (perf's sampling plan: the layers pass's markers): where its
    pass's worker is launched beside the previous pass's close (hwprof.session.turn), it attaches once that pass has
    ended, not at the launch."""
    heavy_close: ClassVar[bool] = False
    """Its close() holds the most memory of a collect (torch.profiler's trace parsed and converted: the trace
    pass's worker at 1.1 GB at yolov7 640): no worker is launched beside its pass's close (hwprof.session.turn), so
    that the collect's processes hold one pass's memory at that peak (their PSS 1.18 GiB, against 1.59 with the
    Scalene pass's worker built beside it)."""
    last_warmup: ClassVar[bool] = False
    """It does something of its own in the last warm-up iteration (index -1: a probe, the ops' shapes, the
    simulated caches' warming): where the warm-up ends once warm (hwprof.session.warmup), that iteration still runs,
    after the warm ones."""
    needs_cuda: ClassVar[bool] = False
    """It measures a run on an NVIDIA GPU only (--device cuda): `hwprof doctor` on the CPU says the GPU collectors in
    one line instead of probing each."""
    whole_process: ClassVar[bool] = False
    """It can profile a user's program that calls no model (hwprof.session.program_pass_runner) over the program's
    whole run, as one span: its figures need no forward (sampled kernels, Python stacks, Scalene's profile).
    Collectors whose figures are per forward or per layer (timing, counters, FLOPs) say they are unavailable."""
    thread_bound: ClassVar[bool] = False
    """It measures the thread that starts it (torch.profiler's callbacks, per-thread counters): in an attached
    service (hwprof.agent) its window marks the calls of that one thread, and it is started and stopped there."""
    cannot_attach: ClassVar[str] = ""
    """Why it cannot measure a running service (`hwprof attach`, hwprof.agent), in words ("" where it can): a
    collector that starts the process itself (Scalene, Valgrind) cannot join one already running."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        return Capability.ok()

    @classmethod
    def wanted(cls, config: RunConfig) -> bool:
        """Whether this run asks for the collector (before any probing)."""
        if config.only:
            return cls.name in config.only
        return cls.default_enabled and cls.name not in config.skip

    @classmethod
    def check_options(cls, config: RunConfig) -> None:
        """Raise ValueError (one line) for options of this collector that can never work, e.g. an unknown event."""

    def open(self, ctx: PassContext) -> None:
        pass

    def prepare(self, ctx: PassContext) -> None:
        pass

    def on_marker(self, marker: Marker) -> None:
        pass

    def wants_layer_markers(self) -> bool:
        """Whether on_marker gets the layer markers (asked after open()); False: the stage and iteration markers
        only, and a layer's markers cost this collector nothing."""
        return True

    def start(self, ctx: PassContext) -> None:
        pass

    def after_iteration(self, ctx: PassContext, iteration: int) -> None:
        pass

    def stop(self, ctx: PassContext) -> None:
        pass

    def after_workload(self, ctx: PassContext) -> None:
        """The workload's own flow has ended (a user's program ended or was stopped; the collectors were stopped):
        a forward of the collector's own that could not run inside the loop (`ctx.pipeline.own_forwards_in_loop`
        false at prepare) runs here, with no marker. Called by a program's pass only: hwprof's own pipeline lets
        such forwards run in prepare."""

    def pause(self, ctx: PassContext) -> None:
        """A clean iteration follows: produce nothing, cost nothing (only if `switchable`)."""

    def resume(self, ctx: PassContext) -> None:
        """The next measured iteration follows a clean one: measure again."""

    def close(self, ctx: PassContext) -> CollectorResult:
        return CollectorResult("ok")

    def wrap_command(self, command: list[str], ctx: PassContext) -> list[str]:
        return command

    def measured_iterations(self, ctx: PassContext) -> int | None:
        """More measured iterations than --iters that this collector's pass needs (e.g. for enough samples)."""
        return None

    def fewest_iterations(self, ctx: PassContext) -> int | None:
        """The fewest measured iterations this collector's figures need, asked after the warm-up (a counter
        rotation planned there: every layer read its minimum of times); a pass that stops when its figures are
        resolved (hwprof.session.pass_stop) stops no sooner. None: no floor beyond measured_iterations'."""
        return None

    def sample_rate(self, ctx: PassContext) -> SampleRate | None:
        """A sampler of the layers' windows: its rate, from which a pass that stops when its figures are resolved
        counts each ranked layer's samples in its own measured spans as it runs (hwprof.session.pass_stop), its
        measured_iterations then the plan's bound, not a floor. None: not such a sampler."""
        return None

    def iteration_limit(self, ctx: PassContext) -> int | None:
        """At most this many measured iterations in this collector's pass (e.g. under a 100x slower simulator)."""
        return None

    def child_env(self, ctx: PassContext) -> dict[str, str]:
        """Environment variables the pass's worker must start with (read by libraries as they load)."""
        return {}

    def attach(self, pid: int, ctx: PassContext) -> AttachedTool | None:
        return None


class AttachedTool:
    """An external tool attached to the worker from the parent (e.g. py-spy)."""

    def finish(self, worker_returncode: int | None, timeout_s: float = 30.0) -> CollectorResult:
        raise NotImplementedError

    def abandon(self) -> None:
        """The pass was killed (a second stop signal): release what the tool holds (FIFOs, open files)
        without reading its output; its processes were killed already."""
