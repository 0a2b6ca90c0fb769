"""torch.profiler with CPU and CUDA activities in the GPU trace pass (`--device cuda`): every kernel
charged to the layer that launched it, the forward's CPU time, GPU busy time and idle share.

The capture is gpu_record.py's (recordings/h100-2026-11-22), which is known to work on an H100:
`torch.profiler.profile(activities=[CPU, CUDA], record_shapes=True)`, a `forward` user annotation
around each measured forward and a `layer <i> <Type>` one around each top-level layer (and, beyond
the recordings, a `stage <name>` one around each other stage of the iteration), opened and
closed with `torch.ops.profiler._record_function_enter_new` / `_record_function_exit` (here from the
layer markers rather than hooks of its own), and `export_chrome_trace`. Parsing and attribution
(trace.py, attribution.py) are the functions tested on the recordings.

The profiler window is every measured iteration whole (start() after the warm-up, stop() after the
last iteration), so the trace holds the h2d copy, NMS and postprocess's device-to-host copies beside
the forward's kernels; gpu_spans.py draws them all.

Artifacts in passes/gpu/: gpu_kineto.trace.json.gz (raw), gpu_kineto.records.jsonl (every GPU activity
on its stream's track under stage and layer slices, launches on the launching thread, on the run's
clock), gpu_kineto.metrics.json
(per layer: gpu_us, kernels, cpu_us, launch_us; per stage "forward": cpu_us, gpu_busy_us,
gpu_idle_share), gpu_kineto.kernels.json (each layer's kernels).
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import Capability, Collector, CollectorResult, PassContext
from hwprof.collectors.gpu.kineto.trace import stage_range_name

from hwprof.core.atomic import atomic_path, atomic_write_text
from hwprof.core.markers import layer_types

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig
    from hwprof.core.markers import Marker

NAME = "gpu_kineto"


def cpu_device_reason(config: RunConfig) -> Capability | None:
    """The GPU collectors' common refusal on a CPU run."""
    if config.device == "cpu":
        return Capability.unavailable(
            "the run is on the CPU (--device cpu): no CUDA activity to record",
            "hwprof collect --device cuda on a host with an NVIDIA GPU",
        )
    return None


class GpuKinetoCollector(Collector):
    name = NAME
    needs_cuda = True
    title = "torch.profiler CUDA kernels per layer by launch correlation"
    pass_name = "gpu"
    subscribes = True
    order = 40
    needs_layer_markers = True

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self._prof: Any = None
        self._torch: Any = None
        self._types: dict[str, str] = {}
        self._open: list[Any] = []
        self._forward_marks: list[int] = []
        self._active = False

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        return cpu_device_reason(config) or Capability.ok()

    def prepare(self, ctx: PassContext) -> None:
        assert ctx.pipeline is not None
        self._types = layer_types(ctx.pipeline.model)

    def start(self, ctx: PassContext) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        self._torch = torch
        torch.cuda.synchronize()
        self._prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True)
        self._prof.start()
        self._active = True

    def on_marker(self, marker: Marker) -> None:
        if not self._active or marker.warmup:
            return
        if marker.kind == "stage":
            label = stage_range_name(marker.name)
            if marker.name == "forward" and marker.phase == "B":
                self._forward_marks.append(marker.t_ns)
        elif marker.kind == "layer" and marker.index >= 0 and marker.name in self._types:
            label = f"layer {marker.index} {self._types[marker.name]}"
        else:
            return
        ops = self._torch.ops.profiler
        if marker.phase == "B":
            self._open.append(ops._record_function_enter_new(label, None))
        elif self._open:
            ops._record_function_exit._RecordFunction(self._open.pop())

    def stop(self, ctx: PassContext) -> None:
        if self._active:
            self._torch.cuda.synchronize()
            self._prof.stop()
            self._active = False

    def close(self, ctx: PassContext) -> CollectorResult:
        from hwprof.collectors.gpu.kineto.attribution import attribute
        from hwprof.collectors.gpu.kineto.pass_outputs import clock_offset, run_summary, write_outputs
        from hwprof.collectors.gpu.kineto.trace import load_gpu_trace

        self.stop(ctx)
        if self._prof is None:
            return CollectorResult("failed", reason="the profiler never started")
        raw = ctx.out_dir / f"{NAME}.trace.json"
        with atomic_path(raw) as staging:  # then Kineto's own <staging>.tmp names this pid too
            self._prof.export_chrome_trace(str(staging))
        packed = raw.with_suffix(".json.gz")
        with atomic_path(packed) as tmp, open(raw, "rb") as src, gzip.open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
        raw.unlink()
        trace = load_gpu_trace(packed)
        att = attribute(trace)
        clock = clock_offset(trace, self._forward_marks)
        artifacts = [ctx.relpath(p) for p in (packed, *write_outputs(ctx.out_dir, NAME, trace, att, clock))]
        peaks = self._peaks(ctx)
        if peaks:
            artifacts.append(peaks)
        summary = run_summary(trace, att, clock)
        status = "ok" if att.forwards else "failed"
        reason = "" if att.forwards else "no forward range with GPU activity in the trace"
        return CollectorResult(status, reason=reason, summary=summary, artifacts=artifacts)

    def _peaks(self, ctx: PassContext) -> str | None:
        """The device's measured peaks for the GPU roofline (cached per device), beside the trace."""
        from hwprof.hardware.gpu_peaks import load_or_measure

        try:
            data = load_or_measure(int(self.config.device.partition(":")[2] or 0))
        except Exception as exc:  # the roofline then says the peaks are missing
            print(f"GPU peaks could not be measured: {type(exc).__name__}: {exc}", file=sys.stderr)
            return None
        path = ctx.out_dir / "gpu_peaks.json"
        atomic_write_text(path, json.dumps(data, indent=1))
        return ctx.relpath(path)


COLLECTOR = GpuKinetoCollector
