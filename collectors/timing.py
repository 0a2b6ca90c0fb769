"""The clean timing pass: per-stage latency with no hooks, kept in pyperf's JSON format.

`python -m pyperf stats passes/timing/timing.pyperf.json` and `python -m pyperf compare_to A B`
work on the file. After every other measured pipeline iteration (the first, the third, ...) the collector also
times one plain `model(x)` call on the same kind of input (interleaved, so drift and noise hit both alike): the
"forward.reference" benchmark, against which the harness's own forward stage is checked. After every iteration, as
until 2026-11-28, it doubled the pass (yolov7 at 640: 19 of its 46 s) for a ratio the report prints without an
interval; the stopping rule needs the pipeline's own iterations, not the reference's. Not for a
workload whose loop hwprof does not own (a user's program: `own_forwards_in_loop` false): the call would run
inside the program's own call of its model; the summary says why there is no reference.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import Capability, Collector, CollectorResult, PassContext

from hwprof.core.atomic import atomic_path
from hwprof.schema.summaries_cpu import StageLatency, TimingSummary

if TYPE_CHECKING:
    import torch

    from hwprof.core.markers import Marker

PYPERF_FILE = "timing.pyperf.json"
REFERENCE_EVERY = 2
"""The plain forward is timed after measured iterations 0, REFERENCE_EVERY, 2 x REFERENCE_EVERY, ..."""
REFERENCES = 5
"""... at most this many times: the harness-vs-reference ratio is printed as a p50 ratio without an interval, and
each reference is a forward more in the pass (yolov7 at 640 on the 2-vCPU Xeon: 10 of the pass's 32 forwards, 9 s
at 20 measured iterations; 5 now)."""


class TimingCollector(Collector):
    name = "timing"
    title = "clean per-stage latency (pyperf JSON)"
    pass_name = "timing"
    subscribes = True
    order = 0

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self._begin: dict[str, int] = {}
        self.stages: dict[str, list[float]] = {}
        self.warmups: dict[str, list[float]] = {}
        self.reference_s: list[float] = []
        self._batch: torch.Tensor | None = None

    @classmethod
    def probe(cls, config: Any) -> Capability:
        try:
            import pyperf  # noqa: F401
        except ImportError as exc:
            return Capability.unavailable(f"pyperf cannot be imported ({exc})", "pip install pyperf")
        return Capability.ok()

    def wants_layer_markers(self) -> bool:
        return False

    def on_marker(self, marker: Marker) -> None:
        if marker.kind not in ("stage", "iteration"):
            return
        if marker.phase == "B":
            self._begin[marker.name] = marker.t_ns
            return
        seconds = (marker.t_ns - self._begin.pop(marker.name, marker.t_ns)) / 1e9
        target = self.warmups if marker.warmup else self.stages
        target.setdefault(marker.name, []).append(seconds)

    def after_iteration(self, ctx: PassContext, iteration: int) -> None:
        pipeline = ctx.pipeline
        assert pipeline is not None
        if not pipeline.own_forwards_in_loop or iteration % REFERENCE_EVERY or len(self.reference_s) >= REFERENCES:
            return
        if self._batch is None:
            self._batch = pipeline.sample_batch()
        batch = self._batch
        t0 = time.perf_counter_ns()
        pipeline.forward(batch)
        self.reference_s.append((time.perf_counter_ns() - t0) / 1e9)

    def _suite(self) -> Any:
        import pyperf

        meta = {
            "unit": "second",
            "hwprof_model": self.config.model,
            "hwprof_imgsz": self.config.imgsz,
            "hwprof_batch": self.config.batch,
            "hwprof_threads": self.config.threads,
        }
        benchmarks = []
        series = {f"stage.{k}": v for k, v in self.stages.items()}
        if self.reference_s:
            series["forward.reference"] = self.reference_s
        for name, values in series.items():
            if not values:
                continue
            warm = self.warmups.get(name.removeprefix("stage."), [])
            run = pyperf.Run(
                values,
                warmups=[(1, w) for w in warm] or None,
                metadata={"name": name, "loops": 1, **meta},
                collect_metadata=False,
            )
            benchmarks.append(pyperf.Benchmark([run]))
        return pyperf.BenchmarkSuite(benchmarks) if benchmarks else None

    def close(self, ctx: PassContext) -> CollectorResult:
        from hwprof.core.spans import frames_per_second, latency_stats

        if not self.stages.get("forward"):
            return CollectorResult("failed", reason="no measured iteration completed")
        suite = self._suite()
        path = ctx.out_dir / PYPERF_FILE
        with atomic_path(path) as tmp:
            suite.dump(str(tmp))
        stats = {k: latency_stats([v * 1e3 for v in vals]) for k, vals in self.stages.items()}
        summary = TimingSummary.of(stages={k: StageLatency.of(**v.to_dict()) for k, v in stats.items()})
        whole = stats.get("iteration")
        if whole is not None and whole.p50_ms:  # stats are in ms (the pyperf series in seconds)
            summary.fps = frames_per_second(self.config.batch, whole.p50_ms)
        if ctx.pipeline is not None and not ctx.pipeline.own_forwards_in_loop:
            summary.forward_reference_unavailable = ctx.pipeline.own_forwards_why
        if self.reference_s:
            ref = latency_stats([v * 1e3 for v in self.reference_s])
            summary.forward_reference = StageLatency.of(**ref.to_dict())
            summary.forward_vs_reference = stats["forward"].p50_ms / ref.p50_ms
        return CollectorResult("ok", summary=summary, artifacts=[ctx.relpath(path)])


COLLECTOR = TimingCollector
