"""torch.profiler in the trace pass: every aten op attributed to its layer, on the run's clock.

In the child, stage/iteration/layer markers open and close `record_function` ranges
("hwprof:stage:forward", "hwprof:layer:model.7", "hwprof:iteration:3"), so each aten op lies
inside the range of the layer that ran it. Kineto's raw chrome trace is kept as
`torch_profiler.kineto.json`.

Clock. Kineto writes `baseTimeNanoseconds + ts_us * 1000` on the wall clock (its TSC clock is
converted to Unix time), not on CLOCK_MONOTONIC. Right after the profiler starts and right before
it stops, a few `hwprof_clock_sync` ranges are opened between two `time.monotonic_ns()` reads:
the range's start lies inside that window, so each gives mono - kineto with an uncertainty of
half the window. The tightest sync at each end gives the offset; between them the offset is
interpolated linearly (this absorbs the drift of Kineto's TSC conversion). The alignment error
is then measured independently on every stage and layer range: |converted range edge - marker
t_ns| (median, p95, max), since each range was opened by the same marker whose monotonic time
the bus recorded.

oneDNN. During the measured iterations oneDNN's verbose mode is switched on at run time
(`torch.backends.mkldnn.verbose`), with `ONEDNN_VERBOSE_TIMESTAMP=1` set in open(), before
torch loads oneDNN (setting `ONEDNN_VERBOSE=1` there works too, but would print from the model
build and warm-up on). oneDNN prints with C stdio to fd 1, which is the worker's progress pipe:
fd 1 is pointed at `torch_profiler.onednn.log` for the measured iterations while Python's
`sys.stdout` is moved to a duplicate of the original fd, so the progress lines keep flowing.
Each `primitive,exec` line (wall-clock ms at the primitive's start) is converted with a
wall/monotonic pair read in-process and matched by time to the innermost aten op around it;
its implementation (e.g. `jit_1x1:avx2`, `brg_conv_fwd:avx512_core`) becomes that op's kernel
label.

Artifacts in passes/trace/: torch_profiler.kineto.json (raw), torch_profiler.sync.json,
torch_profiler.flops.json (FunctionEvent flops by External id: the chrome trace has none),
torch_profiler.onednn.log (raw verbose lines), torch_profiler.records.jsonl (aten op and oneDNN
spans), torch_profiler.metrics.json (per layer/stage), torch_profiler.kernels.json.
"""

from __future__ import annotations

import bisect
import ctypes
import functools
import gzip
import io
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import Capability, Collector, CollectorResult, PassContext

from hwprof.records import MetricTables, Span, metrics_path, records_path, write_records
from hwprof.workload.markers import Marker, read_markers

if TYPE_CHECKING:
    from hwprof.config import RunConfig

NAME = "torch_profiler"
RANGE_PREFIX = "hwprof:"
SYNC_NAME = "hwprof_clock_sync"
SYNC_REPEATS = 8
TOP_KERNELS = 10
MATCH_LOOKBACK = 256
"""Ops walked back over when looking for the op that contains a oneDNN primitive."""
EDGE_TOLERANCE_NS = 2
"""Kineto rounds ts and dur to the ns separately, so a child may end 1 ns after its parent."""

_PROBE_CODE = """
import json, torch
from torch.profiler import profile, ProfilerActivity
x = torch.ones(64, 64)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    with torch.autograd.profiler.record_function("hwprof_probe"):
        (x @ x).sum()
names = {e.name for e in prof.events()}
print(json.dumps({"torch": torch.__version__, "kineto": torch.autograd.kineto_available(),
                  "mkldnn": torch.backends.mkldnn.is_available(),
                  "ok": "hwprof_probe" in names and "aten::mm" in names}))
"""


# ----------------------------------------------------------------------------- the collector


class TorchProfilerCollector(Collector):
    name = NAME
    title = "torch.profiler (Kineto) with oneDNN verbose"
    pass_name = "trace"
    subscribes = True
    order = 40
    needs_layer_markers = True

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self._prof: Any = None
        self._active = False
        self._stack: list[tuple[str, Any]] = []
        self._syncs: dict[str, list[list[int]]] = {"start": [], "stop": []}
        self._wall_pairs: list[list[int]] = []
        self._verbose: Any = None
        self._capture: _StdoutToFile | None = None
        self._onednn = bool(config.extra.get("onednn_verbose", True))

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        return _probe(sys.executable)

    def open(self, ctx: PassContext) -> None:
        if self._onednn:
            # Read by oneDNN when it first initialises, i.e. at the first primitive, after this.
            os.environ.setdefault("ONEDNN_VERBOSE_TIMESTAMP", "1")

    def start(self, ctx: PassContext) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        self._prof = profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=True,
            with_flops=True,
            with_stack=self.config.profiler_stack,
        )
        self._prof.start()
        self._active = True
        try:
            self._syncs["start"] = _sync_ranges(torch)
            self._wall_pairs.append(_wall_pair())
            if self._onednn and torch.backends.mkldnn.is_available():
                self._capture = _StdoutToFile(ctx.out_dir / f"{NAME}.onednn.log")
                self._capture.__enter__()
                self._verbose = torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON)
                self._verbose.__enter__()
        except BaseException:
            self._abort()
            raise

    def on_marker(self, marker: Marker) -> None:
        if not self._active:
            return
        import torch

        label = _range_name(marker)
        if marker.phase == "B":
            self._stack.append((label, torch.ops.profiler._record_function_enter_new(label, None)))
            return
        if not self._stack or self._stack[-1][0] != label:
            open_ = self._stack[-1][0] if self._stack else "nothing"
            self._abort()
            raise RuntimeError(f"marker {label} ends while {open_} is open: markers do not nest")
        torch.ops.profiler._record_function_exit._RecordFunction(self._stack.pop()[1])

    def stop(self, ctx: PassContext) -> None:
        self._finish_profiling()

    def _finish_profiling(self) -> None:
        if not self._active:
            return
        import torch

        self._active = False
        try:
            while self._stack:  # only after an error inside an iteration
                torch.ops.profiler._record_function_exit._RecordFunction(self._stack.pop()[1])
            if self._verbose is not None:
                self._verbose.__exit__(None, None, None)
                self._verbose = None
        finally:
            if self._capture is not None:
                self._capture.__exit__(None, None, None)
                self._capture = None
            self._wall_pairs.append(_wall_pair())
            self._syncs["stop"] = _sync_ranges(torch)
            self._prof.stop()

    def _abort(self) -> None:
        """Leave the process as it was when a hook fails: the worker calls no more hooks after that."""
        try:
            self._finish_profiling()
        finally:
            self._prof = None

    def close(self, ctx: PassContext) -> CollectorResult:
        self._finish_profiling()
        if self._prof is None:
            return CollectorResult("failed", reason="the profiler never started: the pass ended before start()")
        out = ctx.out_dir
        trace_path = out / f"{NAME}.kineto.json"
        if trace_path.is_file():
            trace_path.unlink()
        self._prof.export_chrome_trace(str(trace_path))
        if not trace_path.is_file():  # Kineto logs a failed write and returns normally
            raise RuntimeError(f"Kineto did not write its trace to {trace_path} (see the worker log)")
        flops = _flops_by_id(self._prof)
        (out / f"{NAME}.flops.json").write_text(json.dumps(flops))
        sync = SyncData(self._syncs["start"], self._syncs["stop"], self._wall_pairs)
        (out / f"{NAME}.sync.json").write_text(json.dumps(sync.to_dict()))
        log = out / f"{NAME}.onednn.log"
        markers = read_markers(out / "markers.jsonl") if (out / "markers.jsonl").exists() else []
        converted = convert(load_kineto(trace_path), sync, markers, log if log.exists() else None, flops)
        artifacts = write_outputs(out, converted)
        for path in (trace_path, out / f"{NAME}.sync.json", out / f"{NAME}.flops.json", log):
            if path.exists():
                artifacts.insert(0, path.name)
        return CollectorResult(
            "ok" if converted.summary["aten_ops"] else "failed",
            reason="" if converted.summary["aten_ops"] else "the trace holds no aten op",
            summary=converted.summary,
            artifacts=[ctx.relpath(out / name) for name in artifacts],
        )


COLLECTOR = TorchProfilerCollector


@functools.cache
def _probe(python: str) -> Capability:
    """Profile one matmul in a child (torch is not imported in the parent)."""
    try:
        done = subprocess.run([python, "-c", _PROBE_CODE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Capability.unavailable(f"could not run the torch.profiler probe: {exc}", "check the Python install")
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Capability.unavailable(f"torch.profiler probe failed: {tail}", "pip install torch==2.13.0")
    info = json.loads(lines[-1])
    if not info["ok"]:
        return Capability.unavailable(
            "torch.profiler recorded no aten op (Kineto unavailable?)", "install a torch build with Kineto"
        )
    return Capability.ok(**info)


def _flops_by_id(prof: Any) -> dict[int, int]:
    """FLOPs of each op by its External id (the chrome trace has none). Kineto's raw events are read
    directly: prof.events() builds the whole FunctionEvent tree, about 40x slower."""
    try:
        raw = prof.profiler.kineto_results.events()
        return {int(e.correlation_id()): int(e.flops()) for e in raw if e.flops()}
    except AttributeError:  # a torch without these accessors
        return {int(e.id): int(e.flops) for e in prof.events() if getattr(e, "flops", 0)}


def _range_name(marker: Marker) -> str:
    if marker.kind == "iteration":
        return f"{RANGE_PREFIX}iteration:{marker.iteration}"
    return f"{RANGE_PREFIX}{marker.kind}:{marker.name}"


def _sync_ranges(torch: Any) -> list[list[int]]:
    """[mono before enter, mono after enter] of SYNC_REPEATS sync ranges, in order."""
    windows = []
    for _ in range(SYNC_REPEATS):
        before = time.monotonic_ns()
        handle = torch.ops.profiler._record_function_enter_new(SYNC_NAME, None)
        after = time.monotonic_ns()
        torch.ops.profiler._record_function_exit._RecordFunction(handle)
        windows.append([before, after])
    return windows


def _wall_pair() -> list[int]:
    """[mono before, wall, mono after]: the wall clock read between two monotonic reads."""
    before = time.monotonic_ns()
    wall = time.time_ns()
    return [before, wall, time.monotonic_ns()]


class _StdoutToFile:
    """fd 1 (C stdio, where oneDNN prints) goes to a file; Python's sys.stdout stays on the old fd 1."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._libc = ctypes.CDLL(None)

    def __enter__(self) -> _StdoutToFile:
        sys.stdout.flush()
        self._libc.fflush(None)
        self._saved_fd = os.dup(1)
        self._saved_stdout = sys.stdout
        encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
        sys.stdout = io.TextIOWrapper(open(os.dup(self._saved_fd), "wb"), encoding=encoding, line_buffering=True)
        self._file = open(self.path, "ab")
        os.dup2(self._file.fileno(), 1)
        return self

    def __exit__(self, *exc: object) -> None:
        self._libc.fflush(None)
        sys.stdout.flush()
        os.dup2(self._saved_fd, 1)
        os.close(self._saved_fd)
        sys.stdout.close()
        sys.stdout = self._saved_stdout
        self._file.close()


# ----------------------------------------------------------------------------- conversion (pure)


@dataclass
class SyncData:
    start: list[list[int]]
    """[mono before, mono after] around each sync range opened after the profiler started."""
    stop: list[list[int]]
    wall_pairs: list[list[int]] = field(default_factory=list)
    """[mono before, wall ns, mono after], for oneDNN's wall-clock timestamps."""

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "stop": self.stop, "wall_pairs": self.wall_pairs, "sync_name": SYNC_NAME}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SyncData:
        return cls(data["start"], data.get("stop", []), data.get("wall_pairs", []))


@dataclass
class KEvent:
    """One complete ("X") Kineto event, on Kineto's wall clock in ns."""

    name: str
    cat: str
    tid: int
    ts: int
    dur: int
    args: dict[str, Any]

    @property
    def end(self) -> int:
        return self.ts + self.dur


@dataclass
class KinetoTrace:
    base_ns: int
    events: list[KEvent]


def _open_text(path: Path) -> Any:
    return gzip.open(path, "rt") if path.suffix == ".gz" else open(path)


def load_kineto(path: Path) -> KinetoTrace:
    """The complete events of a chrome trace written by export_chrome_trace (plain or .gz)."""
    with _open_text(path) as handle:
        data = json.load(handle)
    if "baseTimeNanoseconds" not in data:
        raise ValueError(f"{path}: no baseTimeNanoseconds: not a Kineto chrome trace")
    base = int(data["baseTimeNanoseconds"])
    events = []
    for raw in data.get("traceEvents", []):
        if raw.get("ph") != "X" or raw.get("cat") not in ("cpu_op", "user_annotation"):
            continue
        events.append(
            KEvent(
                name=raw["name"],
                cat=raw["cat"],
                tid=int(raw["tid"]),
                ts=base + round(float(raw["ts"]) * 1000),
                dur=round(float(raw.get("dur", 0)) * 1000),
                args=raw.get("args", {}),
            )
        )
    events.sort(key=lambda e: (e.tid, e.ts, -e.dur))
    return KinetoTrace(base, events)


@dataclass
class ClockFit:
    """mono = kineto_ns + offset(kineto_ns): linear between the start and stop syncs."""

    t0: int
    offset0: int
    t1: int
    offset1: int
    uncertainty_ns: int

    def __call__(self, kineto_ns: int) -> int:
        if self.t1 == self.t0:
            return kineto_ns + self.offset0
        slope = (self.offset1 - self.offset0) / (self.t1 - self.t0)
        return kineto_ns + self.offset0 + round(slope * (kineto_ns - self.t0))


def fit_clock(trace: KinetoTrace, sync: SyncData) -> ClockFit:
    ranges = [e for e in trace.events if e.name == SYNC_NAME]
    ranges.sort(key=lambda e: e.ts)
    windows = sync.start + sync.stop
    if not sync.start or len(ranges) != len(windows):
        raise ValueError(f"{len(ranges)} {SYNC_NAME} ranges in the trace for {len(windows)} recorded syncs")
    points = []  # (kineto ts, offset, half width)
    for event, (before, after) in zip(ranges, windows, strict=True):
        points.append((event.ts, (before + after) // 2 - event.ts, (after - before) // 2))
    first = min(points[: len(sync.start)], key=lambda p: p[2])
    last = min(points[len(sync.start) :], key=lambda p: p[2]) if sync.stop else first
    return ClockFit(first[0], first[1], last[0], last[1], max(first[2], last[2]))


def _wall_offset(sync: SyncData) -> int | None:
    """mono - wall, from the tightest wall/monotonic pair."""
    if not sync.wall_pairs:
        return None
    before, wall, after = min(sync.wall_pairs, key=lambda p: p[2] - p[0])
    return (before + after) // 2 - wall


@dataclass
class OneDnnExec:
    ts_ns: int
    """Monotonic ns at the primitive's start."""
    kind: str
    impl: str
    prop: str
    problem: str
    exec_ms: float

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.impl}"


@dataclass
class OneDnnLog:
    execs: list[OneDnnExec]
    info: dict[str, str]
    lines: int
    untimed: int


def parse_onednn(path: Path, wall_to_mono_ns: int) -> OneDnnLog:
    """`onednn_verbose,v1,<ts ms>,primitive,exec,cpu,<kind>,<impl>,<prop>,<md>,<attr>,<aux>,<desc>,<ms>`."""
    execs, info, lines, untimed = [], {}, 0, 0
    with open(path, errors="replace") as handle:
        for line in handle:
            if not line.startswith("onednn_verbose,"):
                continue
            lines += 1
            parts = line.rstrip("\n").split(",")
            if len(parts) > 3 and parts[2] == "info":
                if parts[3] == "cpu" and len(parts) > 4 and ":" in parts[4]:
                    key, _, value = parts[4].partition(":")
                    info[key] = value
                elif parts[3].startswith("oneDNN"):
                    info["version"] = parts[3]
                continue
            if len(parts) < 14 or parts[3] != "primitive" or parts[4] != "exec":
                if len(parts) > 3 and parts[2] == "primitive" and parts[3] == "exec":
                    untimed += 1
                continue
            try:
                ts_ns = round(float(parts[2]) * 1e6) + wall_to_mono_ns
                exec_ms = float(parts[-1])
            except ValueError:
                untimed += 1
                continue
            execs.append(OneDnnExec(ts_ns, parts[6], parts[7], parts[8], parts[-2], exec_ms))
    return OneDnnLog(execs, info, lines, untimed)


@dataclass
class OpRecord:
    event: KEvent
    start: int
    """Monotonic ns."""
    self_ns: int
    layer: str | None
    stage: str | None
    iteration: int | None
    onednn: list[OneDnnExec] = field(default_factory=list)


@dataclass
class Converted:
    ops: list[OpRecord]
    spans: list[Span]
    metrics: MetricTables
    kernels: dict[str, Any]
    summary: dict[str, Any]


def _annotation_target(name: str) -> tuple[str, str] | None:
    if not name.startswith(RANGE_PREFIX):
        return None
    kind, _, rest = name[len(RANGE_PREFIX) :].partition(":")
    return kind, rest


def _contains(parent: KEvent, child: KEvent) -> bool:
    return child.ts < parent.end and child.end <= parent.end + EDGE_TOLERANCE_NS


def _walk(trace: KinetoTrace, fit: ClockFit) -> tuple[list[OpRecord], list[tuple[str, str, int, int]]]:
    """Nest events per thread: ops with self time and their layer/stage/iteration; hwprof ranges."""
    ops: list[OpRecord] = []
    ranges: list[tuple[str, str, int, int]] = []  # kind, name, mono start, mono end
    by_tid: dict[int, list[KEvent]] = defaultdict(list)
    for event in trace.events:
        by_tid[event.tid].append(event)
    for events in by_tid.values():
        stack: list[tuple[KEvent, OpRecord | None]] = []
        for event in events:
            while stack and not _contains(stack[-1][0], event):
                stack.pop()
            target = _annotation_target(event.name) if event.cat == "user_annotation" else None
            if target is not None:
                ranges.append((target[0], target[1], fit(event.ts), fit(event.end)))
                stack.append((event, None))
                continue
            if event.cat != "cpu_op":
                stack.append((event, None))
                continue
            layer = stage = None
            iteration: int | None = None
            for parent, parent_op in stack:
                if parent_op is not None:
                    continue
                found = _annotation_target(parent.name)
                if found is None:
                    continue
                if found[0] == "layer":
                    layer = found[1]
                elif found[0] == "stage":
                    stage = found[1]
                elif found[0] == "iteration":
                    iteration = int(found[1])
            for _parent, parent_op in reversed(stack):
                if parent_op is not None:
                    parent_op.self_ns -= event.dur
                    break
            record = OpRecord(event, fit(event.ts), event.dur, layer, stage, iteration)
            ops.append(record)
            stack.append((event, record))
    return ops, ranges


def _match_onednn(ops: list[OpRecord], log: OneDnnLog) -> dict[str, Any]:
    """Attach each primitive to the innermost aten op (on the converted clock) that contains its start.

    Ops on a thread nest, so of the ops containing an instant the innermost is the one that started
    last: walk back from the last op that started before the primitive.
    """
    ordered = sorted(ops, key=lambda o: o.start)
    starts = [o.start for o in ordered]
    matched = 0
    for prim in log.execs:
        j = bisect.bisect_right(starts, prim.ts_ns) - 1
        for k in range(j, max(j - MATCH_LOOKBACK, -1), -1):
            op = ordered[k]
            if prim.ts_ns <= op.start + op.event.dur:
                op.onednn.append(prim)
                matched += 1
                break
    return {"matched": matched, "unmatched": len(log.execs) - matched}


def _alignment(ranges: list[tuple[str, str, int, int]], markers: list[Marker]) -> dict[str, Any]:
    """|converted range edge - marker t_ns| for the k-th range and k-th measured marker pair of each name."""
    pairs: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    opened: dict[tuple[str, str], list[int]] = defaultdict(list)
    for m in markers:
        if m.warmup or m.kind == "iteration":
            continue
        key: tuple[str, str] = (m.kind, m.name)
        if m.phase == "B":
            opened[key].append(m.t_ns)
        elif opened[key]:
            pairs[key].append((opened[key].pop(), m.t_ns))
    seen: dict[tuple[str, str], int] = defaultdict(int)
    errors: dict[str, list[int]] = {"layer": [], "stage": []}
    for kind, name, start, end in sorted(ranges, key=lambda r: r[2]):
        if kind not in errors:
            continue
        key = (kind, name)
        k = seen[key]
        seen[key] += 1
        if k < len(pairs[key]):
            b, e = pairs[key][k]
            errors[kind].extend((start - b, end - e))
    out: dict[str, Any] = {}
    for kind, values in errors.items():
        if values:
            absolute = sorted(abs(v) for v in values)
            out[kind] = {
                "edges": len(values),
                "median_abs_us": statistics.median(absolute) / 1000,
                "p95_abs_us": absolute[min(len(absolute) - 1, int(0.95 * len(absolute)))] / 1000,
                "max_abs_us": absolute[-1] / 1000,
                "median_signed_us": statistics.median(values) / 1000,
            }
    return out


def _dims(event: KEvent) -> list[Any]:
    return [d for d in event.args.get("Input Dims", []) if d]


def convert(
    trace: KinetoTrace,
    sync: SyncData,
    markers: list[Marker],
    onednn_log: Path | None = None,
    flops: dict[int, int] | None = None,
) -> Converted:
    """Kineto events -> ops on the monotonic clock, per-layer tables, kernel rankings, spans."""
    fit = fit_clock(trace, sync)
    ops, ranges = _walk(trace, fit)
    ops = [o for o in ops if o.event.name != SYNC_NAME]
    flops = flops or {}
    iterations = sorted({o.iteration for o in ops if o.iteration is not None})
    n_iter = max(len(iterations), 1)
    summary: dict[str, Any] = {
        "events": len(trace.events),
        "aten_ops": len(ops),
        "iterations": len(iterations),
    }

    onednn_summary: dict[str, Any] = {"enabled": onednn_log is not None}
    wall = _wall_offset(sync)
    if onednn_log is not None and wall is not None:
        log = parse_onednn(onednn_log, wall)
        onednn_summary.update(lines=log.lines, primitives=len(log.execs), untimed=log.untimed, **log.info)
        if log.execs:
            onednn_summary.update(_match_onednn(ops, log))
        elif log.untimed:
            onednn_summary["reason"] = (
                "verbose lines carry no timestamp (ONEDNN_VERBOSE_TIMESTAMP was not set before oneDNN "
                "initialised): labels not attached"
            )
    summary["onednn"] = onednn_summary

    layer_stats: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    stage_stats: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    kernels: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    outside_layers_in_forward = 0
    for op in ops:
        key = op.layer if op.layer is not None else f"stage:{op.stage or 'none'}"
        if op.stage == "forward" and op.layer is None:
            outside_layers_in_forward += 1
        row = kernels[key].setdefault(
            op.event.name,
            {
                "name": op.event.name,
                "calls": 0,
                "self_ns": 0,
                "inclusive_ns": 0,
                "flops": 0,
                "shapes": Counter(),
                "onednn": {},
            },
        )
        row["calls"] += 1
        row["self_ns"] += op.self_ns
        row["inclusive_ns"] += op.event.dur
        row["flops"] += flops.get(int(op.event.args.get("External id", -1)), 0)
        row["shapes"][json.dumps(_dims(op.event))] += 1
        for prim in op.onednn:
            prow = row["onednn"].setdefault(
                prim.label, {"label": prim.label, "calls": 0, "exec_ms": 0.0, "problems": Counter()}
            )
            prow["calls"] += 1
            prow["exec_ms"] += prim.exec_ms
            prow["problems"][prim.problem] += 1
        target = layer_stats[op.layer] if op.layer is not None else None
        for stats in (target, stage_stats[op.stage] if op.stage else None):
            if stats is None:
                continue
            stats["aten_self_ms"] += op.self_ns / 1e6
            stats["aten_ops"] += 1
            stats["profiler_flops"] += flops.get(int(op.event.args.get("External id", -1)), 0)
            stats["onednn_exec_ms"] += sum(p.exec_ms for p in op.onednn)
    for kind, name, start, end in ranges:
        if kind == "layer":
            layer_stats[name]["profiler_layer_ms"] += (end - start) / 1e6
        elif kind == "stage":
            stage_stats[name]["profiler_stage_ms"] += (end - start) / 1e6
    summary["forward_ops_outside_layers"] = outside_layers_in_forward

    def per_iteration(table: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        return {k: {m: v / n_iter for m, v in row.items() if v} for k, row in table.items()}

    metrics = MetricTables(
        layers=per_iteration(layer_stats),
        stages=per_iteration(stage_stats),
        units={
            "aten_self_ms": "ms",
            "aten_ops": "count",
            "profiler_flops": "flop",
            "onednn_exec_ms": "ms",
            "profiler_layer_ms": "ms",
            "profiler_stage_ms": "ms",
        },
        methods={
            "aten_self_ms": "torch.profiler: self CPU time of the aten ops inside the range, on the thread "
            "that called them (intra-op worker threads are not separate events), mean per measured iteration",
            "profiler_flops": "torch.profiler with_flops formulas (convolution and matmul ops only)",
            "onednn_exec_ms": "ONEDNN_VERBOSE exec_time of the primitives matched to the range's aten ops",
            "profiler_layer_ms": "duration of the layer's record_function range (includes profiler overhead)",
        },
    )

    ranked: dict[str, list[dict[str, Any]]] = {}
    for key, rows in kernels.items():
        out_rows = []
        for row in sorted(rows.values(), key=lambda r: -r["self_ns"]):
            prims = sorted(row["onednn"].values(), key=lambda p: -p["exec_ms"])
            out_rows.append(
                {
                    "name": row["name"],
                    "label": next((p["label"] for p in prims if not p["label"].startswith("reorder")), None),
                    "calls": row["calls"],
                    "calls_per_iter": row["calls"] / n_iter,
                    "self_us": row["self_ns"] / 1000 / n_iter,
                    "inclusive_us": row["inclusive_ns"] / 1000 / n_iter,
                    "flops": row["flops"] / n_iter,
                    "shapes": [json.loads(s) for s, _ in row["shapes"].most_common(3)],
                    "onednn": [
                        {
                            "label": p["label"],
                            "calls": p["calls"],
                            "exec_ms_per_iter": p["exec_ms"] / n_iter,
                            "problems": [s for s, _ in p["problems"].most_common(3)],
                        }
                        for p in prims
                    ],
                }
            )
        ranked[key] = out_rows[:TOP_KERNELS] if key.startswith("stage:") else out_rows
    kernel_doc = {
        "iterations": len(iterations),
        "units": {
            "self_us": "us per iteration",
            "inclusive_us": "us per iteration",
            "flops": "per iteration",
        },
        "layers": {k: v for k, v in ranked.items() if not k.startswith("stage:")},
        "outside_layers": {k.removeprefix("stage:"): v for k, v in ranked.items() if k.startswith("stage:")},
    }

    overall: dict[str, float] = defaultdict(float)
    for op in ops:
        if op.layer is not None:
            overall[op.event.name] += op.self_ns
    total = sum(overall.values()) or 1
    summary["top_kernels"] = [
        {"name": n, "self_ms_per_iter": v / 1e6 / n_iter, "share": v / total}
        for n, v in sorted(overall.items(), key=lambda kv: -kv[1])[:5]
    ]
    summary["clock"] = {
        "method": f"{SYNC_NAME} ranges between two monotonic reads at profiler start and stop; "
        "offset interpolated linearly between them; error measured on the stage/layer ranges vs markers",
        "offset_ns": fit.offset0,
        "drift_ns": fit.offset1 - fit.offset0,
        "sync_uncertainty_ns": fit.uncertainty_ns,
        "alignment": _alignment(ranges, markers),
    }
    spans = _spans(ops)
    return Converted(ops, spans, metrics, kernel_doc, summary)


def _spans(ops: list[OpRecord]) -> list[Span]:
    spans = []
    for op in ops:
        args: dict[str, Any] = {"self_us": op.self_ns / 1000}
        if op.layer:
            args["layer"] = op.layer
        dims = _dims(op.event)
        if dims:
            args["input_dims"] = dims
        labels = sorted({p.label for p in op.onednn if p.kind != "reorder"})
        if labels:
            args["onednn"] = labels
        spans.append(Span(op.event.name, op.start, op.event.dur, f"thread:{op.event.tid}", "aten", op.event.tid, args))
        end = op.start + op.event.dur
        for prim in op.onednn:
            # Two clock conversions meet here: keep the primitive inside its op so the trace nests.
            dur = max(min(round(prim.exec_ms * 1e6), end - op.start), 0)
            start = min(max(prim.ts_ns, op.start), end - dur)
            spans.append(
                Span(
                    prim.label,
                    start,
                    dur,
                    f"thread:{op.event.tid}",
                    "onednn",
                    op.event.tid,
                    {
                        "problem": prim.problem,
                        "prop_kind": prim.prop,
                        "exec_ms": prim.exec_ms,
                        "shifted_us": (start - prim.ts_ns) / 1000,
                    },
                )
            )
    return spans


def write_outputs(out_dir: Path, converted: Converted) -> list[str]:
    write_records(records_path(out_dir, NAME), converted.spans)
    converted.metrics.save(metrics_path(out_dir, NAME))
    (out_dir / f"{NAME}.kernels.json").write_text(json.dumps(converted.kernels, indent=1))
    return [records_path(out_dir, NAME).name, metrics_path(out_dir, NAME).name, f"{NAME}.kernels.json"]
