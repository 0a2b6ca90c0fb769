"""Scalene in its own pass: per-line and per-function Python / native / system time of hwprof's code.

How it runs. wrap_command() turns `python -P -m hwprof.worker RUN PASS NAMES` into
`python -P -m scalene run -o passes/scalene/scalene.json --cpu-only --off --profile-all
--profile-only <hwprof package dir> --profile-exclude <collectors dir> -m hwprof.worker --- RUN
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
iterations of the paired pass, see hwprof.paired) and reports whether it really ran
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

See collectors/pyspy.py's docstring for which collectors may share a pass; Scalene shares none.
"""

from __future__ import annotations

import bisect
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import AttachedTool, Capability, Collector, CollectorResult, PassContext

import hwprof
from hwprof.records import CounterSample, MetricTables, metrics_path, records_path, write_records
from hwprof.workload.markers import STAGES, Marker, read_markers

if TYPE_CHECKING:
    from hwprof.config import RunConfig

NAME = "scalene"
WORKER_MODULE = "hwprof.worker"
PIPELINE_FILE = "hwprof/workload/pipeline.py"
STAGE_FUNCTIONS = {f"Pipeline.{stage}": stage for stage in STAGES}
RUNTIME_FORWARD = {
    "hwprof/workload/runtime.py": "TorchRuntime._execute",
    "hwprof/workload/rt_onnxruntime.py": "OnnxRuntime._execute",
    "hwprof/workload/rt_openvino.py": "OpenVinoRuntime._execute",
}
"""Where the model call itself lives: the forward stage's lines run there, through the runtime."""


def stage_of(filename: str, function: str) -> str | None:
    """The pipeline stage a function of hwprof's own code runs in, for the stage functions and the model call."""
    if filename.endswith(PIPELINE_FILE):
        return STAGE_FUNCTIONS.get(function)
    return "forward" if any(filename.endswith(f) and function == fn for f, fn in RUNTIME_FORWARD.items()) else None


NEEDED_OPTIONS = ("--off", "--profile-all", "--profile-only", "--profile-exclude")
TOP_LINES = 15


# ----------------------------------------------------------------------------- probe


def scalene_command(config: RunConfig, python: str) -> list[str] | None:
    """How to start Scalene: extra["scalene_path"] (an executable), else `python -m scalene`."""
    explicit = config.extra.get("scalene_path")
    if explicit:
        found = shutil.which(str(explicit))
        return [found] if found else None
    if python == sys.executable:
        return [python, "-P", "-m", "scalene"] if importlib.util.find_spec("scalene") else None
    return [python, "-P", "-m", "scalene"]


@functools.cache
def _probe(command: tuple[str, ...], memory: bool) -> Capability:
    """Scalene's `run --help-advanced` must offer the options this collector uses (the 2.x CLI)."""
    try:
        done = subprocess.run([*command, "run", "--help-advanced"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Capability.unavailable(f"scalene could not run: {exc}", "pip install 'scalene>=2.4'")
    text = done.stdout + done.stderr
    last = (text.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    if done.returncode != 0 and last.startswith(IMPORT_ERRORS):
        return Capability.unavailable(
            f"scalene is installed but cannot be imported: {last}", _import_fix(last, command)
        )
    missing = [opt for opt in NEEDED_OPTIONS if opt not in text]
    if done.returncode != 0 or missing:
        why = f"options {', '.join(missing)} missing" if missing else last
        return Capability.unavailable(
            f"scalene's `run` command is not the 2.x CLI ({why})", "pip install 'scalene>=2.4'"
        )
    if memory:
        spec = importlib.util.find_spec("scalene")
        origin = Path(spec.origin).parent if spec and spec.origin else None
        if origin is None or not (origin / "libscalene.so").exists():
            return Capability.unavailable(
                "Scalene's allocator shim libscalene.so is missing (memory profiling)",
                "pip install --force-reinstall 'scalene>=2.4' (x86-64/arm64 Linux), or run without memory",
            )
    return Capability.ok(command=" ".join(command))


IMPORT_ERRORS = ("ModuleNotFoundError: ", "ImportError: ")
REINSTALL = "pip install --force-reinstall 'scalene>=2.4'"


def _import_fix(error: str, command: tuple[str, ...]) -> str:
    """The command that installs what scalene's import lacks: the missing dependency at the version
    scalene requires (from its metadata, in this interpreter), else a reinstall of scalene and its
    dependencies."""
    found = re.search(r"No module named '([\w.]+)'", error)
    if found is None:
        return REINSTALL
    module = found.group(1).split(".")[0]
    dists = {_dist_key(d) for d in metadata.packages_distributions().get(module, [module])}
    try:
        requires = metadata.requires("scalene") or []
    except metadata.PackageNotFoundError:
        requires = []
    for requirement in requires:
        name = re.match(r"[A-Za-z0-9._-]+", requirement)
        if name and _dist_key(name.group(0)) in dists and "extra ==" not in requirement:
            spec = requirement.split(";")[0].strip()
            python = command[0] if command[1:3] == ("-P", "-m") else "python"
            return f"{python} -m pip install '{spec}'"
    return REINSTALL


def _dist_key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ----------------------------------------------------------------------------- collector


def _scalene_profiler() -> Any:
    """Scalene's profiler module when this process runs under `scalene run`, else None."""
    module = sys.modules.get("scalene.scalene_profiler")
    if module is None or not getattr(module.Scalene, "_Scalene__initialized", False):
        return None
    return module


class ScaleneCollector(Collector):
    name = NAME
    title = "Scalene (per-line Python / native / system time, memory on request)"
    pass_name = "scalene"

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self._window: dict[str, Any] = {}
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
        return _probe(tuple(command), config.scalene_memory)

    def wrap_command(self, command: list[str], ctx: PassContext) -> list[str]:
        try:
            at = next(i for i in range(len(command) - 1) if command[i : i + 2] == ["-m", WORKER_MODULE])
        except StopIteration:
            raise ValueError(f"scalene can only wrap `python -m {WORKER_MODULE}` (got {command})") from None
        scalene = scalene_command(self.config, command[0])
        if scalene is None:
            raise FileNotFoundError("scalene not found; fix: pip install 'scalene>=2.4'")
        package = Path(hwprof.__file__).resolve().parent
        collectors = Path(__file__).resolve().parent
        mode = ["--memory"] if self.config.scalene_memory else ["--cpu-only"]
        env = [shutil.which("env") or "/usr/bin/env", "PYTHONSAFEPATH=1"]
        only = [
            "--profile-all",
            "--profile-only",
            f"{package}{os.sep}",
            "--profile-exclude",
            f"{collectors}{os.sep}",
        ]
        out = str((ctx.out_dir / f"{NAME}.json").resolve())  # the session may start the worker elsewhere
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

    def start(self, ctx: PassContext) -> None:
        profiler = _scalene_profiler()
        self._window = {"under_scalene": profiler is not None}
        if profiler is None:
            return
        before = time.monotonic_ns()
        profiler.start()
        self._window.update(start_ns=before, start_call_us=(time.monotonic_ns() - before) / 1000)
        exact = getattr(profiler.Scalene, "_Scalene__start_time", None)  # its monotonic_ns() at start
        if isinstance(exact, int) and exact >= before:
            self._window["scalene_start_ns"] = exact

    def pause(self, ctx: PassContext) -> None:
        """Scalene off for a clean iteration of the paired pass (its samples and elapsed time stop)."""
        profiler = _scalene_profiler()
        if profiler is not None and "start_ns" in self._window and "stop_ns" not in self._window:
            profiler.stop()
            self._paused_at = time.monotonic_ns()

    def resume(self, ctx: PassContext) -> None:
        profiler = _scalene_profiler()
        if profiler is not None and self._paused_at is not None:
            profiler.start()
            self._window.setdefault("paused", []).append([self._paused_at, time.monotonic_ns()])
            self._paused_at = None

    def stop(self, ctx: PassContext) -> None:
        profiler = _scalene_profiler()
        if profiler is not None and "start_ns" in self._window and "stop_ns" not in self._window:
            self._window["stop_ns"] = time.monotonic_ns()
            if self._paused_at is None:
                profiler.stop()

    def close(self, ctx: PassContext) -> CollectorResult:
        self.stop(ctx)
        path = ctx.out_dir / f"{NAME}.window.json"
        path.write_text(json.dumps(self._window))
        if not self._window:
            return CollectorResult("failed", reason="the pass ended before the measured iterations started")
        if not self._window["under_scalene"]:
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
            converted = convert(self.path, markers, window)
        except (ValueError, KeyError) as exc:
            return CollectorResult(
                "failed",
                reason=f"Scalene's JSON could not be parsed: {exc}",
                artifacts=[*artifacts, self.ctx.relpath(self.path)],
            )
        names = write_outputs(out, converted)
        status = "ok" if worker_returncode in (0, None) else "partial"
        reason = "" if status == "ok" else f"the worker exited with status {worker_returncode}"
        return CollectorResult(
            status,
            reason=reason,
            summary=converted.summary,
            artifacts=[self.ctx.relpath(self.path), *artifacts, *(self.ctx.relpath(out / n) for n in names)],
        )


# ----------------------------------------------------------------------------- parsing (pure)


@dataclass
class LineRecord:
    file: str
    lineno: int
    code: str
    function: str
    stage: str | None
    python_s: float
    native_s: float
    system_s: float
    core_utilization: float
    samples: int
    """Sample times Scalene kept for the line (a reservoir: at most a few hundred)."""
    stage_samples: dict[str, int] = field(default_factory=dict)
    memory: dict[str, float] = field(default_factory=dict)


@dataclass
class FunctionRecord:
    file: str
    function: str
    lineno: int
    python_s: float
    native_s: float
    system_s: float
    stage: str | None = None


@dataclass
class Converted:
    lines: list[LineRecord]
    functions: list[FunctionRecord]
    metrics: MetricTables
    counters: list[CounterSample]
    summary: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"lines": [asdict(x) for x in self.lines], "functions": [asdict(x) for x in self.functions]}


def _span_index(markers: list[Marker], kind: str) -> dict[str, list[tuple[int, int]]]:
    """Measured (non-warm-up) spans of each stage or layer: name -> sorted [(start, end)]."""
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    opened: dict[str, list[int]] = defaultdict(list)
    for m in markers:
        if m.kind != kind or not m.measured:
            continue
        if m.phase == "B":
            opened[m.name].append(m.t_ns)
        elif opened[m.name]:
            spans[m.name].append((opened[m.name].pop(), m.t_ns))
    return {k: sorted(v) for k, v in spans.items()}


def _locate(spans: dict[str, list[tuple[int, int]]], t: int) -> str | None:
    """The innermost (latest-starting) span containing t."""
    best: tuple[int, str] | None = None
    for name, ranges in spans.items():
        i = bisect.bisect_right(ranges, (t, 2**63)) - 1
        if i >= 0 and ranges[i][0] <= t <= ranges[i][1] and (best is None or ranges[i][0] > best[0]):
            best = (ranges[i][0], name)
    return best[1] if best else None


def _distance_outside(ranges: list[tuple[int, int]], t: int) -> int:
    """0 when t lies in one of the ranges, else the distance to the nearest."""
    i = bisect.bisect_right(ranges, (t, 2**63)) - 1
    if i >= 0 and ranges[i][0] <= t <= ranges[i][1]:
        return 0
    candidates = []
    if i >= 0:
        candidates.append(t - ranges[i][1])
    if i + 1 < len(ranges):
        candidates.append(ranges[i + 1][0] - t)
    return min(candidates) if candidates else 0


def _function_of(functions: list[dict[str, Any]], lineno: int, start_line: int | None) -> str:
    """The function whose definition line is the line's start_function_line (Scalene's own map)."""
    if start_line is not None:
        for fn in functions:
            if fn.get("lineno") == start_line:
                return str(fn.get("line", ""))
    return ""


def convert(path: Path, markers: list[Marker], window: dict[str, Any] | None = None) -> Converted:
    data = json.loads(path.read_text())
    if "files" not in data or "elapsed_time_sec" not in data:
        raise ValueError(f"{path}: not a Scalene JSON profile")
    window = window or {}
    elapsed = float(data["elapsed_time_sec"])
    memory = bool(data.get("memory"))
    stage_spans = _span_index(markers, "stage")
    layer_spans = _span_index(markers, "layer")
    n_iter = len({m.iteration for m in markers if m.kind == "iteration" and m.measured}) or 1

    lines: list[LineRecord] = []
    functions: list[FunctionRecord] = []
    for filename, info in data["files"].items():
        fns = info.get("functions", [])
        for fn in fns:
            name = str(fn.get("line", ""))
            functions.append(
                FunctionRecord(
                    filename,
                    name,
                    int(fn.get("lineno", 0)),
                    elapsed * fn.get("n_cpu_percent_python", 0.0) / 100,
                    elapsed * fn.get("n_cpu_percent_c", 0.0) / 100,
                    elapsed * fn.get("n_sys_percent", 0.0) / 100,
                    stage_of(filename, name),
                )
            )
        for row in info.get("lines", []):
            python = elapsed * row.get("n_cpu_percent_python", 0.0) / 100
            native = elapsed * row.get("n_cpu_percent_c", 0.0) / 100
            system = elapsed * row.get("n_sys_percent", 0.0) / 100
            mem = {
                k: float(row.get(k, 0.0))
                for k in (
                    "n_malloc_mb",
                    "n_peak_mb",
                    "n_avg_mb",
                    "n_mallocs",
                    "n_python_fraction",
                    "n_copy_mb_s",
                )
            }
            if python + native + system == 0 and not (memory and mem["n_malloc_mb"]):
                continue
            times = [round(t * 1e9) for t in row.get("cpu_samples_list", [])]
            where = Counter(_locate(stage_spans, t) or "outside stages" for t in times)
            function = _function_of(fns, int(row["lineno"]), row.get("start_function_line"))
            stage = stage_of(filename, function)
            if stage is None and where:
                top, _ = where.most_common(1)[0]
                stage = top if top in STAGES else None
            lines.append(
                LineRecord(
                    filename,
                    int(row["lineno"]),
                    str(row.get("line", "")).rstrip("\n"),
                    function,
                    stage,
                    python,
                    native,
                    system,
                    float(row.get("n_core_utilization", 0.0)),
                    len(times),
                    dict(where),
                    mem if memory else {},
                )
            )

    stages: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for line in lines:
        if line.stage:
            row = stages[line.stage]
            row["scalene_python_s"] += line.python_s / n_iter
            row["scalene_native_s"] += line.native_s / n_iter
            row["scalene_system_s"] += line.system_s / n_iter
            if memory:
                row["scalene_malloc_mb"] += line.memory["n_malloc_mb"] / n_iter

    layer_hits: Counter[str] = Counter()
    forward_samples = 0
    for line in lines:
        if line.stage != "forward":
            continue
        for t in (round(x * 1e9) for x in _samples_of(data, line)):
            forward_samples += 1
            layer = _locate(layer_spans, t)
            if layer is not None:
                layer_hits[layer] += 1
    layers = (
        {k: {"scalene_sample_share": v / forward_samples} for k, v in layer_hits.items()} if forward_samples else {}
    )

    metrics = MetricTables(
        layers=layers,
        stages={k: dict(v) for k, v in stages.items()},
        units={
            "scalene_python_s": "s",
            "scalene_native_s": "s",
            "scalene_system_s": "s",
            "scalene_malloc_mb": "MB",
            "scalene_sample_share": "fraction",
        },
        methods={
            "scalene_python_s": "Scalene: CPU time in the Python interpreter on the stage's hwprof lines, "
            "per measured iteration (sampled every 10 ms)",
            "scalene_native_s": "Scalene: CPU time in native code (torch, OpenCV) called from those lines",
            "scalene_system_s": "Scalene: system (kernel) time on those lines",
            "scalene_sample_share": "estimate: share of the forward lines' kept sample times (a uniform "
            "reservoir) that fall in the layer's spans",
        },
    )
    counters = _memory_counters(data, window)
    summary: dict[str, Any] = {
        "elapsed_s": elapsed,
        "memory": memory,
        "files": len(data["files"]),
        "lines": len(lines),
        "functions": len(functions),
        "iterations": n_iter,
        "top_lines": [
            {
                "where": f"{_short(x.file)}:{x.lineno}",
                "code": x.code.strip()[:80],
                "stage": x.stage,
                "python_s": x.python_s,
                "native_s": x.native_s,
                "system_s": x.system_s,
            }
            for x in sorted(lines, key=lambda x: -(x.python_s + x.native_s + x.system_s))[:5]
        ],
        "clock": _alignment(lines, data, stage_spans, window),
        "max_footprint_mb": data.get("max_footprint_mb") if memory else None,
        "memory_points": len(counters),
    }
    return Converted(lines, functions, metrics, counters, summary)


def _samples_of(data: dict[str, Any], line: LineRecord) -> list[float]:
    for row in data["files"][line.file].get("lines", []):
        if int(row["lineno"]) == line.lineno:
            return list(row.get("cpu_samples_list", []))
    return []


def _alignment(
    lines: list[LineRecord],
    data: dict[str, Any],
    stage_spans: dict[str, list[tuple[int, int]]],
    window: dict[str, Any],
) -> dict[str, Any]:
    """Two independent checks of Scalene's sample times on the monotonic clock: every sample lies in
    the profiling window the worker recorded around scalene start/stop, and the samples of each
    Pipeline.<stage> line (and of the runtime's model call) lie in that stage's marker spans (when
    hwprof's model code is itself profiled, as for YOLOv7, those lines get few samples: the time goes
    to the model's lines)."""
    distances = []
    for line in lines:
        stage = stage_of(line.file, line.function)
        if stage is None:
            continue
        ranges = stage_spans.get(stage, [])
        if not ranges:
            continue
        distances += [_distance_outside(ranges, round(t * 1e9)) for t in _samples_of(data, line)]
    out: dict[str, Any] = {
        "method": "Scalene's sample times are time.perf_counter() = CLOCK_MONOTONIC: no offset; checked "
        "against the profiling window and, for Pipeline.<stage> lines, against that stage's marker spans",
        "offset_ns": 0,
        "samples_checked": len(distances),
    }
    if distances:
        outside = [d for d in distances if d > 0]
        out["outside_share"] = len(outside) / len(distances)
        out["outside_max_us"] = max(distances) / 1000
    start, stop = window.get("start_ns"), window.get("stop_ns")
    if start is not None and stop is not None:
        times = [round(t * 1e9) for line in lines for t in _samples_of(data, line)]
        beyond = [max(start - t, t - stop) for t in times if not start <= t <= stop]
        out["window_samples"] = len(times)
        out["outside_window"] = len(beyond)
        out["outside_window_max_us"] = max(beyond, default=0) / 1000
    return out


def _memory_counters(data: dict[str, Any], window: dict[str, Any]) -> list[CounterSample]:
    start = window.get("scalene_start_ns", window.get("start_ns"))
    if not data.get("memory") or start is None:
        return []
    return [CounterSample("Scalene footprint", int(start + ns), float(mb), "MB") for ns, mb in data.get("samples", [])]


def _short(path: str) -> str:
    return "hwprof/" + path.split("/hwprof/", 1)[1] if "/hwprof/" in path else os.path.basename(path)


def write_outputs(out_dir: Path, converted: Converted) -> list[str]:
    names = [f"{NAME}.lines.json"]
    (out_dir / names[0]).write_text(json.dumps(converted.to_dict(), indent=1))
    converted.metrics.save(metrics_path(out_dir, NAME))
    names.append(metrics_path(out_dir, NAME).name)
    if converted.counters:
        write_records(records_path(out_dir, NAME), converted.counters)
        names.append(records_path(out_dir, NAME).name)
    return names
