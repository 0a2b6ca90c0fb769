"""A collection: plan passes from the registry, run each in a child process, assemble the run directory.

Collectors that disturb one another run in separate passes (config.PASS_ORDER). Every pass is
`python -P -m hwprof.worker RUN_DIR PASS NAMES` (-P: never import hwprof from the working
directory), possibly wrapped by a collector (Scalene) or with a tool attached (py-spy). A pass
that crashes, hangs past its time-out or is interrupted leaves what it wrote, and run.json says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hwprof import child
from hwprof.atomic import DiskFullError, SpaceReserve, atomic_write_text
from hwprof.child import error_line, exit_reason
from hwprof.collectors.base import AttachedTool, Collector, CollectorResult, PassContext
from hwprof.config import RunConfig
from hwprof.markers import MarkerBus
from hwprof.perf.steal import steal_ns
from hwprof.plan import CollectError, PassPlan, Plan
from hwprof.rundata import SCHEMA_VERSION, write_run_json
from hwprof.workload.images import ImageSet

ProgressFn = Callable[[str, dict[str, Any]], None]


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
    runtime: dict[str, Any] | None = None
    """The worker's runtime.json content: runtime, executed precision, output difference, clock."""
    lingering: list[child.Lingering] = field(default_factory=list)
    """Processes left in the worker's session after it exited, which the session stopped."""


class Session:
    def __init__(self, config: RunConfig, run_dir: Path, images: ImageSet, progress: ProgressFn | None = None):
        config.resolve_paths()  # the workers run in the run directory
        self.config = config
        self.run_dir = run_dir.resolve()
        """Absolute: workers run with the run directory as their working directory."""
        self.images = images
        self.progress = progress or (lambda _pass, _event: None)
        self.outcomes: list[PassOutcome] = []
        self.run: dict[str, Any] = {}
        self.disk_full: dict[str, str] = {}
        """pass -> the path its worker could not write for lack of space (its `disk_full` progress line)."""
        self.run_fields: dict[str, Any] = {}
        """More top-level fields for run.json (the CLI's disk estimate)."""

    def _write_inputs(self) -> None:
        self.config.save(self.run_dir / "config.json")
        atomic_write_text(
            self.run_dir / "images.json",
            json.dumps(
                {
                    "paths": [str(p) for p in self.images.paths],
                    "skipped": self.images.skipped,
                    "source": self.images.source,
                },
                indent=1,
            ),
        )

    def _child_env(self, collectors: list[Collector], ctx: PassContext) -> dict[str, str]:
        env = dict(os.environ)
        threads = str(self.config.threads)
        env.update(
            {
                "OMP_NUM_THREADS": threads,
                "MKL_NUM_THREADS": threads,
                "PYTHONUNBUFFERED": "1",
                "YOLO_OFFLINE": "1",
                "YOLO_VERBOSE": "False",
            }
        )
        for collector in collectors:
            env.update(collector.child_env(ctx))
        return env

    def run_pass(self, plan: PassPlan) -> PassOutcome:
        ctx = PassContext(self.config, self.run_dir, plan.name, MarkerBus())
        ctx.out_dir.mkdir(parents=True, exist_ok=True)
        collectors = [cls(self.config) for cls in plan.collectors]
        names = ",".join(c.name for c in collectors)
        command = [sys.executable, "-P", "-m", "hwprof.worker", str(self.run_dir), plan.name, names]
        for collector in collectors:
            command = collector.wrap_command(command, ctx)
        atomic_write_text(ctx.out_dir / "command.json", json.dumps(command))
        started = time.monotonic()
        steal_at_start = steal_ns()
        with open(ctx.out_dir / "worker.log", "w") as log:
            proc = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=self.run_dir,
                text=True,
                env=self._child_env(collectors, ctx),
                start_new_session=True,
            )
            attached: dict[str, AttachedTool] = {}
            outcome_status, error = "ok", ""
            exited_at: float | None = None
            try:
                for collector in collectors:
                    try:
                        tool = collector.attach(proc.pid, ctx)
                    except Exception as exc:
                        tool = None
                        error = f"{collector.name} could not attach: {exc}"
                    if tool is not None:
                        attached[collector.name] = tool
                exited_at = child.follow(proc, self.config.pass_timeout_s, lambda line: self._on_line(plan.name, line))
                if exited_at is None:
                    child.stop(proc)
                    outcome_status = "timeout"
                    error = f"pass {plan.name} ran past its {self.config.pass_timeout_s:.0f} s time-out"
            except KeyboardInterrupt:
                child.stop(proc)
                times = (started, exited_at, steal_at_start)
                self._finish_pass(plan, ctx, proc, attached, times, "interrupted", "Ctrl-C")
                raise
        times = (started, exited_at, steal_at_start)
        return self._finish_pass(plan, ctx, proc, attached, times, outcome_status, error)

    def _on_line(self, pass_name: str, line: str) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            return
        if isinstance(event, dict):
            if "disk_full" in event:
                self.disk_full[pass_name] = str(event["disk_full"])
            self.progress(pass_name, event)

    def _finish_pass(
        self,
        plan: PassPlan,
        ctx: PassContext,
        proc: subprocess.Popen[str],
        attached: dict[str, AttachedTool],
        times: tuple[float, float | None, int | None],
        status: str,
        error: str,
    ) -> PassOutcome:
        """times: monotonic s when the worker was launched and when its exit was seen (None: not seen,
        it was stopped), and host steal ns at its launch."""
        started, exited_at, steal_at_start = times
        child.stop(proc)  # when it has not exited
        lingering = child.stop_session(proc.pid, exited_at or time.monotonic())
        returncode = proc.wait()
        results: dict[str, CollectorResult] = {}
        result_file = ctx.out_dir / "result.json"
        worker: dict[str, Any] = {}
        if result_file.exists():
            worker = json.loads(result_file.read_text())
            for name, data in worker.get("collectors", {}).items():
                results[name] = CollectorResult(**data)
        if status == "ok":
            if worker.get("status") not in (None, "ok"):
                status, error = worker["status"], worker.get("error", "")
            elif returncode != 0:
                status = "failed"
                error = exit_reason(returncode, ctx.out_dir / "worker.log")
        for name, tool in attached.items():
            try:
                results[name] = tool.finish(returncode)
            except Exception as exc:
                results[name] = CollectorResult("failed", reason=f"{type(exc).__name__}: {exc}")
        for cls in plan.collectors:
            if cls.name not in results:
                results[cls.name] = CollectorResult("failed", reason=error or "the pass wrote no result")
            elif status != "ok" and results[cls.name].status == "ok":
                results[cls.name].status = "partial"
                results[cls.name].reason = f"pass {status}: {error}"
        wall = time.monotonic() - started
        outcome = PassOutcome(plan.name, status, returncode, wall, proc.pid, error, results)
        outcome.runtime = worker.get("runtime")
        outcome.lingering = lingering
        stolen = steal_ns()
        if stolen is not None and steal_at_start is not None and wall > 0:
            outcome.host_steal_share = (stolen - steal_at_start) / 1e9 / (wall * (os.cpu_count() or 1))
        self.outcomes.append(outcome)
        return outcome

    def collect(self, plan: Plan, command_line: list[str]) -> dict[str, Any]:
        from hwprof.host import host_info

        reserve = SpaceReserve(self.run_dir)  # given back before the last run.json: it fits on a full disk
        self._write_inputs()
        self.run = {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_dir.name,
            "status": "running",
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": command_line,
            "config": self.config.to_dict(),
            "host": host_info(),
            "images": {
                "paths": [str(p) for p in self.images.paths],
                "skipped": self.images.skipped,
                "source": self.images.source,
            },
            "clock": {"id": "CLOCK_MONOTONIC", "unit": "ns"},
            "collectors": dict(plan.statuses),
            "passes": {},
        }
        self.run["peaks"] = _peaks(self.config.threads)
        self.run.update(self.run_fields)
        write_run_json(self.run_dir, self.run)
        final = "complete"
        try:
            for pass_plan in plan.passes:
                outcome = self.run_pass(pass_plan)
                if outcome.name in self.disk_full:
                    raise DiskFullError(self.disk_full[outcome.name])
                self._record(outcome)
                if outcome.status != "ok":
                    final = "partial"
                if outcome.returncode == 3:
                    # The workload itself failed (model, weights, images): every later pass would too.
                    log = self.run_dir / "passes" / outcome.name / "worker.log"
                    raise CollectError(error_line(log) or outcome.error)
        except KeyboardInterrupt:
            for outcome in self.outcomes[len(self.run["passes"]) :]:
                self._record(outcome)
            final = "interrupted"
            raise
        except CollectError:
            final = "failed"
            raise
        except DiskFullError as exc:  # the collection cannot go on: run.json says failed, and where
            for outcome in self.outcomes[len(self.run["passes"]) :]:
                self._record(outcome, write=False)  # finalize writes it, after the reserve is given back
            final = "failed"
            self.run["error"] = str(exc)
            raise
        finally:
            from hwprof.finish import finalize

            self.run["status"] = final
            self.run["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
            reserve.release()
            try:
                finalize(self.run_dir, self.run)
            except DiskFullError:
                if "error" not in self.run:  # else the first full write is the one to report
                    raise
        return self.run

    def _record(self, outcome: PassOutcome, write: bool = True) -> None:
        self.run["passes"][outcome.name] = {
            "status": outcome.status,
            "returncode": outcome.returncode,
            "wall_s": round(outcome.wall_s, 3),
            "pid": outcome.pid,
            "error": outcome.error,
            "collectors": sorted(outcome.results),
            "log": f"passes/{outcome.name}/worker.log",
            "host_steal_share": outcome.host_steal_share,
        }
        if outcome.lingering:
            self.run["passes"][outcome.name]["lingering"] = [x.to_dict() for x in outcome.lingering]
        for name, result in outcome.results.items():
            self.run["collectors"][name] = {**result.to_dict(), "pass": outcome.name}
        if outcome.runtime:
            self._record_runtime(outcome.name, outcome.runtime)
        if write:
            write_run_json(self.run_dir, self.run)

    def _record_runtime(self, pass_name: str, info: dict[str, Any]) -> None:
        """run.json's "runtime": what ran the forward (from the first pass), and each profiled pass's clock."""
        profiler = {
            k: info.pop(k) for k in ("profiler", "clock", "replayed_layer_markers", "profile_error") if k in info
        }
        summary = self.run.setdefault("runtime", {"name": info.get("runtime"), **info, "profiled_passes": {}})
        if profiler:
            summary["profiled_passes"][pass_name] = profiler


def _peaks(threads: int) -> dict[str, Any]:
    """This host's measured peak GFLOP/s and GB/s (cached per host), for the roofline."""
    from hwprof.machine import measure_peaks

    try:
        return measure_peaks(threads).to_dict()
    except Exception as exc:
        return {
            "status": "unavailable",
            "reason": f"measuring the peaks failed: {type(exc).__name__}: {exc}",
            "fix": "hwprof doctor --peaks --force",
        }
