"""Scalene in its own pass: per-line and per-function Python / native / system time of hwprof's code.

How it runs. wrap_command() turns `python -P -m hwprof.session.worker RUN PASS NAMES` into
`python -P -m scalene run -o passes/scalene/scalene.json --cpu-only --no-stacks --off --profile-all
--profile-only <hwprof package dir> --profile-exclude <collectors dir>,<hwprof/core/markers.py> -m
hwprof.session.worker --- RUN
PASS NAMES` (`--memory` instead of `--cpu-only` when config.scalene_memory). Scalene's `-m` mode
runs the worker module in-process without putting its folder on sys.path, so `-P`'s safe-path
behaviour holds (a script path would put hwprof/ first on sys.path, and a launcher in collectors/
would put scalene.py there, shadowing the scalene package). `--profile-all --profile-only
<hwprof dir>` profiles hwprof's own files whether hwprof is installed editable or into
site-packages (which Scalene otherwise skips); the time spent inside torch is attributed to the
hwprof line that called it (e.g. `return self.model(batch)` in Pipeline.forward). Scalene starts
with profiling off, and this collector's in-process start()/stop() switch it on and off around the
measured iterations (scalene_profiler.start/stop), so import, model build and warm-up are not in
the profile. Memory mode re-executes Python with LD_PRELOAD=libscalene.so; `PYTHONSAFEPATH=1` is
set so that the re-executed child keeps `-P`'s behaviour. `--gpu` is never passed: with it
Scalene would run its own torch.profiler.

Why parsing happens in attach().finish(). Scalene writes its JSON when the profiled program exits,
after the worker's close() hooks ran, so the in-process close() cannot see it. The session calls
attach() for every collector of the pass right after spawning; attach() here returns a tool whose
finish() (called after the worker exited) parses the JSON. The in-process close() writes
`scalene.window.json` (monotonic times around scalene start/stop, and the pauses over the clean
iterations of the paired pass, see hwprof.session.paired) and reports whether it really ran
under Scalene.

Clock. Scalene stamps CPU samples with time.perf_counter(), which is CLOCK_MONOTONIC on Linux, so
the per-line `cpu_samples_list` (a uniform reservoir sample of each line's sample times) needs no
conversion. The alignment error is still measured: the samples of a line whose stage is known from
its function (Pipeline.forward's lines are in the forward stage) are checked against that stage's
spans from markers.jsonl (`outside_share`, `outside_max_us`). Scalene's memory series (`samples`:
[ns since Scalene's start(), MB], at most 100 points) is shifted by Scalene's own start time
(its `time.monotonic_ns()`, read from the profiler after start(); if that private attribute is
gone, by the monotonic time just before start(), error <= `start_call_us`). It is thin; the dense
memory track comes from the system sampler.

Per layer. Scalene knows lines, not layers. The sample times of the forward stage's lines are
split over the layer spans: `scalene_sample_share` per layer is an estimate (sampling, reservoir).

See collectors/pyspy/collector.py's docstring for which collectors may share a pass; Scalene shares none.
"""

from __future__ import annotations

import gc
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import AttachedTool, Capability, Collector, CollectorResult, PassContext, unconverted
from hwprof.collectors.scalene.convert import NAME, convert, write_outputs
from hwprof.collectors.scalene.forked_cli import MODULE as LAUNCH_MODULE
from hwprof.collectors.scalene.probe import kept_probe, probe_cli, scalene_command
from hwprof.collectors.scalene.profile import WindowFile, window_from_json

from hwprof.core.atomic import atomic_write_text
from hwprof.core.envvars import package_dir
from hwprof.core.main_thread import MAIN
from hwprof.core.markers import read_markers
from hwprof.core.spans import timing_forward_s

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig

WORKER_MODULE = "hwprof.session.worker"


TOP_LINES = 15


def _scalene_profiler() -> Any:
    """Scalene's profiler module when this process runs under `scalene run`, else None."""
    module = sys.modules.get("scalene.scalene_profiler")
    if module is None or not getattr(module.Scalene, "_Scalene__initialized", False):
        return None
    return module


MIN_PROFILED_S = 1.5
"""Scalene needs about 1 s of profiled time to write a profile; 1.5 s leaves a margin."""
MAX_ITERATIONS = 200


class ScaleneCollector(Collector):
    name = NAME
    cannot_attach = "Scalene starts the Python process it profiles: it cannot join a running service"
    title = "Scalene (per-line Python / native / system time, memory on request)"
    pass_name = "scalene"
    whole_process = True
    zygote_modules = (LAUNCH_MODULE,)

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self._window = WindowFile()
        self._paused_at: int | None = None
        # Scalene's stop()/start() add up its elapsed time and samples over the windows; its memory
        # footprint samples are timed from the latest start() only, so with --scalene-memory it stays on.
        self.switchable = not config.scalene_memory

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        command = scalene_command(config, sys.executable)
        if command is None:
            where = config.extra.get("scalene_path") or f"the scalene package for {sys.executable}"
            return Capability.unavailable(f"scalene not found ({where})", "pip install 'scalene>=2.4'")
        if config.extra.get("scalene_path"):
            return probe_cli(tuple(command), config.scalene_memory)
        return kept_probe(tuple(command), config.scalene_memory)

    def wrap_command(self, command: list[str], ctx: PassContext) -> list[str]:
        try:
            at = next(i for i in range(len(command) - 1) if command[i : i + 2] == ["-m", WORKER_MODULE])
        except StopIteration:
            raise ValueError(f"scalene can only wrap `python -m {WORKER_MODULE}` (got {command})") from None
        scalene = scalene_command(self.config, command[0])
        if scalene is None:
            raise FileNotFoundError("scalene not found; fix: pip install 'scalene>=2.4'")
        package = package_dir()
        collectors = Path(__file__).resolve().parent
        # no stack traces: hwprof reads Scalene's lines and functions only; its stacks cost each CPU sample a
        # native unwind and its exit a resolution of every address (yolov7-tiny at 320 on the 2-vCPU Xeon: the
        # pass's finish 1.0-1.2 s against 1.4-2.2 s with them, its paired cost 1.02-1.19x against 1.07-1.24x)
        mode = ["--memory" if self.config.scalene_memory else "--cpu-only", "--no-stacks"]
        env = [shutil.which("env") or "/usr/bin/env", "PYTHONSAFEPATH=1"]
        # the workload's own code too (a user's program's files); not the markers, and not a program driver's
        # wrapper of its model's forward (the model's time stays on the program's line that called it)
        profiled = [f"{package}{os.sep}", *(f"{folder}{os.sep}" for folder in self.config.workload_code())]
        hooks = ("core/markers.py", "program/driver.py")
        excluded = [f"{collectors}{os.sep}", *(str(package / part) for part in hooks)]
        only = [
            "--profile-all",
            "--profile-only",
            ",".join(profiled),
            "--profile-exclude",
            # the layer markers' wrapper runs each layer's forward: excluded, the model's time stays on the
            # line that called the model (Scalene charges a sample to the innermost frame it profiles)
            ",".join(excluded),
        ]
        out = str((ctx.out_dir / f"{NAME}.json").resolve())  # the session may start the worker elsewhere
        if not self.config.scalene_memory and scalene == [command[0], "-P", "-m", "scalene"]:
            env, scalene = [], [command[0], "-P", "-m", LAUNCH_MODULE]  # a fork of the zygote may run it (forked_cli)
        return [
            *env,
            *scalene,
            "run",
            "-o",
            out,
            *mode,
            "--off",
            *only,
            "-m",
            WORKER_MODULE,
            "---",
            *command[at + 2 :],
        ]

    def measured_iterations(self, ctx: PassContext) -> int | None:
        """Enough measured iterations for Scalene's sampling to see at least MIN_PROFILED_S of forward
        (from the clean timing pass's p50): with less it writes no profile at all (yolov8n at 160 over
        2 iterations is 30 ms). Bounded by MAX_ITERATIONS."""
        forward_s = timing_forward_s(ctx.run_dir)
        if not forward_s:
            return None
        return min(MAX_ITERATIONS, math.ceil(MIN_PROFILED_S / forward_s))

    def start(self, ctx: PassContext) -> None:
        profiler = _scalene_profiler()
        self._window = WindowFile.of(under_scalene=profiler is not None, pid=os.getpid())
        if profiler is None:
            return
        before = time.monotonic_ns()
        MAIN.call(profiler.start)  # signal handlers: the main thread's (a program's model may run in another)
        self._window.update(start_ns=before, start_call_us=(time.monotonic_ns() - before) / 1000)
        exact = getattr(profiler.Scalene, "_Scalene__start_time", None)  # its monotonic_ns() at start
        if isinstance(exact, int) and exact >= before:
            self._window.update(scalene_start_ns=exact)

    def after_iteration(self, ctx: PassContext, iteration: int) -> None:
        """The reference cycles Scalene's CPU signal handler leaves at each sample collected (its own frames and
        the interrupted forward's, with their tensors: cells of compute_frames_to_record): Python's collector
        rarely runs during a forward, so they piled up, about 50 MB a measured iteration of yolov7 at 640 on the
        2-vCPU Xeon (the worker at 2.29 GB after 24 iterations, 0.9-1.0 GB with this). The young generations
        suffice, between iterations: 0.4-29 ms there against 130-180 ms for a full collection."""
        if self._window.start_ns is not None:
            gc.collect(1)

    def pause(self, ctx: PassContext) -> None:
        """Scalene off for a clean iteration of the paired pass (its samples and elapsed time stop)."""
        profiler = _scalene_profiler()
        if profiler is not None and self._window.start_ns is not None and self._window.stop_ns is None:
            MAIN.call(profiler.stop)
            self._paused_at = time.monotonic_ns()

    def resume(self, ctx: PassContext) -> None:
        profiler = _scalene_profiler()
        if profiler is not None and self._paused_at is not None:
            MAIN.call(profiler.start)
            self._window.update(paused=[*(self._window.paused or []), [self._paused_at, time.monotonic_ns()]])
            self._paused_at = None

    def stop(self, ctx: PassContext) -> None:
        profiler = _scalene_profiler()
        if profiler is not None and self._window.start_ns is not None and self._window.stop_ns is None:
            self._window.update(stop_ns=time.monotonic_ns())
            if self._paused_at is None:
                MAIN.call(profiler.stop)

    def close(self, ctx: PassContext) -> CollectorResult:
        self.stop(ctx)
        path = ctx.out_dir / f"{NAME}.window.json"
        atomic_write_text(path, json.dumps(self._window.to_json()))
        if not self._window:
            return CollectorResult("failed", reason="the pass ended before the measured iterations started")
        if not self._window.under_scalene:
            return CollectorResult(
                "failed", reason="the worker did not run under `scalene run` (wrap_command was not applied)"
            )
        return CollectorResult(
            "skipped",
            reason="Scalene writes its profile after this process exits: its result is the one "
            "attach().finish() returns",
            artifacts=[ctx.relpath(path)],
        )

    def attach(self, pid: int, ctx: PassContext) -> AttachedTool | None:
        return ScaleneTool(ctx)


COLLECTOR = ScaleneCollector


class ScaleneTool(AttachedTool):
    """Nothing to attach: finish() parses Scalene's JSON once the worker (Scalene's process) exited."""

    def __init__(self, ctx: PassContext) -> None:
        self.ctx = ctx
        self.path = ctx.out_dir / f"{NAME}.json"

    def finish(self, worker_returncode: int | None, timeout_s: float = 30.0) -> CollectorResult:
        out = self.ctx.out_dir
        window_path = out / f"{NAME}.window.json"
        window = json.loads(window_path.read_text()) if window_path.exists() else {}
        if isinstance(window.get("pid"), int):  # Scalene leaves them where its process was stopped
            remove_shims(window["pid"])
        artifacts = [self.ctx.relpath(p) for p in (window_path,) if p.exists()]
        if not self.path.exists() or self.path.stat().st_size < 16:
            if not window:
                why = "the worker never reached the measured iterations"
            elif not window.get("under_scalene"):
                why = "the worker did not run under Scalene"
            else:
                why = "Scalene wrote no profile (measured iterations too short? Scalene needs about 1 s)"
            return CollectorResult(
                "failed", reason=f"{why}; worker exit status {worker_returncode}", artifacts=artifacts
            )
        markers_file = out / "markers.jsonl"
        markers = read_markers(markers_file) if markers_file.exists() else []
        try:
            converted = convert(self.path, markers, window_from_json(window))
        except (ValueError, KeyError) as exc:
            why = f"Scalene's JSON could not be parsed: {exc}"
            return unconverted(self.ctx, self.path, "Scalene's output", why, artifacts)
        names = write_outputs(out, converted)
        status = "ok" if worker_returncode in (0, None) else "partial"
        reason = "" if status == "ok" else f"the worker exited with status {worker_returncode}"
        return CollectorResult(
            status,
            reason=reason,
            summary=converted.summary,
            artifacts=[self.ctx.relpath(self.path), *artifacts, *(self.ctx.relpath(out / n) for n in names)],
        )


def remove_shims(pid: int, folder: Path | None = None) -> list[Path]:
    """Remove the folders of interpreter shims (`python`, `python3` scripts that re-enter Scalene) that Scalene's
    process `pid` made in the temporary folder and leaves behind: those whose `python` names `--pid=PID`."""
    removed = []
    for shims in Path(folder or tempfile.gettempdir()).glob("scalene*"):
        try:
            ours = f"--pid={pid} " in (shims / "python").read_text(errors="replace")
        except OSError:
            continue
        if ours:
            shutil.rmtree(shims, ignore_errors=True)
            removed.append(shims)
    return removed


# ----------------------------------------------------------------------------- parsing (pure)
