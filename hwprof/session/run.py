"""A collection: plan passes from the registry, run each in a child process, assemble the run directory.

Collectors that disturb one another run in separate passes (config.PASS_ORDER). Every pass is
`python -P -m hwprof.session.worker RUN_DIR PASS NAMES` (-P: never import hwprof from the working
directory), possibly wrapped by a collector (Scalene) or with a tool attached (py-spy). A pass
that crashes, hangs past its time-out or is interrupted leaves what it wrote, and run.json says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import AttachedTool, Collector, CollectorResult, PassContext
from hwprof.core.atomic import DiskFullError, SpaceReserve, atomic_write_text
from hwprof.core.config import RunConfig
from hwprof.core.markers import MarkerBus
from hwprof.perf.neighbours import NeighbourLoad, NeighbourWatch, neighbours_entry
from hwprof.perf.steal import steal_ns
from hwprof.rundir.names import RUN_JSON
from hwprof.rundir.reader import SCHEMA_VERSION, RunData
from hwprof.rundir.writer import write_run_json
from hwprof.schema.codec import JsonObject, json_value
from hwprof.schema.host import HostDoc, PeaksDoc
from hwprof.schema.run import CollectorEntry, PassDoc, RunConfigDoc, RunDoc, RuntimeDoc
from hwprof.schema.runtime_checks import ProfiledPass
from hwprof.session import child
from hwprof.session.child import error_line, exit_reason, worker_pid
from hwprof.session.plan import CollectError, PassPlan, Plan
from hwprof.session.stopping import StopSignals
from hwprof.workload.images import ImageSet

if TYPE_CHECKING:
    from hwprof.analysis.run_analysis import Analysis

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
    neighbours: NeighbourLoad | None = None
    """Other processes' CPU time on the run's CPUs during the pass (None: /proc could not say)."""


class Session:
    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        images: ImageSet,
        progress: ProgressFn | None = None,
        stop: StopSignals | None = None,
    ):
        config.resolve_paths()  # the workers run in the run directory
        self.config = config
        self.stop = stop or StopSignals()
        """Stop signals (installed by the CLI; a library caller's Ctrl-C still arrives as KeyboardInterrupt)."""
        self.run_dir = run_dir.resolve()
        """Absolute: workers run with the run directory as their working directory."""
        self.named_dir = run_dir
        """As the caller named it: the finished run is read from it, so that the paths in its report's
        warnings are those `hwprof report` of the same path gives."""
        self.images = images
        self.progress = progress or (lambda _pass, _event: None)
        self.outcomes: list[PassOutcome] = []
        self.run = RunDoc()
        """run.json as the collect writes it."""
        self._watch: NeighbourWatch | None = None
        """The running pass's watch on other work on the run's CPUs."""
        self.disk_full: dict[str, str] = {}
        """pass -> the path its worker could not write for lack of space (its `disk_full` progress line)."""
        self.disk_estimate: JsonObject | None = None
        """run.json's disk_estimate (the CLI's), written after the passes section."""
        self.data: RunData | None = None
        """The finished run, read once (its markers parsed once) for the exports, the report and the trace."""
        self.analysis: Analysis | None = None
        """Its analysis, made for the exports (None when they were not written)."""

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
                **child.CHILD_ENV,
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
        command = [sys.executable, "-P", "-m", "hwprof.session.worker", str(self.run_dir), plan.name, names]
        for collector in collectors:
            command = collector.wrap_command(command, ctx)
        atomic_write_text(ctx.out_dir / "command.json", json.dumps(command))
        started = time.monotonic()
        steal_at_start = steal_ns()
        self._watch = NeighbourWatch().start()
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
            with self.stop.child(proc.pid, lambda: worker_pid(ctx.out_dir)):
                try:
                    for collector in collectors:
                        try:
                            tool = collector.attach(proc.pid, ctx)
                        except Exception as exc:
                            tool = None
                            error = f"{collector.name} could not attach: {exc}"
                        if tool is not None:
                            attached[collector.name] = tool
                    exited_at = child.follow(
                        proc, self.config.pass_timeout_s, lambda line: self._on_line(plan.name, line), self._stopped_at
                    )
                    if exited_at is None and self.stop.requested:
                        child.stop(proc, grace_s=0.0)  # it had TERM_GRACE_S since the signal
                    elif exited_at is None:
                        child.stop(proc)
                        outcome_status = "timeout"
                        error = f"pass {plan.name} ran past its {self.config.pass_timeout_s:.0f} s time-out"
                except KeyboardInterrupt:  # escalated, or a caller without StopSignals: stop now
                    if not self.stop.requested:
                        self.stop.note(signal.SIGINT)
                    child.stop(proc, grace_s=0.0 if self.stop.escalated else child.TERM_GRACE_S)
                    times = (started, exited_at, steal_at_start)
                    self._finish_pass(plan, ctx, proc, attached, times, "interrupted", self._stop_text())
                    raise
            if self.stop.requested and outcome_status == "ok":
                outcome_status, error = "interrupted", self._stop_text()
        times = (started, exited_at, steal_at_start)
        return self._finish_pass(plan, ctx, proc, attached, times, outcome_status, error)

    def _stopped_at(self) -> float | None:
        return self.stop.first_at

    def _stop_text(self) -> str:
        name = self.stop.name or "SIGINT"
        return f"stopped by {name}" + (" (twice: every process of the pass was killed)" if self.stop.killed else "")

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
            if self.stop.escalated:
                with contextlib.suppress(Exception):
                    tool.abandon()
                results[name] = CollectorResult(
                    "interrupted",
                    reason=f"{self._stop_text()} before {name}'s output was read: its raw files in "
                    f"passes/{plan.name} are kept, no figure was made from them",
                )
                continue
            try:
                results[name] = tool.finish(returncode)
                if status == "interrupted" and results[name].status == "failed":  # nothing to read: the signal's doing
                    results[name].status = "interrupted"
                    results[name].reason = f"{error}: {results[name].reason}"
            except KeyboardInterrupt:  # a second signal while the tool finishes
                results[name] = CollectorResult("interrupted", reason=f"{self._stop_text()} while {name} finished")
                raise
            except Exception as exc:
                results[name] = CollectorResult("failed", reason=f"{type(exc).__name__}: {exc}")
        for cls in plan.collectors:
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
        wall = time.monotonic() - started
        outcome = PassOutcome(plan.name, status, returncode, wall, proc.pid, error, results)
        outcome.runtime = worker.get("runtime")
        outcome.lingering = lingering
        outcome.neighbours = self._watch.stop() if self._watch else None
        stolen = steal_ns()
        if stolen is not None and steal_at_start is not None and wall > 0:
            outcome.host_steal_share = (stolen - steal_at_start) / 1e9 / (wall * (os.cpu_count() or 1))
        self.outcomes.append(outcome)
        return outcome

    @property
    def where(self) -> str:
        """run.json's path, for the one-line error should a section gathered for it not be what it must."""
        return str(self.run_dir / RUN_JSON)

    def collect(self, plan: Plan, command_line: list[str]) -> RunDoc:
        """Run every pass and finalise run.json. A stop signal (or Ctrl-C) ends the pass in flight and skips
        the rest: run.json is then final with status "interrupted" and the signal, and collect returns
        normally; the caller turns that into its exit status. Only a second signal raises (Interrupted)."""
        from hwprof.core.host import host_info

        reserve = SpaceReserve(self.run_dir)  # given back before the last run.json: it fits on a full disk
        with self.stop.deferred():
            self._write_inputs()
            self.run = RunDoc.of(
                schema_version=SCHEMA_VERSION,
                run_id=self.run_dir.name,
                status="running",
                created=datetime.now(UTC).isoformat(timespec="seconds"),
                command=json_value(command_line),
                config=RunConfigDoc.from_json(json_value(self.config.to_dict()), self.where, "config."),
                host=HostDoc.from_json(json_value(host_info()), self.where, "host."),
                images=json_value(
                    {
                        "paths": [str(p) for p in self.images.paths],
                        "skipped": self.images.skipped,
                        "source": self.images.source,
                    }
                ),
                clock={"id": "CLOCK_MONOTONIC", "unit": "ns"},
                collectors=dict(plan.statuses),
                passes={},
            )
            if self.disk_estimate is not None:
                self.run.update(disk_estimate=json_value(self.disk_estimate))
            write_run_json(self.run_dir, self.run)
        final = "complete"
        try:
            self.run.update(peaks=PeaksDoc.from_json(json_value(_peaks(self.config.threads)), self.where, "peaks."))
            for pass_plan in plan.passes:
                if self.stop.requested:
                    break
                outcome = self.run_pass(pass_plan)
                if outcome.name in self.disk_full:
                    raise DiskFullError(self.disk_full[outcome.name])
                with self.stop.deferred():
                    self._record(outcome)
                if outcome.status != "ok":
                    final = "partial"
                if outcome.returncode == 3 and not self.stop.requested:
                    # The workload itself failed (model, weights, images): every later pass would too.
                    log = self.run_dir / "passes" / outcome.name / "worker.log"
                    raise CollectError(error_line(log) or outcome.error)
        except KeyboardInterrupt:
            if not self.stop.requested:  # a caller without StopSignals (tests, the library)
                self.stop.note(signal.SIGINT)
            with self.stop.deferred():
                for outcome in self.outcomes[len(self.run.passes) :]:
                    self._record(outcome)
        except CollectError:
            final = "failed"
            raise
        except DiskFullError as exc:  # the collection cannot go on: run.json says failed, and where
            for outcome in self.outcomes[len(self.run.passes) :]:
                self._record(outcome, write=False)  # finalize writes it, after the reserve is given back
            final = "failed"
            self.run.update(error=str(exc))
            raise
        finally:
            from hwprof.session.finish import finalize, write_final_exports

            with self.stop.deferred():
                if self.stop.requested:
                    final = "interrupted"
                    self.run.update(interrupted=self._interruption(plan))
                self.run.update(status=final, finished=datetime.now(UTC).isoformat(timespec="seconds"))
                reserve.release()
                try:
                    self.data = finalize(self.named_dir, self.run)
                except DiskFullError:
                    if self.run.error is None:  # else the first full write is the one to report
                        raise
            if self.data is not None and self.run.error is None:  # a full disk stopped it: no exports to try
                self.analysis = write_final_exports(self.data)  # after a second signal too: a third one cuts it
        return self.run

    def _interruption(self, plan: Plan) -> JsonObject:
        """run.json "interrupted": the signal, how often it came, and which passes ran, stopped or never started."""
        ran = list(self.run.passes)
        return {
            "signal": self.stop.name or "SIGINT",
            "signals_received": max(self.stop.count, 1),
            "escalated": self.stop.escalated,
            "passes_interrupted": [n for n, p in self.run.passes.items() if p.status == "interrupted"],
            "passes_not_run": [p.name for p in plan.passes if p.name not in ran],
        }

    def _record(self, outcome: PassOutcome, write: bool = True) -> None:
        entry = PassDoc.of(
            status=outcome.status,
            returncode=outcome.returncode,
            wall_s=round(outcome.wall_s, 3),
            pid=outcome.pid,
            error=outcome.error,
            collectors=sorted(outcome.results),
            log=f"passes/{outcome.name}/worker.log",
            host_steal_share=outcome.host_steal_share,
            neighbours=json_value(neighbours_entry(outcome.neighbours)),
        )
        if outcome.lingering:
            entry.update(lingering=json_value([x.to_dict() for x in outcome.lingering]))
        self.run.passes[outcome.name] = entry
        for name, result in outcome.results.items():
            self.run.collectors[name] = CollectorEntry.read(
                name, json_value({**result.to_dict(), "pass": outcome.name}), self.where
            )
        if outcome.runtime:
            self._record_runtime(outcome.name, outcome.runtime)
        if write:
            write_run_json(self.run_dir, self.run)

    def _record_runtime(self, pass_name: str, info: dict[str, Any]) -> None:
        """run.json's "runtime": what ran the forward (from the first pass), and each profiled pass's clock."""
        profiler = {
            k: info.pop(k) for k in ("profiler", "clock", "replayed_layer_markers", "profile_error") if k in info
        }
        if self.run.runtime is None:
            first = json_value({"name": info.get("runtime"), **info, "profiled_passes": {}})
            self.run.update(runtime=RuntimeDoc.from_json(first, self.where, "runtime."))
        runtime = self.run.runtime
        if profiler and runtime is not None and runtime.profiled_passes is not None:
            where = f"runtime.profiled_passes.{pass_name}."
            runtime.profiled_passes[pass_name] = ProfiledPass.from_json(json_value(profiler), self.where, where)


def _peaks(threads: int) -> dict[str, Any]:
    """This host's measured peak GFLOP/s and GB/s (cached per host), for the roofline."""
    from hwprof.hardware.machine import measure_peaks

    try:
        return measure_peaks(threads).to_dict()
    except Exception as exc:
        return {
            "status": "unavailable",
            "reason": f"measuring the peaks failed: {type(exc).__name__}: {exc}",
            "fix": "hwprof doctor --peaks --force",
        }
