"""The program's model as the pass's collectors see it: a BuiltModel and a pipeline-like holder of its input.

The collectors written for the built-in pipeline ask `ctx.pipeline` for the model (`model`, `built.module`), a
sample input (`sample_batch()`: the input of the first marked call) and a forward of hwprof's own
(`forward(batch)`). The program owns its loop: a forward of hwprof's own there would run inside the program's call
of its model, inside whatever the program times (YOLOv7's detect.py prints each call's time). So
`own_forwards_in_loop` is false: such forwards run after the program ended or was stopped
(Collector.after_workload: the FLOP count), or not at all (the timing pass's reference, which must interleave with
the measured calls). They run inside `ProgramDriver.internal()`, so they are not counted or marked.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hwprof.core.program_spec import PROGRAM_FAMILY
from hwprof.program.finder import ProgramAbort
from hwprof.workload.script_scopes import class_name
from hwprof.workload.zoo import BuiltModel

if TYPE_CHECKING:
    import torch

    from hwprof.core.config import RunConfig
    from hwprof.core.markers import MarkerBus
    from hwprof.program.finder import Found

OUTPUT_UNKNOWN = "program"
OWN_FORWARDS_WHY = (
    "the program drives its own loop: a forward of hwprof's own between its calls would run inside the program's "
    "call of its model (inside what the program times)"
)


def built_model(found: Found) -> BuiltModel:
    """model.json's model: the module whose layers are marked, its class, its parameters."""
    module = found.layers_module
    params = sum(p.numel() for p in module.parameters())
    stride = getattr(module, "stride", None)
    try:
        stride_value = int(max(stride)) if stride is not None and len(stride) else 32
    except (TypeError, ValueError):
        stride_value = 32
    names = getattr(module, "names", None)
    return BuiltModel(
        module=module,
        name=class_name(found.module),
        family=PROGRAM_FAMILY,
        output_format=OUTPUT_UNKNOWN,
        weights=None,
        params=params,
        params_fused=params,
        stride=stride_value,
        class_names=dict(names) if isinstance(names, dict) else {},
    )


def model_device_sync(module: Any, device: str) -> Callable[[], None] | None:
    """The wait after each forward for a model on a GPU (None on the CPU); a model on another device than the
    run's --device is an error: the passes were planned for that device (the GPU pass for cuda)."""
    import torch

    tensor = next(iter(module.parameters()), None)
    if tensor is None:
        tensor = next(iter(module.buffers()), None)
    where = tensor.device if tensor is not None else torch.device("cpu")
    asked = torch.device(device)
    if where.type != asked.type:
        fix = f"--device {where}" if where.type == "cuda" else "--device cpu (the default)"
        raise ModelDeviceError(f"the program runs its model on {where}, not on {device}: run hwprof with {fix}")
    if where.type != "cuda":
        return None
    return lambda: torch.cuda.synchronize(where)


class ModelDeviceError(ProgramAbort):
    """The program's model is not on the device the run was planned for."""


def first_tensor(args: tuple[Any, ...]) -> torch.Tensor:
    """The model's input: its first tensor argument, copied (the program may reuse the buffer)."""
    import torch

    for arg in args:
        if isinstance(arg, torch.Tensor):
            return arg.detach().clone()
    raise TypeError("the model was called without a tensor argument: hwprof needs one for its layer table")


@dataclass
class ProgramPipeline:
    """What collectors use of `ctx.pipeline`, for a program's model."""

    config: RunConfig
    bus: MarkerBus
    built: BuiltModel
    found: Found
    sample: torch.Tensor
    internal: Callable[[], AbstractContextManager[None]]
    runtime: Any = None
    detections: list[int] = field(default_factory=list)
    candidates: list[int] = field(default_factory=list)
    own_forwards_in_loop: bool = False
    """See hwprof.workload.pipeline.Pipeline.own_forwards_in_loop."""
    own_forwards_why: str = OWN_FORWARDS_WHY

    @property
    def model(self) -> torch.nn.Module:
        return self.built.module

    def sample_batch(self) -> torch.Tensor:
        return self.sample

    def forward(self, batch: torch.Tensor, iteration: int | None = None, warmup: bool = False) -> Any:
        import torch

        with self.internal(), torch.inference_mode():
            return self.found.module(batch)
