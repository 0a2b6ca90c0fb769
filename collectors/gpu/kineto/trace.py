"""A torch.profiler Chrome trace with CUDA activities, read into ranges, launches and GPU activities.

Kineto writes every event at `baseTimeNanoseconds + ts_us * 1000` on one clock (the wall clock, CPU
and GPU events alike: CUPTI converts GPU timestamps to it). A launch on the CPU (`cuda_runtime`
cudaLaunchKernel / cudaMemcpyAsync / cudaMemsetAsync, or `cuda_driver` cuLaunchKernel) and the
activity it started on the GPU (`kernel`, `gpu_memcpy`, `gpu_memset`) share `args.correlation`.
Ranges are the `user_annotation` events: `forward` around one forward and `layer <i> <Type>` around
each top-level layer (`model.model[i]`), as written by the GPU trace pass and the H100 recordings, and
`stage <name>` around each other pipeline stage (load, preprocess, h2d, postprocess), which the live
pass writes from hwprof's stage markers (the recordings profiled forwards only and have none).
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwprof.schema.codec import JsonObject

FORWARD_RANGE = "forward"
LAYER_RANGE = re.compile(r"^layer (\d+) (\S+)$")
STAGE_RANGE = re.compile(r"^stage (\S+)$")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def layer_range_name(index: int, type_name: str) -> str:
    """The range name of top-level layer `index` (the inverse of LAYER_RANGE)."""
    return f"layer {index} {type_name}"


def stage_range_name(stage: str) -> str:
    """The range name of pipeline stage `stage`: `forward` keeps the recordings' name."""
    return FORWARD_RANGE if stage == FORWARD_RANGE else f"stage {stage}"


@dataclass(frozen=True)
class Interval:
    """A CPU range or call, on the trace's clock in ns."""

    name: str
    tid: int
    ts: int
    dur: int
    correlation: int | None = None
    cat: str = ""

    @property
    def end(self) -> int:
        return self.ts + self.dur


@dataclass(frozen=True)
class GpuActivity:
    """A kernel, copy or memset on the GPU, on the trace's clock in ns."""

    name: str
    cat: str
    device: int
    stream: int
    ts: int
    dur: int
    correlation: int
    args: dict[str, object] = field(default_factory=dict, compare=False, hash=False)
    """Launch details passed on to the trace span: grid, block, registers per thread, shared memory, bytes."""

    @property
    def end(self) -> int:
        return self.ts + self.dur


@dataclass
class GpuTrace:
    base_ns: int
    forwards: list[Interval]
    layers: list[Interval]
    launches: list[Interval]
    """Every CPU call with a correlation id (launches, copies, syncs), by time."""
    activities: dict[int, GpuActivity]
    """GPU activities by correlation id."""
    device_name: str = ""
    stages: list[Interval] = field(default_factory=list)
    """Stage ranges other than `forward` (named by the stage: "h2d", "postprocess"), by time."""

    def stage_ranges(self) -> list[Interval]:
        """Every stage range by time, the `forward` ranges included (named "forward")."""
        return sorted([*self.stages, *self.forwards], key=lambda r: r.ts)


def _ns(value: Any) -> int:
    return round(float(value) * 1000)


def load_gpu_trace(path: Path) -> GpuTrace:
    """Read a Chrome trace from export_chrome_trace (plain or .gz)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        data = json.load(handle)
    if "baseTimeNanoseconds" not in data:
        raise ValueError(f"{path}: no baseTimeNanoseconds: not a torch.profiler (Kineto) chrome trace")
    return parse_gpu_trace(data)


def parse_gpu_trace(data: JsonObject) -> GpuTrace:
    """The Chrome trace's JSON object: the forward, layer and stage ranges, the launches and the GPU activities."""
    base = int(data["baseTimeNanoseconds"])
    forwards: list[Interval] = []
    layers: list[Interval] = []
    stages: list[Interval] = []
    launches: list[Interval] = []
    activities: dict[int, GpuActivity] = {}
    for raw in data.get("traceEvents", []):
        if raw.get("ph") != "X":
            continue
        cat = raw.get("cat")
        args = raw.get("args") or {}
        ts, dur = base + _ns(raw["ts"]), _ns(raw.get("dur", 0))
        if cat == "user_annotation":
            name = raw["name"]
            if name == FORWARD_RANGE:
                forwards.append(Interval(name, int(raw["tid"]), ts, dur))
            elif LAYER_RANGE.match(name):
                layers.append(Interval(name, int(raw["tid"]), ts, dur))
            elif stage := STAGE_RANGE.match(name):
                stages.append(Interval(stage.group(1), int(raw["tid"]), ts, dur))
        elif cat in LAUNCH_CATS and "correlation" in args:
            launches.append(Interval(raw["name"], int(raw["tid"]), ts, dur, int(args["correlation"]), cat))
        elif cat in GPU_CATS and "correlation" in args:
            activities[int(args["correlation"])] = GpuActivity(
                raw["name"],
                cat,
                int(args.get("device", 0)),
                int(args.get("stream", raw.get("tid", 0))),
                ts,
                dur,
                int(args["correlation"]),
                {k: args[k] for k in ("grid", "block", "registers per thread", "shared memory", "bytes") if k in args},
            )
    forwards.sort(key=lambda r: r.ts)
    layers.sort(key=lambda r: r.ts)
    stages.sort(key=lambda r: r.ts)
    launches.sort(key=lambda r: r.ts)
    props = data.get("deviceProperties") or [{}]
    return GpuTrace(base, forwards, layers, launches, activities, str(props[0].get("name", "")), stages)
