"""What runs the forward: one small interface between the pipeline and PyTorch, ONNX Runtime or OpenVINO.

A runtime prepares once (export, compile), runs a batch, and, when profiled, gives back the
node spans of every run on the run's clock (CLOCK_MONOTONIC ns). Torch calls the layer markers
itself (forward hooks); a runtime that cannot call back per layer has its layer markers replayed
from its own profiler after the measured iterations (see node_layers.replay_markers).

Every run() is recorded with its monotonic start and end and the iteration it served, so the
profiler's runs can be matched to the pipeline's iterations one to one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from hwprof.core.host_facts import current
from hwprof.core.runtime_names import BF16_WEIGHTS, import_runtime
from hwprof.schema.pass_files import RuntimeFile
from hwprof.schema.runtime_checks import ClockDoc
from hwprof.workload.node_layers import RunSpans

if TYPE_CHECKING:
    import torch

    from hwprof.core.config import RunConfig
    from hwprof.workload.onnx_export import ExportedModel
    from hwprof.workload.zoo import BuiltModel


@dataclass(frozen=True)
class Calibration:
    """The run's own input for a runtime that calibrates (ONNX Runtime's int8-static): its letterboxed batches,
    made only when asked for, and what they are (the images by name, the batches' shape)."""

    batches: Callable[[], Sequence[torch.Tensor]]
    what: str


class RuntimeUnavailable(ValueError):
    """A runtime that cannot run here (missing package, unsupported precision): one line for the user."""


@dataclass
class RunRecord:
    start_ns: int
    end_ns: int
    iteration: int | None
    """The pipeline iteration this forward served; None for one-off calls (output check, reference)."""
    warmup: bool


@dataclass
class NodeInfo:
    """What a runtime says about one of its executed nodes (static over runs)."""

    name: str
    op: str
    kernel: str
    provider: str
    precision: str
    layers: tuple[str, ...] = ()
    children: tuple[str, ...] = ()
    inserted: bool = False


@dataclass
class Profile:
    """The runtime profiler's view of the pass: node spans per run and how its clock was placed."""

    runs: list[RunSpans]
    nodes: dict[str, NodeInfo]
    clock: ClockDoc


class Runtime:
    """Base class; subclasses implement _prepare, _execute and, if they can profile, _profile."""

    name: ClassVar[str]
    device_kind: ClassVar[str] = "cpu"
    """The kind of device it runs on ("cpu", "cuda"): a run's --device without its index."""
    profiler_name: ClassVar[str] = ""
    """Empty for a runtime whose profiler hwprof does not drive (it never gets profile=True)."""
    glue_keeps_threads: ClassVar[bool] = False
    """Whether the pipeline's torch glue around the forward (preprocess's float division, NMS) runs on the run's
    --threads. Not for a runtime with its own thread pool (ONNX Runtime, OpenVINO): torch's OpenMP threads, once
    the glue wakes them, spin on for milliseconds and take the CPUs from the next forward
    (scripts/runtime_beside_torch.py: OpenVINO bf16 yolov7-tiny 320 infer() 11.1 ms alone, 14.8 ms right after a
    torch division), so its glue runs on one torch thread, as a deployment's numpy glue would."""

    def __init__(self, config: RunConfig, built: BuiltModel, run_dir: Path, out_dir: Path, profile: bool) -> None:
        self.config = config
        self.built = built
        self.run_dir = run_dir
        self.out_dir = out_dir
        self.profile = profile
        self.records: list[RunRecord] = []
        self.info = RuntimeFile.of(runtime=self.name, precision=config.precision)
        """runtime.json as it grows: the runtime's identity, what it executed, its output check and profile
        (set with `info.update(...)`, which keeps the keys in the order they are set)."""
        if (glue := self.glue_threads()) != config.threads:
            self.info.update(glue_threads=glue)
        self.exported: ExportedModel | None = None
        """The run's ONNX export (_export), for a runtime that runs one."""
        self.executed_model: ExportedModel | None = None
        """The model file the runtime runs (use_model): the export, or the int8 model made from it."""
        self.calibration: Calibration | None = None
        """The run's batches to calibrate on (prepare's), for a precision that calibrates."""

    def glue_threads(self) -> int:
        """torch's intra-op threads for the pipeline's stages around this runtime's forward (glue_keeps_threads)."""
        return self.config.threads if self.glue_keeps_threads else 1

    def prepare(self, sample: torch.Tensor, calibration: Calibration | None = None) -> None:
        """Export, compile or convert once; `calibration`: the run's own batches (Pipeline.calibration)."""
        self.calibration = calibration
        self._prepare(sample)

    def _import(self, module: str) -> Any:
        """The runtime's package, or RuntimeUnavailable with the fix."""
        try:
            return import_runtime(module)
        except ImportError as exc:
            raise RuntimeUnavailable(f"{module} cannot be imported ({exc}); fix: pip install {module}") from exc

    def _export(self, sample: torch.Tensor, provider: str, version: str) -> ExportedModel:
        """The run's ONNX file (exported once per run), recorded in info with the runtime's identity."""
        from hwprof.workload.onnx_export import export_onnx

        exported = export_onnx(self.built.module, sample, self.run_dir, self.built.name)
        self.info.update(version=version, provider=provider, export=exported.to_dict())
        self.exported = exported
        self.use_model(exported)
        return exported

    def use_model(self, model: ExportedModel) -> None:
        self.executed_model = model
        self.info.update(model_file=model.path, model_sha256=model.sha256, model_bytes=model.bytes)

    def run(self, batch: torch.Tensor, iteration: int | None = None, warmup: bool = False) -> Any:
        start = time.monotonic_ns()
        output = self._execute(batch)
        self.records.append(RunRecord(start, time.monotonic_ns(), iteration, warmup))
        self._after_run()
        return output

    def layer_outputs(self, batch: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every top-level layer's output on this batch, as this runtime and precision compute it."""
        raise NotImplementedError

    def finish(self) -> Profile | None:
        """End profiling and return the node spans of the recorded runs (None if not profiled)."""
        return self._profile() if self.profile else None

    def _prepare(self, sample: torch.Tensor) -> None:
        pass

    def _execute(self, batch: torch.Tensor) -> Any:
        raise NotImplementedError

    def _after_run(self) -> None:
        pass

    def _profile(self) -> Profile | None:
        return None


R = TypeVar("R", bound=Runtime)
RUNTIMES: dict[tuple[str, str], type[Runtime]] = {}
"""Runtime classes by (name, device kind); each runtime module registers its own (workload/runtimes.py loads them)."""


def register(cls: type[R]) -> type[R]:
    """Class decorator: make a runtime known by its name and device kind."""
    RUNTIMES[(cls.name, cls.device_kind)] = cls
    return cls


def torch_bf16_detail(mkldnn: bool) -> str:
    """What torch's bf16 (autocast) runs, in words: bf16 on any CPU, mkldnn as torch reports it."""
    return (
        "torch.autocast('cpu', bfloat16): convolutions and matmuls in bf16, other ops fp32; "
        f"CPU bf16 support reported by torch: {mkldnn} (mkldnn)"
    )


@register
class TorchRuntime(Runtime):
    """The fused PyTorch module; bf16 is CPU autocast (conv and matmul in bf16, the rest fp32); bf16-weights runs a
    copy of the module converted to bf16 (`marker_module`, where the layer hooks go), its input cast to bf16 and
    its output back to float, while the fp32 module stays the pipeline's (the FLOP count, the layer table and the
    output check's reference read it)."""

    name = "torch"
    glue_keeps_threads = True
    marker_module: torch.nn.Module
    """bf16-weights only: the bf16 copy the forward runs (and the layer hooks go on)."""

    def _prepare(self, sample: torch.Tensor) -> None:
        import torch

        self.info.update(version=torch.__version__)
        if self.config.precision == "bf16":
            detail = torch_bf16_detail(current().torch_cpu().mkldnn)
            self.info.update(executed_precision="bf16", precision_detail=detail)
        elif self.config.precision == BF16_WEIGHTS:
            import copy

            self.marker_module = copy.deepcopy(self.built.module).to(torch.bfloat16)
            self.info.update(
                executed_precision="bf16",
                precision_detail="a copy of the model in bf16 (module.to(torch.bfloat16)), input cast to bf16, "
                "output back to float32: every op in bf16",
            )
        else:
            self.info.update(executed_precision="fp32")
        if self.config.channels_last:
            # In place: the layer hooks and FLOP counter see the same module (its weights now NHWC).
            self.built.module.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
            if hasattr(self, "marker_module"):
                self.marker_module.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
            self.info.update(channels_last=True)
        module = getattr(self, "marker_module", self.built.module)
        self.info.update(model_bytes=sum(p.numel() * p.element_size() for p in module.parameters()))

    def layer_outputs(self, batch: torch.Tensor) -> dict[str, torch.Tensor]:
        import torch

        from hwprof.workload.layer_error import torch_layer_outputs

        if self.config.precision == BF16_WEIGHTS:
            return torch_layer_outputs(self.marker_module, batch.to(torch.bfloat16))
        return torch_layer_outputs(self.built.module, batch, bf16=self.config.precision == "bf16")

    def _execute(self, batch: torch.Tensor) -> Any:
        import torch

        if self.config.channels_last:
            batch = batch.contiguous(memory_format=torch.channels_last)
        with torch.inference_mode():
            if self.config.precision == BF16_WEIGHTS:
                return _to_float(self.marker_module(batch.to(torch.bfloat16)))
            if self.config.precision == "bf16":
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return _to_float(self.built.module(batch))
            return self.built.module(batch)


def _to_float(output: Any) -> Any:
    import torch

    if isinstance(output, torch.Tensor):
        return output.float()
    if isinstance(output, tuple | list):
        return type(output)(_to_float(o) for o in output)
    return output


def adopt_inserted_layers(runs: list[RunSpans], nodes: dict[str, NodeInfo]) -> None:
    """A node the runtime inserted (no layer of its own) takes the layer charge_inserted gave its spans."""
    for run in runs:
        for span in run.nodes:
            info = nodes[span.name]
            if span.inserted and not info.layers:
                info.layers, info.inserted = span.layers, True


def monotonic_offset_ns(clock: Any = time.time_ns, rounds: int = 7) -> tuple[int, int]:
    """(wall - monotonic offset, its uncertainty) from the tightest of several bracketed reads."""
    best: tuple[int, int] | None = None
    for _ in range(rounds):
        m0 = time.monotonic_ns()
        wall = clock()
        m1 = time.monotonic_ns()
        half = (m1 - m0) // 2
        if best is None or half < best[1]:
            best = (wall - (m0 + half), half)
    assert best is not None
    return best
