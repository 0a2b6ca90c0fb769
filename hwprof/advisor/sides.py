"""One side of an advice measurement: a pipeline with its own runtime, model copy, marker log and thread count.

The baseline and the variant are two Sides in one process. Each has its own model (a change such as
channels_last converts weights in place, torch.compile wraps the module), its own MarkerBus and MarkerLog
(the two sides' spans never mix), and sets torch's intra-op thread count before each of its iterations.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.advisor.process_env import minor_faults, resident_bytes
from hwprof.core.config import RunConfig
from hwprof.core.markers import MarkerBus, MarkerLog

if TYPE_CHECKING:
    import torch

    from hwprof.workload.pipeline import Pipeline
    from hwprof.workload.runtime import Runtime


@dataclass
class Side:
    name: str
    config: RunConfig
    pipeline: Pipeline
    runtime: Runtime
    log: MarkerLog
    setup: dict[str, float] = field(default_factory=dict)
    """What preparing this side took: prepare_s (export, conversion, session), first_forward_s."""
    faults: dict[int, int] = field(default_factory=dict)
    """Minor page faults of the process in each measured iteration (an allocator's effect)."""
    rss: dict[int, int] = field(default_factory=dict)
    """The process's resident bytes at the end of each measured iteration (what an allocator keeps)."""

    def run(self, iteration: int, warmup: bool) -> None:
        import torch

        torch.set_num_threads(self.config.threads)
        before = minor_faults()
        self.pipeline.run_iteration(iteration, warmup)
        if not warmup:
            self.faults[iteration] = minor_faults() - before
            self.rss[iteration] = resident_bytes()

    def forward(self, batch: torch.Tensor) -> Any:
        import torch

        torch.set_num_threads(self.config.threads)
        return self.runtime.run(batch)


def build_side(
    name: str,
    config: RunConfig,
    images: list[Path],
    work_dir: Path,
    compile_mode: str = "",
    cuda_graph: bool = False,
    run_dir: Path | None = None,
) -> Side:
    """Build the model, its runtime (prepared: exported, compiled or converted) and a pipeline over `images`."""
    import torch

    from hwprof.workload.init_scale import build_for_run
    from hwprof.workload.pipeline import Pipeline
    from hwprof.workload.runtimes import make_runtime

    torch.set_num_threads(config.threads)
    built = build_for_run(config, images, run_dir)  # the run's saved init scales: the collect's model to the bit
    out_dir = work_dir / name
    out_dir.mkdir(parents=True, exist_ok=True)
    runtime = make_runtime(config, built, out_dir, out_dir, profile=False)
    bus, log = MarkerBus(), MarkerLog()
    bus.keep_spans(log)
    pipeline = Pipeline(config, bus, images, built, runtime)
    sample = pipeline.sample_batch()
    started = time.perf_counter()
    runtime.prepare(sample, pipeline.calibration())
    if compile_mode:
        compile_runtime(runtime, compile_mode)
    if cuda_graph:
        graph_runtime(runtime)
    side = Side(name, config, pipeline, runtime, log, {"prepare_s": time.perf_counter() - started})
    started = time.perf_counter()
    side.forward(sample)  # compiles (torch.compile), captures (CUDA graph) or warms the runtime
    side.setup["first_forward_s"] = time.perf_counter() - started
    if compile_mode or cuda_graph:
        started = time.perf_counter()
        side.forward(sample)  # a recompile, where the first call failed its own guards
        side.setup["second_forward_s"] = time.perf_counter() - started
    return side


def compile_runtime(runtime: Runtime, mode: str) -> None:
    """torch.compile the module the runtime calls (Inductor; compiled at the first forward)."""
    import torch

    if runtime.name != "torch":
        raise ValueError(f"torch.compile applies to the torch runtime, not {runtime.name}")
    if hasattr(runtime, "marker_module"):  # the CUDA runtime's module on its device
        runtime.marker_module = torch.compile(runtime.marker_module, mode=mode)
    else:
        compiled = torch.compile(runtime.built.module, mode=mode)
        runtime.built = dataclasses.replace(runtime.built, module=compiled)  # type: ignore[arg-type]
    runtime.info.update(compile_mode=mode)


@dataclass
class _Capture:
    """A CUDA graph captured for one input shape: its static input, the graph and its static output."""

    shape: tuple[int, ...]
    static: torch.Tensor
    graph: torch.cuda.CUDAGraph
    out: Any
    """What the module returned during the capture (its tensors are rewritten by each replay)."""


def graph_runtime(runtime: Runtime) -> None:
    """Replace the CUDA runtime's forward with a CUDA graph of it, captured at the first call (after three
    warm-up forwards on a side stream, as torch.cuda.graphs asks) and replayed on a static input after."""
    import torch

    from hwprof.workload.runtime import _to_float

    if runtime.device_kind != "cuda":
        raise ValueError("a CUDA graph needs --device cuda")
    module = runtime.marker_module  # type: ignore[attr-defined]
    captured: list[_Capture] = []  # the capture for the last input shape (none before the first call)

    def replay(batch: torch.Tensor) -> Any:
        if batch.device != runtime.device:  # type: ignore[attr-defined]
            batch = runtime.to_device(batch)  # type: ignore[attr-defined]
        if not captured or captured[0].shape != tuple(batch.shape):
            static = batch.clone()
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.inference_mode(), torch.cuda.stream(stream):
                for _ in range(3):
                    module(static)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.inference_mode(), torch.cuda.graph(graph):
                out = module(static)
            captured[:] = [_Capture(tuple(batch.shape), static, graph, out)]
        capture = captured[0]
        capture.static.copy_(batch)
        capture.graph.replay()
        torch.cuda.synchronize(runtime.device)  # type: ignore[attr-defined]
        return _to_float(capture.out)

    runtime._execute = replay  # type: ignore[method-assign]
    runtime.info.update(cuda_graph=True)


def reference_config(config: RunConfig) -> RunConfig:
    """The fp32 reference of a configuration: the fused torch model on the CPU, NCHW, same batch and images."""
    return dataclasses.replace(config, runtime="torch", precision="fp32", device="cpu", channels_last=False)
