"""The CUDA-graph forward in the timing pass (`--device cuda`): after the measured iterations, the
same device model on the same batch is timed eagerly and as a replayed CUDA graph, each call
followed by torch.cuda.synchronize(), median of `cuda_graph_iters` (extra, default 100) after 20
warm-up calls. A graph replays every kernel with one launch, so eager - graph is the time the CPU
spent launching that the GPU could not hide; `launch_overhead_share` = 1 - graph / eager.

The capture is gpu_experiments.py's (recordings/h100-2026-11-22): three warm-up forwards on a side
stream, then `torch.cuda.graph(g)` around one forward, then `g.replay()`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import Capability, Collector, CollectorResult, PassContext

from hwprof.schema.summaries_gpu import CudaGraphSummary

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig

WARMUP = 20
ITERS = 100


def time_synchronised(torch: Any, fn: Callable[[], Any], iters: int) -> list[float]:
    """ms per call, each call followed by torch.cuda.synchronize()."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t) * 1e3)
    return out


class CudaGraphCollector(Collector):
    name = "cuda_graph"
    needs_cuda = True
    title = "eager forward against its CUDA graph (launch overhead)"
    pass_name = "timing"
    order = 90

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.result = CudaGraphSummary()
        self.error = ""

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        if config.device == "cpu":
            return Capability.unavailable("the run is on the CPU (--device cpu)", "hwprof collect --device cuda")
        if config.program is not None:
            return Capability.unavailable(
                "the program calls its own model: hwprof has no copy of it to capture as a CUDA graph",
                "hwprof collect --model NAME --device cuda measures the built-in pipeline's graph",
            )
        return Capability.ok()

    def stop(self, ctx: PassContext) -> None:
        if self.result or self.error:
            return
        import torch

        pipeline = ctx.pipeline
        assert pipeline is not None and pipeline.runtime is not None
        runtime: Any = pipeline.runtime
        model, x = runtime.marker_module, runtime.to_device(pipeline.sample_batch())
        iters = int(self.config.extra.get("cuda_graph_iters", ITERS))
        with torch.inference_mode():
            eager = time_synchronised(torch, lambda: model(x), iters)
            try:
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        model(x)
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    model(x)
                replay = time_synchronised(torch, graph.replay, iters)
            except Exception as exc:  # e.g. an op that cannot be captured
                self.error = f"CUDA graph capture failed: {type(exc).__name__}: {exc}"[:300]
                self.result = CudaGraphSummary.of(eager_ms_p50=statistics.median(eager))
                return
        e, g = statistics.median(eager), statistics.median(replay)
        self.result = CudaGraphSummary.of(
            iters=iters,
            eager_ms_p50=e,
            graph_ms_p50=g,
            launch_overhead_share=1 - g / e if e > 0 else None,
            method="median wall time per call with torch.cuda.synchronize() after each, same model and batch",
        )

    def close(self, ctx: PassContext) -> CollectorResult:
        if self.error:
            return CollectorResult("partial", reason=self.error, summary=self.result)
        if not self.result:
            return CollectorResult("failed", reason="the measured iterations did not finish")
        return CollectorResult("ok", summary=self.result)


COLLECTOR = CudaGraphCollector
