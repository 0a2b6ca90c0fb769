"""A pass's worker process as the collect sees it: launched, followed until it ends, stopped, and read into the
pass's outcome (hwprof.session.outcome). The collection (hwprof.session.collection) runs the passes in turn and
puts run.json around them.

Every pass is `python -P -m hwprof.session.worker RUN_DIR PASS NAMES` (-P: never import hwprof from the working
directory), possibly wrapped by a collector (Scalene) or with a tool attached (py-spy), forked by the zygote where
it may be (hwprof.session.zygote). A pass that crashes, hangs past its time-out or is interrupted leaves what it
wrote, and its outcome says so.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from hwprof.collectors.base import Collector, CollectorResult, PassContext
from hwprof.core.atomic import DiskFullError, FolderGoneError, remove_orphaned_temporaries
from hwprof.core.config import RunConfig
from hwprof.core.gc_pause import gc_paused
from hwprof.core.markers import MarkerBus
from hwprof.perf.neighbours import NeighbourWatch
from hwprof.perf.steal import steal_ns
from hwprof.rundir.logs import child_log
from hwprof.rundir.names import WORKER_LOG
from hwprof.rundir.reader import RunData
from hwprof.rundir.worker_files import read_worker_pid, write_command
from hwprof.schema.run import RunDoc
from hwprof.session import child, zygote
from hwprof.session.budget import Budget
from hwprof.session.child import Worker
from hwprof.session.early_launch import EarlyLaunch
from hwprof.session.outcome import PassOutcome, complete_results, pass_status, steal_share, worker_results
from hwprof.session.pass_inputs import pass_env
from hwprof.session.plan import PassPlan
from hwprof.session.program_passes import ProgramPasses
from hwprof.session.rlimits import TaskLimitError, cannot_start, task_limit_line, thread_limited
from hwprof.session.running_pass import RunningPass
from hwprof.session.stopping import StopSignals
from hwprof.session.turn import TURN_ENV, turn_path
from hwprof.session.worker_io import ProgressEvent, progress_from_json
from hwprof.session.zygote import ForkedWorker, Zygote

ProgressFn = Callable[[str, ProgressEvent], None]


class PassProcesses(EarlyLaunch):
    """The passes' workers of one collect, one at a time: run_pass runs one and keeps its outcome in `outcomes`."""

    def __init__(self, config: RunConfig, run_dir: Path, progress: ProgressFn | None, stop: StopSignals | None) -> None:
        config.resolve_paths()  # the workers run in the run directory
        self.config = config
        self.stop = stop or StopSignals()
        """Stop signals (installed by the CLI; a library caller's Ctrl-C still arrives as KeyboardInterrupt)."""
        self.run_dir = run_dir.resolve()
        """Absolute: workers run with the run directory as their working directory."""
        self._dir_id = _dir_id(self.run_dir)
        """The run directory's (device, inode): it was removed (or replaced) when they change."""
        self.progress = progress or (lambda _pass, _event: None)
        self.outcomes: list[PassOutcome] = []
        self.run = RunDoc()
        """run.json as the collect writes it."""
        self.init_early()
        self.disk_full: dict[str, DiskFullError] = {}
        """pass -> the path its worker could not write for lack of space (its `disk_full` progress line)."""
        self.programs = ProgramPasses()
        """A user's program: what its passes found that changes the later ones (no model, its failure)."""
        self.budget = Budget(config.budget_s, time.monotonic()) if config.budget_s > 0 else None
        """--budget, from the collect's start; each pass's share given as it starts (hwprof.session.budget)."""
        self.passes_left = 1
        """The passes left to run, the starting one counted: what the budget is shared among."""
        self.zygote: Zygote | None = None
        """The process the passes' workers are forked from, their imports done (hwprof.session.zygote): started by
        the caller (api.collecting.run_collect, before the run directory is set up), closed by the collection
        (hwprof.session.collection) when the passes end, before the exports; None: every worker starts as a new
        process."""

    def gone(self) -> bool:
        """Whether the run directory was removed (or replaced by another folder) since the collect began."""
        return _dir_id(self.run_dir) != self._dir_id

    def gone_error(self) -> FolderGoneError:
        return FolderGoneError(self.run_dir, "the run directory", "during the collect")

    def run_pass(self, plan: PassPlan) -> PassOutcome:
        running = self._take_early(plan) or self._start_pass(plan)
        ctx = running.ctx
        with running.log:
            with self.stop.child(running.proc.pid, lambda: read_worker_pid(ctx.out_dir)):
                try:
                    # launched early: its other tools were attached at its launch (_launch_next)
                    late = [c for c in running.collectors if running.turn is None or c.attach_reads_run]
                    error = self._attach(running, late)
                    self._give_turn(running)
                    status, error = self._follow(running, error or running.attach_error)
                except KeyboardInterrupt:  # escalated, or a caller without StopSignals: stop now
                    if not self.stop.requested:
                        self.stop.note(signal.SIGINT)
                    child.stop(running.proc, grace_s=0.0 if self.stop.escalated else child.TERM_GRACE_S)
                    self._finish_pass(running, "interrupted", self._stop_text())
                    raise
                except FolderGoneError:  # nothing the pass does can be saved: every process below is killed
                    self.stop.kill_everything()
                    running.proc.wait()
                    for tool in running.attached.values():
                        with contextlib.suppress(Exception):
                            tool.abandon()
                    raise
                except (RuntimeError, OSError) as exc:  # collect's own process could not start a thread
                    if not cannot_start(exc):
                        raise
                    what = f"collect could not start a thread to follow pass {plan.name} ({exc})"
                    line = task_limit_line(what, self.config)
                    child.stop(running.proc, grace_s=0.0)
                    self._finish_pass(running, "failed", line)
                    raise TaskLimitError(line) from None
            if self.stop.requested and status == "ok":
                status, error = "interrupted", self._stop_text()
        return self._finish_pass(running, status, error)

    def _start_pass(self, plan: PassPlan, early: bool = False) -> RunningPass:
        """The pass's folder, its collectors and its worker launched (held until its turn: `early`), its log open."""
        ctx = PassContext(self.config, self.run_dir, plan.name, MarkerBus())
        if self.gone():  # never recreate it: a pass alone, without the run's inputs, is no run
            raise self.gone_error()
        ctx.out_dir.mkdir(parents=True, exist_ok=True)
        collectors = [cls(self.config) for cls in plan.collectors]
        log = contextlib.ExitStack()
        try:
            handle = log.enter_context(child_log(ctx.out_dir / WORKER_LOG))
            running = self._launch(plan, ctx, collectors, handle, turn_path(ctx.out_dir) if early else None)
        except BaseException:
            log.close()
            raise
        running.log, running.collectors = log, collectors
        return running

    def _launch(
        self, plan: PassPlan, ctx: PassContext, collectors: list[Collector], log: TextIO, turn: Path | None = None
    ) -> RunningPass:
        """Start the pass's worker (wrapped by its collectors), its stderr to `log`, in a session of its own; `turn`:
        the file it waits for before its warm-up (hwprof.session.turn), None: it goes on at once."""
        names = ",".join(c.name for c in collectors)
        command = [sys.executable, "-P", "-m", self._worker_module, str(self.run_dir), plan.name, names]
        for collector in collectors:
            command = collector.wrap_command(command, ctx)
        write_command(ctx.out_dir, command)
        started = time.monotonic()
        steal_at_start = steal_ns()
        watch: NeighbourWatch | None = None
        try:
            watch = None if turn is not None else NeighbourWatch(also=self.config.attached).start()
            extra = self.programs.env() | (self.budget.env(self.passes_left) if self.budget else {})
            if turn is not None:
                turn.unlink(missing_ok=True)
                extra[TURN_ENV] = str(turn)
            needs_imports = any(c.zygote_imports for c in collectors)
            proc = self._start_worker(command, pass_env(self.config, collectors, ctx, extra), log, needs_imports)
        except (RuntimeError, OSError) as exc:  # no pass is recorded: its worker never ran
            if watch is not None:
                watch.stop()
            if not cannot_start(exc):
                raise
            what = "thread" if isinstance(exc, RuntimeError) else "worker"
            line = task_limit_line(f"collect could not start pass {plan.name}'s {what} ({exc})", self.config)
            raise TaskLimitError(line) from None
        return RunningPass(plan, ctx, proc, started, steal_at_start, turn=turn, watch=watch)

    def _start_worker(self, command: list[str], env: dict[str, str], log: TextIO, needs_imports: bool) -> Worker:
        """The pass's worker forked by the zygote where it may be, else started as `command`, in a session of its
        own either way; `needs_imports`: its collectors use what the zygote imports for them (Zygote.spawn)."""
        return zygote.start(self.zygote, command, str(self.run_dir), env, log, needs_imports)

    @property
    def _worker_module(self) -> str:
        """The pass's process: its worker (with --no-agent, hwprof.agent.outside's runner, which samples the service
        from outside), or (`hwprof attach`) the relay to the window in the attached service."""
        program = self.config.program
        if program is None or program.attached is None or program.outside:
            return "hwprof.session.worker"
        return "hwprof.agent.relay"

    def _measured_pid(self, running: RunningPass) -> int:
        """The process the pass measures: its worker's, or the attached service's."""
        attached = self.config.attached
        return attached if attached is not None else running.proc.pid

    def _tool_wait(self) -> dict[str, float]:
        """How long a tool attached to the measured process may take to end with it: an attached service outlives
        the pass, so its tools (perf record -p, py-spy record -p) are stopped at once."""
        return {"timeout_s": 0.0} if self.config.attached is not None else {}

    def _attach(self, running: RunningPass, collectors: list[Collector]) -> str:
        """Attach `collectors`' tools to the worker; the error of the last that could not ("": all could)."""
        error = ""
        for collector in collectors:
            try:
                tool = collector.attach(self._measured_pid(running), running.ctx)
            except Exception as exc:
                tool = None
                error = f"{collector.name} could not attach: {exc}"
            if tool is not None:
                running.attached[collector.name] = tool
        return error

    def _follow(self, running: RunningPass, error: str) -> tuple[str, str]:
        """Relay the worker's progress until it exits, a stop signal's grace ends or it times out (then it is
        stopped); the pass's (status, error) so far."""
        proc, name = running.proc, running.plan.name
        running.exited_at = child.follow(
            proc,
            self.config.pass_timeout_s,
            lambda line, at: self._on_line(running, line, at),
            self._stopped_at,
            self.gone,
            running.lines,
        )
        if running.exited_at is None and self.gone():
            raise self.gone_error()
        if running.exited_at is None and self.stop.requested:
            child.stop(proc, grace_s=0.0)  # it had TERM_GRACE_S since the signal
        elif running.exited_at is None:
            child.stop(proc)
            return "timeout", f"pass {name} ran past its {self.config.pass_timeout_s:.0f} s time-out"
        return "ok", error

    def _stopped_at(self) -> float | None:
        return self.stop.first_at

    def _stop_text(self) -> str:
        name = self.stop.name or "SIGINT"
        return f"stopped by {name}" + (" (twice: every process of the pass was killed)" if self.stop.killed else "")

    def _on_line(self, running: RunningPass, line: str, at: float) -> None:
        """A progress line of the pass's worker, which came at `at` (monotonic s)."""
        pass_name = running.plan.name
        event = progress_from_json(line)
        if event is not None:
            running.clock.saw(event.phase, at)
            if event.phase == "closing" and not any(c.heavy_close for c in running.collectors):
                self._launch_next()
            if event.disk_full is not None:
                self.disk_full[pass_name] = DiskFullError(event.disk_full, event.disk_full_errno)
            self.progress(pass_name, event)

    def _finish_pass(self, running: RunningPass, status: str, error: str) -> PassOutcome:
        """Stop what is left of the pass, read the worker's result.json and the attached tools, and record the
        outcome (a result for every collector of the pass). A second signal cuts only the tools' reading of their
        output (a conversion may take minutes): the outcome is recorded before its Interrupted goes on. Before,
        a second signal that came after the worker's exit, while its results were read, lost the whole pass from
        run.json (seen once forked workers exited within a few hundredths of a second of the first signal)."""
        proc, out_dir = running.proc, running.ctx.out_dir
        cut: KeyboardInterrupt | None = None
        with self.stop.deferred():
            child.stop(proc)  # when it has not exited
            lingering = child.stop_session(proc.pid, running.exited_at or time.monotonic())
            returncode = proc.wait()
            remove_orphaned_temporaries(out_dir)  # what a worker killed mid-write (a second signal) left
            worker = RunData(self.run_dir, self.run).pass_result(running.plan.name)
            results = worker_results(worker)
            status, error = pass_status(status, error, worker, returncode, out_dir / WORKER_LOG)
            log, sent = out_dir / WORKER_LOG, self.stop.requested
            status, error, limited = thread_limited(running.plan.name, status, error, results, log, sent, self.config)
            try:
                with self.stop.interruptible(), gc_paused():  # perf script's samples: many objects, none cyclic
                    self._finish_tools(running, returncode, results, status, error)
            except KeyboardInterrupt as exc:
                cut = exc
            complete_results(results, running.plan.collectors, status, error)
            ended = time.monotonic()
            wall = ended - running.since
            outcome = PassOutcome(running.plan.name, status, returncode, wall, proc.pid, error, results)
            outcome.phases = running.clock.stretches(running.exited_at, ended)
            outcome.limited = limited
            outcome.forked = isinstance(proc, ForkedWorker)
            outcome.runtime = worker.runtime
            outcome.program = worker.program
            outcome.frames = worker.frames
            outcome.inputs = worker.inputs
            outcome.stopping = worker.stopping
            outcome.lingering = lingering
            outcome.neighbours = running.watch.stop() if running.watch else None
            outcome.host_steal_share = steal_share(steal_ns(), running.steal_at_start, wall, os.cpu_count() or 1)
            self.outcomes.append(outcome)
            if cut is not None:
                raise cut
        return outcome

    def _finish_tools(
        self, running: RunningPass, returncode: int, results: dict[str, CollectorResult], status: str, error: str
    ) -> None:
        """Each attached tool's result (its output read), or why there is none: a second signal abandons them."""
        for name, tool in running.attached.items():
            if self.stop.escalated:
                with contextlib.suppress(Exception):
                    tool.abandon()
                results[name] = CollectorResult(
                    "interrupted",
                    reason=f"{self._stop_text()} before {name}'s output was read: its raw files in "
                    f"passes/{running.plan.name} are kept, no figure was made from them",
                )
                continue
            try:
                results[name] = tool.finish(returncode, **self._tool_wait())
                if status == "interrupted" and results[name].status == "failed":  # nothing to read: the signal's doing
                    results[name].status = "interrupted"
                    results[name].reason = f"{error}: {results[name].reason}"
            except KeyboardInterrupt:  # a second signal while the tool finishes
                results[name] = CollectorResult("interrupted", reason=f"{self._stop_text()} while {name} finished")
                raise
            except Exception as exc:
                results[name] = CollectorResult("failed", reason=f"{type(exc).__name__}: {exc}")


def _dir_id(folder: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return st.st_dev, st.st_ino
