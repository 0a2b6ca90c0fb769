"""The collect's side of hwprof.session.turn: the next pass's worker launched when the running pass says its measuring
ended, its tools attached but those that read the earlier passes' files, held until its turn (run_pass takes it),
or dropped where its turn does not come. PassProcesses inherits it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from pathlib import Path

from hwprof.collectors.base import Collector
from hwprof.core.config import RunConfig
from hwprof.perf.neighbours import NeighbourWatch
from hwprof.perf.steal import steal_ns
from hwprof.rundir.names import PASSES
from hwprof.session import child
from hwprof.session.budget import Budget
from hwprof.session.child import Lines
from hwprof.session.plan import PassPlan
from hwprof.session.rlimits import TaskLimitError
from hwprof.session.running_pass import RunningPass
from hwprof.session.stopping import StopSignals
from hwprof.session.turn import give_turn


class EarlyLaunch:
    """Launching each pass's worker beside the previous pass's close, and giving it its turn."""

    config: RunConfig
    run_dir: Path
    stop: StopSignals
    budget: Budget | None

    def init_early(self) -> None:
        self.next_plan: PassPlan | None = None
        """The pass after the running one, where its worker may be launched beside the running one's close (set by
        the collection, taken when the running pass says its measuring ended)."""
        self._early: RunningPass | None = None
        """That pass's worker, launched and held until its turn (run_pass), or dropped (drop_early)."""

    def gone(self) -> bool:
        raise NotImplementedError  # PassProcesses': whether the run directory was removed

    def _start_pass(self, plan: PassPlan, early: bool = False) -> RunningPass:
        raise NotImplementedError  # PassProcesses': the pass's folder, collectors and worker

    def _attach(self, running: RunningPass, collectors: list[Collector]) -> str:
        raise NotImplementedError  # PassProcesses': the collectors' tools attached to the worker

    def may_launch_early(self) -> bool:
        """Whether a pass's worker may be launched beside the previous pass's close (hwprof.session.turn): the
        built-in pipeline's passes, without --budget (whose shares are given as each pass starts)."""
        config = self.config
        return (
            config.program is None
            and config.attached is None
            and self.budget is None
            and bool(config.extra.get("early_launch", True))
        )

    def _launch_next(self) -> None:
        """The next pass's worker launched now, beside the running pass's close, and held until its turn: its start
        and build (0.6-0.8 s a forked worker at yolov7 640) overlap that close (hwprof.session.turn). Its tools
        are attached now but those that read the earlier passes' files (Collector.attach_reads_run), which wait
        for its turn. Where it cannot be launched it is launched at its turn, as before, and says why there."""
        plan, self.next_plan = self.next_plan, None
        if plan is None or self._early is not None or self.stop.requested or self.gone():
            return
        with self.stop.deferred():  # a second signal now is raised once the worker is held, and it is dropped
            try:
                running = self._start_pass(plan, early=True)
            except (TaskLimitError, RuntimeError, OSError):
                shutil.rmtree(self.run_dir / PASSES / plan.name, ignore_errors=True)
                return
            self._early = running
            running.lines = Lines(running.proc)
            early = [c for c in running.collectors if not c.attach_reads_run]
            running.attach_error = self._attach(running, early)

    def _take_early(self, plan: PassPlan) -> RunningPass | None:
        """The worker launched for `plan` beside the previous pass's close, if one was (another is dropped)."""
        running, self._early = self._early, None
        if running is not None and running.plan.name != plan.name:
            self._drop(running)
            running = None
        return running

    def drop_early(self) -> None:
        """A worker launched early whose turn did not come (a stop, a failure that ends the collect): dropped."""
        running, self._early = self._early, None
        if running is not None:
            self._drop(running)

    def _drop(self, running: RunningPass) -> None:
        """Killed with what it started, its tools released and its folder removed: it measured nothing, and the run
        is as if it had never been launched (as a pass after a stop never was)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(running.proc.pid, signal.SIGKILL)
        child.stop_session(running.proc.pid, time.monotonic(), grace_s=0.0)
        with contextlib.suppress(Exception):  # its zygote gone with it: nothing left to reap
            running.proc.wait()
        for tool in running.attached.values():
            with contextlib.suppress(Exception):
                tool.abandon()
        running.log.close()
        shutil.rmtree(running.ctx.out_dir, ignore_errors=True)

    def _give_turn(self, running: RunningPass) -> None:
        """Its turn: the previous pass has ended. A worker held until now warms up and measures from now on, its
        wall time and its watch on the host from here."""
        if running.turn is None:
            return
        running.turn_at = time.monotonic()
        running.steal_at_start = steal_ns()
        running.watch = NeighbourWatch(also=self.config.attached).start()
        give_turn(running.turn)
