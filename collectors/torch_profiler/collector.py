"""torch.profiler in the trace pass: every aten op attributed to its layer, on the run's clock.

In the child, stage/iteration/layer markers open and close `record_function` ranges
("hwprof:stage:forward", "hwprof:layer:model.7", "hwprof:iteration:3"), so each aten op lies
inside the range of the layer that ran it. The ranges are torch's _RecordFunctionFast where it
exists (about 1 us a range here, against 22 us through the record_function ops). Kineto's raw chrome trace is kept as
`torch_profiler.kineto.json`.

A TorchScript model (a user's traced program: `ctx.layer_scopes` set) has no layer markers: its layers run
inside TorchScript. The profiler then records each op's module hierarchy (`with_modules`) in the warm-up
forward that records the shapes, each measured forward op takes its counterpart's and is charged to the layer
it names, and the layer spans made from the ops are handed back to the worker as replayed markers
(module_layers.py), so that the pass's layer times, the report and the trace have them.

Clock (clock.py). Kineto writes `baseTimeNanoseconds + ts_us * 1000` on the wall clock, not
on CLOCK_MONOTONIC: `hwprof_clock_sync` ranges opened between two monotonic reads right after the
profiler starts and right before it stops give the offset, interpolated linearly between them.
The alignment error is then measured on every stage and layer range against its marker
(convert.py).

oneDNN (onednn.py). During the first measured iteration (ONEDNN_ITERATIONS; extra
"onednn_iterations" asks for more, extra "onednn_verbose" False for none) oneDNN's verbose mode is
switched on at run time (`torch.backends.mkldnn.verbose`), with `ONEDNN_VERBOSE_TIMESTAMP=1` set in
open(), before torch loads oneDNN (setting `ONEDNN_VERBOSE=1` there works too, but would print from
the model build and warm-up on). One iteration is enough for the labels: oneDNN picks a primitive's
implementation when it creates it, and the same shapes reuse it, while its printing slows every
primitive it reports (scripts/bench_profiler_options.py measures it). Its lines go to
`torch_profiler.onednn.log` (fd 1 is redirected while Python's `sys.stdout` keeps the progress
pipe); each `primitive,exec` line is matched by time to the innermost aten op around it, and its
implementation (e.g. `jit_1x1:avx2`, `brg_conv_fwd:avx512_core`) becomes that op's kernel label.

Artifacts in passes/trace/: torch_profiler.kineto.json (raw), torch_profiler.sync.json,
torch_profiler.flops.json (FunctionEvent flops by External id: the chrome trace has none; empty
unless extra["profiler_flops"] is set: with_flops made yolov7's forward 30-40% slower from about
the ninth profiled iteration on, in 4 of 4 runs here, and the flops collector already gives FLOPs
per layer),
torch_profiler.onednn.log (raw verbose lines), torch_profiler.records.jsonl (aten op and oneDNN
spans), torch_profiler.metrics.json (per layer/stage), torch_profiler.kernels.json.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import Capability, Collector, CollectorResult, PassContext
from hwprof.collectors.torch_profiler.clock import SyncData, sync_ranges, wall_pair
from hwprof.collectors.torch_profiler.convert import NAME, RANGE_PREFIX, convert, write_outputs
from hwprof.collectors.torch_profiler.kineto import export_trace, load_kineto
from hwprof.collectors.torch_profiler.onednn import StdoutToFile
from hwprof.collectors.torch_profiler.probe import PROFILER_IMPORTS, probe_torch_profiler
from hwprof.collectors.torch_profiler.shapes import SHAPES_FILE, WarmupShapes

from hwprof.core.atomic import atomic_write_text
from hwprof.core.markers import Marker, read_markers

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig

ONEDNN_ITERATIONS = 1
"""Measured iterations run with oneDNN verbose on (from the first): its labels name the implementation
chosen when the primitive was created, the same in every iteration of one shape, while its printing
costs about 90 us per primitive here (yolov7-tiny at 320: forward 1.4x with it on throughout)."""

# ----------------------------------------------------------------------------- the collector


class TorchProfilerCollector(Collector):
    thread_bound = True
    name = NAME
    title = "torch.profiler (Kineto) with oneDNN verbose"
    last_warmup = True
    heavy_close = True  # its trace converted in close(): no pass's worker built beside it
    pass_name = "trace"
    subscribes = True
    order = 40
    needs_layer_markers = True
    switchable = True
    finds_scripted_layers = True

    zygote_imports = PROFILER_IMPORTS

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self._prof: Any = None
        self._started = False
        """The profiler's start() returned (a stop signal can cut the pass inside it)."""
        self._active = False
        self._stack: list[tuple[str, Any]] = []
        self._enter: Callable[[str], Any]
        self._exit: Callable[[Any], None]
        self._syncs: dict[str, list[list[int]]] = {"start": [], "stop": []}
        self._wall_pairs: list[list[int]] = []
        self._verbose: Any = None
        self._capture: StdoutToFile | None = None
        self._onednn = bool(config.extra.get("onednn_verbose", True))
        self._onednn_iterations = int(config.extra.get("onednn_iterations", ONEDNN_ITERATIONS))
        self._shapes = bool(config.extra.get("profiler_shapes", True))
        self._warmup_shapes: WarmupShapes | None = None
        """The last warm-up iteration profiled with record_shapes, the measured ones without (shapes.py)."""
        self._shapes_in_warmup = (
            self._shapes and config.warmup >= 1 and not config.extra.get("profiler_shapes_measured")
        )
        self._flops = bool(config.extra.get("profiler_flops", False))
        self._scripted = False
        """A TorchScript model (PassContext.layer_scopes): its layers from the ops' module hierarchy."""
        self._ranges = bool(config.extra.get("profiler_ranges", True))
        """False only to measure the ranges' cost (scripts/bench_trace_overhead.py): ops get no layer."""

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        if config.runtime != "torch":
            return Capability.unavailable(
                f"the forward runs in {config.runtime}, where torch.profiler sees no operator (that runtime's own "
                "profiler gives the per-node view: 'runtime nodes per layer')",
                "hwprof collect --runtime torch for aten operators and oneDNN primitives",
            )
        return probe_torch_profiler(sys.executable)

    def open(self, ctx: PassContext) -> None:
        if self._shapes_in_warmup:
            self._warmup_shapes = WarmupShapes(ctx.out_dir)
        if self._onednn:
            # Read by oneDNN when it first initialises, i.e. at the first primitive, after this.
            os.environ.setdefault("ONEDNN_VERBOSE_TIMESTAMP", "1")

    def start(self, ctx: PassContext) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        self._prof = profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=self._shapes and not self._shapes_taken,
            with_flops=self._flops,
            with_stack=self.config.profiler_stack,
            # a TorchScript model's hierarchies: from the warm-up forward when it was profiled (module_layers.py)
            with_modules=self._scripted and not self._shapes_taken,
        )
        self._enter, self._exit = _range_calls(torch, bool(self.config.extra.get("profiler_fast_ranges", True)))
        self._prof.start()
        self._started = True
        self._active = True
        try:
            self._syncs["start"] = sync_ranges(torch)
            self._wall_pairs.append(wall_pair())
            if self._onednn and self._onednn_iterations > 0 and torch.backends.mkldnn.is_available():
                self._capture = StdoutToFile(ctx.out_dir / f"{NAME}.onednn.log")
                self._capture.__enter__()
                self._verbose = torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON)
                self._verbose.__enter__()
        except BaseException:
            self._abort()
            raise

    @property
    def _shapes_taken(self) -> bool:
        return self._warmup_shapes is not None and self._warmup_shapes.path.is_file()

    def on_marker(self, marker: Marker) -> None:
        if marker.warmup:
            if marker.iteration == -1 and self._warmup_shapes is not None:
                self._shapes_marker(marker, self._warmup_shapes)
            return
        if not self._active or not self._ranges:
            return
        self._range(marker)

    def prepare(self, ctx: PassContext) -> None:
        self._scripted = ctx.layer_scopes is not None

    def _shapes_marker(self, marker: Marker, shapes: WarmupShapes) -> None:
        """The last warm-up iteration, profiled with record_shapes, its markers as ranges."""
        import torch

        if marker.kind == "iteration" and marker.phase == "B":
            self._enter, self._exit = _range_calls(torch, bool(self.config.extra.get("profiler_fast_ranges", True)))
            shapes.begin(with_modules=self._scripted)
        if not shapes.running:
            return
        self._range(marker)
        if marker.kind == "iteration" and marker.phase == "E":
            shapes.end()

    def _range(self, marker: Marker) -> None:
        label = _range_name(marker)
        if marker.phase == "B":
            self._stack.append((label, self._enter(label)))
            return
        if not self._stack or self._stack[-1][0] != label:
            open_ = self._stack[-1][0] if self._stack else "nothing"
            self._abort()
            raise RuntimeError(f"marker {label} ends while {open_} is open: markers do not nest")
        self._exit(self._stack.pop()[1])

    def pause(self, ctx: PassContext) -> None:
        self._toggle(False)

    def resume(self, ctx: PassContext) -> None:
        self._toggle(True)

    def _toggle(self, on: bool) -> None:
        """Record aten ops or not (a clean iteration of the paired pass gets no range either: no markers)."""
        if self._active and self._prof is not None:
            from torch.profiler import ProfilerActivity

            self._prof.toggle_collection_dynamic(on, [ProfilerActivity.CPU])

    def after_iteration(self, ctx: PassContext, iteration: int) -> None:
        if self._verbose is not None and iteration + 1 >= self._onednn_iterations:
            self._end_verbose()

    def _end_verbose(self) -> None:
        try:
            if self._verbose is not None:
                self._verbose.__exit__(None, None, None)
                self._verbose = None
        finally:
            if self._capture is not None:
                self._capture.__exit__(None, None, None)
                self._capture = None

    def stop(self, ctx: PassContext) -> None:
        self._finish_profiling()

    def _finish_profiling(self) -> None:
        if self._warmup_shapes is not None:
            self._warmup_shapes.abandon()  # a stop signal inside the shapes' warm-up iteration
        if not self._active:
            return
        import torch

        self._active = False
        try:
            while self._stack:  # only after an error inside an iteration
                self._exit(self._stack.pop()[1])
        finally:
            self._end_verbose()
            self._wall_pairs.append(wall_pair())
            self._syncs["stop"] = sync_ranges(torch)
            self._prof.stop()

    def _abort(self) -> None:
        """Leave the process as it was when a hook fails: the worker calls no more hooks after that."""
        try:
            self._finish_profiling()
        finally:
            self._prof = None

    def close(self, ctx: PassContext) -> CollectorResult:
        self._finish_profiling()
        if (self._prof is None or not self._started) and ctx.interrupted:
            return CollectorResult("interrupted", reason=f"{ctx.interrupted}, before the profiler started")
        if self._prof is None or not self._started:
            return CollectorResult("failed", reason="the profiler never started: the pass ended before start()")
        if ctx.interrupted and _no_results(self._prof):  # a second stop signal came while the profiler stopped
            return CollectorResult("interrupted", reason=f"{ctx.interrupted}, before the profiler produced its trace")
        out = ctx.out_dir
        trace_path = out / f"{NAME}.kineto.json"
        trace_path.unlink(missing_ok=True)
        export_trace(self._prof, trace_path)
        flops = _flops_by_id(self._prof)
        atomic_write_text(out / f"{NAME}.flops.json", json.dumps(flops))
        sync = SyncData(self._syncs["start"], self._syncs["stop"], self._wall_pairs)
        atomic_write_text(out / f"{NAME}.sync.json", json.dumps(sync.to_dict()))
        log = out / f"{NAME}.onednn.log"
        markers = read_markers(out / "markers.jsonl") if (out / "markers.jsonl").exists() else []
        shapes = self._warmup_shapes.path if self._shapes_taken and self._warmup_shapes else None
        converted = convert(
            load_kineto(trace_path),
            sync,
            markers,
            log if log.exists() else None,
            flops,
            load_kineto(shapes) if shapes is not None else None,
            ctx.layer_scopes,
            self.config.depth,
        )
        ctx.replayed.extend(converted.replayed)
        if self._warmup_shapes is not None and self._warmup_shapes.error and converted.summary.shapes is not None:
            # the warm-up profile failed: the measured iterations recorded the shapes themselves; say why
            converted.summary.shapes["warmup_error"] = self._warmup_shapes.error
        artifacts = write_outputs(out, converted)
        for path in (trace_path, out / f"{NAME}.sync.json", out / f"{NAME}.flops.json", log, out / SHAPES_FILE):
            if path.exists():
                artifacts.insert(0, path.name)
        status, reason = "ok", ""
        if not converted.summary.aten_ops:
            status, reason = "failed", "the trace holds no aten op"
            if ctx.interrupted:
                status, reason = "interrupted", f"{ctx.interrupted}: the trace holds no aten op"
        return CollectorResult(
            status,
            reason=reason,
            summary=converted.summary,
            artifacts=[ctx.relpath(out / name) for name in artifacts],
        )


COLLECTOR = TorchProfilerCollector


def _flops_by_id(prof: Any) -> dict[int, int]:
    """FLOPs of each op by its External id (the chrome trace has none). Kineto's raw events are read
    directly: prof.events() builds the whole FunctionEvent tree, about 40x slower."""
    try:
        raw = prof.profiler.kineto_results.events()
        return {int(e.correlation_id()): int(e.flops()) for e in raw if e.flops()}
    except AttributeError:  # a torch without these accessors
        return {int(e.id): int(e.flops) for e in prof.events() if getattr(e, "flops", 0)}


def _range_calls(torch: Any, fast_ok: bool = True) -> tuple[Callable[[str], Any], Callable[[Any], None]]:
    """Open and close a named range: torch's _RecordFunctionFast where it exists (about 1 us a pair
    here, recorded as a cpu_op), else (or with fast_ok False, to measure the difference) the
    record_function ops (about 22 us a pair: a call from Python through the dispatcher each way;
    recorded as a user_annotation)."""
    fast = getattr(torch._C._profiler, "_RecordFunctionFast", None) if fast_ok else None
    if fast is None:
        return (
            lambda name: torch.ops.profiler._record_function_enter_new(name, None),
            torch.ops.profiler._record_function_exit._RecordFunction,
        )

    def enter(name: str) -> Any:
        handle = fast(name)
        handle.__enter__()
        return handle

    def exit_(handle: Any) -> None:
        handle.__exit__(None, None, None)

    return enter, exit_


def _range_name(marker: Marker) -> str:
    if marker.kind == "iteration":
        return f"{RANGE_PREFIX}iteration:{marker.iteration}"
    return f"{RANGE_PREFIX}{marker.kind}:{marker.name}"


def _no_results(prof: Any) -> bool:
    """torch.profiler's profile holds no results (its export would fail on None): it was stopped mid-way."""
    inner = getattr(prof, "profiler", None)
    return inner is None or getattr(inner, "kineto_results", None) is None
