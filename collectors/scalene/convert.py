"""Scalene's JSON as hwprof records: lines and functions charged to stages, memory as counter samples on the
run's clock.
"""

from __future__ import annotations

import bisect
import json
import os
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hwprof.collectors.scalene.profile import (
    ScaleneFile,
    ScaleneFunction,
    ScaleneLine,
    ScaleneProfile,
    ScaleneWindow,
    parse_scalene_json,
)

from hwprof.core.atomic import atomic_write_text
from hwprof.core.markers import STAGES, Marker
from hwprof.schema.codec import JsonObject
from hwprof.schema.records import CounterSample, MetricTables, metrics_path, records_path, write_records
from hwprof.schema.summaries_tools import ScaleneSummary, ScaleneTopLine

NAME = "scalene"
PIPELINE_FILE = "hwprof/workload/pipeline.py"
STAGE_FUNCTIONS = {f"Pipeline.{stage}": stage for stage in STAGES}
RUNTIME_FORWARD = {
    "hwprof/workload/runtime.py": "TorchRuntime._execute",
    "hwprof/workload/rt_onnxruntime.py": "OnnxRuntime._execute",
    "hwprof/workload/rt_openvino.py": "OpenVinoRuntime._execute",
    "hwprof/program/driver.py": "ProgramDriver.model_forward",
}
"""Where the model call itself lives: the forward stage's lines run there, through the runtime (a user program's
model is called from the driver's frame, hwprof.program.driver)."""
OUTSIDE_STAGES = "outside stages"
"""Where a sample falls in no stage span (a program's time that no stage claims is its "other")."""


def stage_of(filename: str, function: str) -> str | None:
    """The pipeline stage a function of hwprof's own code runs in, for the stage functions and the model call."""
    if filename.endswith(PIPELINE_FILE):
        return STAGE_FUNCTIONS.get(function)
    return "forward" if any(filename.endswith(f) and function == fn for f, fn in RUNTIME_FORWARD.items()) else None


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
    summary: ScaleneSummary

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


def _function_of(functions: list[ScaleneFunction], start_line: int | None) -> str:
    """The function whose definition line is the line's start_function_line (Scalene's own map)."""
    if start_line is not None:
        for fn in functions:
            if fn.lineno == start_line:
                return fn.name
    return ""


@dataclass
class _Profile:
    """Scalene's profile and the marker spans its sample times are placed in."""

    data: ScaleneProfile
    stage_spans: dict[str, list[tuple[int, int]]]
    layer_spans: dict[str, list[tuple[int, int]]]
    n_iter: int

    @property
    def elapsed(self) -> float:
        return self.data.elapsed_s

    @property
    def memory(self) -> bool:
        return self.data.memory


def convert(path: Path, markers: list[Marker], window: ScaleneWindow | None = None) -> Converted:
    profile = _load(path, markers)
    window = window or ScaleneWindow()
    lines: list[LineRecord] = []
    functions: list[FunctionRecord] = []
    for filename, info in profile.data.files.items():
        functions += _function_records(filename, info, profile.elapsed)
        lines += [x for row in info.lines if (x := _line_record(profile, filename, info, row)) is not None]
    metrics = _tables(_layer_shares(profile, lines), _stage_rows(profile, lines))
    counters = _memory_counters(profile.data, window)
    summary = ScaleneSummary.of(
        elapsed_s=profile.elapsed,
        memory=profile.memory,
        files=len(profile.data.files),
        lines=len(lines),
        functions=len(functions),
        iterations=profile.n_iter,
        top_lines=_top_lines_json(lines),
        clock=_alignment_json(lines, profile.data, profile.stage_spans, window),
        max_footprint_mb=profile.data.max_footprint_mb if profile.memory else None,
        memory_points=len(counters),
    )
    return Converted(lines, functions, metrics, counters, summary)


def _load(path: Path, markers: list[Marker]) -> _Profile:
    return _Profile(
        parse_scalene_json(json.loads(path.read_text()), str(path)),
        _span_index(markers, "stage"),
        _span_index(markers, "layer"),
        len({m.iteration for m in markers if m.kind == "iteration" and m.measured}) or 1,
    )


def _function_records(filename: str, info: ScaleneFile, elapsed: float) -> list[FunctionRecord]:
    return [
        FunctionRecord(
            filename,
            fn.name,
            int(fn.lineno if fn.lineno is not None else 0),
            elapsed * fn.cpu_percent_python / 100,
            elapsed * fn.cpu_percent_c / 100,
            elapsed * fn.sys_percent / 100,
            stage_of(filename, fn.name),
        )
        for fn in info.functions
    ]


def _line_record(profile: _Profile, filename: str, info: ScaleneFile, row: ScaleneLine) -> LineRecord | None:
    """One line of the profile, charged to a stage; None for a line with no time (and no allocation)."""
    elapsed = profile.elapsed
    python = elapsed * row.cpu_percent_python / 100
    native = elapsed * row.cpu_percent_c / 100
    system = elapsed * row.sys_percent / 100
    mem = dict(row.memory)
    if python + native + system == 0 and not (profile.memory and mem["n_malloc_mb"]):
        return None
    times = [round(t * 1e9) for t in row.cpu_samples]
    where = Counter(_locate(profile.stage_spans, t) or OUTSIDE_STAGES for t in times)
    function = _function_of(info.functions, row.start_function_line)
    stage = stage_of(filename, function)
    if stage is None and where:
        top, _ = where.most_common(1)[0]  # any stage of the run: a program's own (nms, write, --stage ones) too
        stage = top if top != OUTSIDE_STAGES else None
    return LineRecord(
        filename,
        row.lineno,
        row.code.rstrip("\n"),
        function,
        stage,
        python,
        native,
        system,
        row.core_utilization,
        len(times),
        dict(where),
        mem if profile.memory else {},
    )


def _stage_rows(profile: _Profile, lines: list[LineRecord]) -> dict[str, dict[str, float]]:
    """Per stage: the CPU time (and allocations) of its lines, per measured iteration."""
    n_iter = profile.n_iter
    stages: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for line in lines:
        if line.stage:
            row = stages[line.stage]
            row["scalene_python_s"] += line.python_s / n_iter
            row["scalene_native_s"] += line.native_s / n_iter
            row["scalene_system_s"] += line.system_s / n_iter
            if profile.memory:
                row["scalene_malloc_mb"] += line.memory["n_malloc_mb"] / n_iter
    return {k: dict(v) for k, v in stages.items()}


def _layer_shares(profile: _Profile, lines: list[LineRecord]) -> dict[str, dict[str, float]]:
    """Per layer: the share of the forward lines' kept sample times that fall in its spans."""
    layer_hits: Counter[str] = Counter()
    forward_samples = 0
    for line in lines:
        if line.stage != "forward":
            continue
        for t in (round(x * 1e9) for x in _samples_of(profile.data, line)):
            forward_samples += 1
            layer = _locate(profile.layer_spans, t)
            if layer is not None:
                layer_hits[layer] += 1
    if not forward_samples:
        return {}
    return {k: {"scalene_sample_share": v / forward_samples} for k, v in layer_hits.items()}


def _tables(layers: dict[str, dict[str, float]], stages: dict[str, dict[str, float]]) -> MetricTables:
    return MetricTables(
        layers=layers,
        stages=stages,
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


def _top_lines_json(lines: list[LineRecord]) -> list[ScaleneTopLine]:
    """The five lines with the most CPU time, for the summary."""
    return [
        ScaleneTopLine.of(
            where=f"{_short(x.file)}:{x.lineno}",
            code=x.code.strip()[:80],
            stage=x.stage,
            python_s=x.python_s,
            native_s=x.native_s,
            system_s=x.system_s,
        )
        for x in sorted(lines, key=lambda x: -(x.python_s + x.native_s + x.system_s))[:5]
    ]


def _samples_of(data: ScaleneProfile, line: LineRecord) -> list[float]:
    return data.files[line.file].samples_of(line.lineno)


def _alignment_json(
    lines: list[LineRecord],
    data: ScaleneProfile,
    stage_spans: dict[str, list[tuple[int, int]]],
    window: ScaleneWindow,
) -> JsonObject:
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
    out: JsonObject = {
        "method": "Scalene's sample times are time.perf_counter() = CLOCK_MONOTONIC: no offset; checked "
        "against the profiling window and, for Pipeline.<stage> lines, against that stage's marker spans",
        "offset_ns": 0,
        "samples_checked": len(distances),
    }
    if distances:
        outside = [d for d in distances if d > 0]
        out["outside_share"] = len(outside) / len(distances)
        out["outside_max_us"] = max(distances) / 1000
    start, stop = window.start_ns, window.stop_ns
    if start is not None and stop is not None:
        times = [round(t * 1e9) for line in lines for t in _samples_of(data, line)]
        beyond = [max(start - t, t - stop) for t in times if not start <= t <= stop]
        out["window_samples"] = len(times)
        out["outside_window"] = len(beyond)
        out["outside_window_max_us"] = max(beyond, default=0) / 1000
    return out


def _memory_counters(data: ScaleneProfile, window: ScaleneWindow) -> list[CounterSample]:
    start = window.scalene_start_ns
    if not data.memory or start is None:
        return []
    return [CounterSample("Scalene footprint", int(start + ns), float(mb), "MB") for ns, mb in data.footprint]


def _short(path: str) -> str:
    return "hwprof/" + path.split("/hwprof/", 1)[1] if "/hwprof/" in path else os.path.basename(path)


def write_outputs(out_dir: Path, converted: Converted) -> list[str]:
    names = [f"{NAME}.lines.json"]
    atomic_write_text(out_dir / names[0], json.dumps(converted.to_dict(), indent=1))
    converted.metrics.save(metrics_path(out_dir, NAME))
    names.append(metrics_path(out_dir, NAME).name)
    if converted.counters:
        write_records(records_path(out_dir, NAME), converted.counters)
        names.append(records_path(out_dir, NAME).name)
    return names
