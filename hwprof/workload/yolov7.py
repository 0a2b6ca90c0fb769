"""YOLOv7, YOLOv7-tiny and YOLOv7x (deploy architectures), this project's own implementation.

The architectures are data: hwprof/workload/cfg/<name>.yaml holds the layer lists of the
official cfg/deploy/*.yaml of WongKinYiu/yolov7 in the same [from, number, module, args] schema.
parse_model() reads such a dict without eval(): module names and argument strings are looked up
in fixed tables, anything else is a ValueError. The result has the same top-level layer list and
the same state-dict keys and shapes as the official model built from the same cfg, so official
weights load strictly (see hwprof.workload.weights).

Layer attributes, as in ultralytics' DetectionModel (the pipeline treats both alike):
  .i     index in model.model
  .f     from: -1 (previous layer), an index, or a list of them
  .type  "<python module>.<class name>" of the layer, e.g.
         "hwprof.workload.yolov7_modules.Conv" or "torch.nn.modules.upsampling.Upsample";
         the last dotted part is the official short class name (Conv, Concat, MP, SP, SPPCSPC,
         RepConv, Detect, Upsample)
  .np    number of parameters when built (unfused), as ultralytics keeps it after fuse()

Output (eval mode): (pred, raw), pred (batch, N, 5 + nc) in the OUTPUT_FORMAT layout, raw the
per-level tensors (batch, na, ny, nx, 5 + nc) before the sigmoid. Training mode: raw only.
"""

from __future__ import annotations

import ast
import copy
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

import torch
import yaml
from torch import nn

from hwprof.workload.yolov7_modules import MP, SP, SPPCSPC, Concat, Conv, Detect, RepConv

MODEL_NAMES: tuple[str, ...] = ("yolov7", "yolov7-tiny", "yolov7x")

OUTPUT_FORMAT = "xywh_obj_cls"
"""pred[..., 0:4] box centre x, y, width, height in input pixels; pred[..., 4] objectness;
pred[..., 5:] per-class scores (all sigmoid-activated, class confidence = obj * cls)."""

CFG_DIR = Path(__file__).with_name("cfg")

COCO_NAMES: tuple[str, ...] = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
    "traffic light", "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog",
    "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella",
    "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite",
    "baseball bat", "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle",
    "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple", "sandwich", "orange",
    "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch", "potted plant",
    "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard", "cell phone",
    "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase", "scissors",
    "teddy bear", "hair drier", "toothbrush",
)  # fmt: skip

MODULES: dict[str, type[nn.Module]] = {
    "Conv": Conv,
    "RepConv": RepConv,
    "SPPCSPC": SPPCSPC,
    "Concat": Concat,
    "MP": MP,
    "SP": SP,
    "Detect": Detect,
    "nn.Upsample": nn.Upsample,
}
"""The module names a cfg may use (those of the three deploy architectures)."""

_CONV_LIKE = (Conv, RepConv, SPPCSPC)

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "nn.SiLU": nn.SiLU,
    "nn.LeakyReLU": nn.LeakyReLU,
    "nn.ReLU": nn.ReLU,
    "nn.Hardswish": nn.Hardswish,
    "nn.Sigmoid": nn.Sigmoid,
    "nn.Identity": nn.Identity,
}
_ACTIVATION_CALL = re.compile(r"^(nn\.\w+)\((.*)\)$")


def cfg_path(name: str) -> Path:
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown YOLOv7 model {name!r}; known: {', '.join(MODEL_NAMES)}")
    return CFG_DIR / f"{name}.yaml"


class ModelCfg(TypedDict):
    """A YOLOv7 architecture in the official cfg schema (cfg/<name>.yaml, or a checkpoint's `yaml`)."""

    nc: int
    depth_multiple: NotRequired[float]
    width_multiple: NotRequired[float]
    anchors: list[list[int]] | int
    """Pixels, (w, h) pairs per level (P3/8, P4/16, P5/32); or the number of anchors per level."""
    backbone: list[list[Any]]
    """Layer rows [from, number, module, args]."""
    head: list[list[Any]]
    ch: NotRequired[int]
    """Input channels (YOLOv7Model fills it in)."""


CFG_KEYS = ("nc", "anchors", "backbone", "head")
"""The keys a cfg must have (the others have defaults)."""


def model_cfg(doc: Mapping[str, Any], where: str) -> ModelCfg:
    """A shallow copy of `doc` as a cfg; ValueError naming `where` when it lacks one of CFG_KEYS."""
    missing = [key for key in CFG_KEYS if key not in doc]
    if missing:
        raise ValueError(f"{where} is not a model cfg: no {', '.join(missing)}")
    return cast(ModelCfg, dict(doc))


@cache
def _packaged_cfg(name: str) -> ModelCfg:
    with cfg_path(name).open(encoding="utf-8") as f:
        cfg = yaml.safe_load(f)
    if not isinstance(cfg, dict):
        raise ValueError(f"{cfg_path(name)} is not a model cfg mapping")
    return model_cfg(cfg, str(cfg_path(name)))


def load_cfg(name: str) -> ModelCfg:
    """A fresh copy of the packaged cfg dict of `name`."""
    return copy.deepcopy(_packaged_cfg(name))


def make_divisible(x: float, divisor: int) -> int:
    return math.ceil(x / divisor) * divisor


def _parse_arg(value: Any, nc: int, anchors: Any) -> Any:
    """The value a cfg argument stands for; strings are never evaluated as code."""
    if not isinstance(value, str):
        return value
    if value == "None":
        return None
    if value == "nc":
        return nc
    if value == "anchors":
        return anchors
    match = _ACTIVATION_CALL.match(value.strip())
    if match and match.group(1) in ACTIVATIONS:
        text = match.group(2).strip()
        try:
            args = ast.literal_eval(f"({text},)") if text else ()
        except (ValueError, SyntaxError):
            args = (None,)
        if not all(isinstance(a, int | float | bool) for a in args):
            raise ValueError(f"activation arguments must be numbers: {value!r}")
        return ACTIVATIONS[match.group(1)](*args)
    if value.startswith("nn."):
        raise ValueError(f"unsupported cfg argument {value!r}; activations: {', '.join(ACTIVATIONS)}")
    return value


def _edges(f: Any) -> list[int]:
    return [f] if isinstance(f, int) else list(f)


def _set_layer_attrs(module: nn.Module, cls: type[nn.Module], i: int, f: int | list[int]) -> None:
    for name, value in (
        ("i", i),
        ("f", f),
        ("type", f"{cls.__module__}.{cls.__qualname__}"),
        ("np", sum(p.numel() for p in module.parameters())),
    ):
        setattr(module, name, value)


@dataclass(frozen=True)
class _Gains:
    """What a cfg's rows are read with: the class count, the anchors, the depth and width multiples."""

    nc: int
    anchors: Any
    no: int
    """Detect's outputs per grid cell (na * (nc + 5)): a Conv-like layer with as many output channels keeps them."""
    depth: float
    width: float

    @classmethod
    def of(cls, cfg: Mapping[str, Any]) -> _Gains:
        anchors, nc = cfg["anchors"], int(cfg["nc"])
        na = len(anchors[0]) // 2 if isinstance(anchors, list) else int(anchors)
        depth, width = float(cfg.get("depth_multiple", 1.0)), float(cfg.get("width_multiple", 1.0))
        return cls(nc, anchors, na * (nc + 5), depth, width)


@dataclass
class _Layer:
    """One row of a cfg resolved: the module class, its arguments and repeats, its output channels and stride."""

    m: type[nn.Module]
    args: list[Any]
    n: int
    c2: int = 0
    stride: float = 0.0


def parse_model(cfg: Mapping[str, Any], ch: int = 3) -> tuple[nn.Sequential, list[int]]:
    """The top-level layers and the save list (indices whose outputs later layers read).

    Channel and stride bookkeeping follow the official parse_model: Conv-like layers take
    args[0] output channels scaled by width_multiple (rounded up to a multiple of 8), Concat
    sums its inputs, everything else keeps its input's channels. Strides are tracked here from
    the layer arguments rather than measured with a forward pass, and handed to Detect.
    """
    gains = _Gains.of(cfg)
    layers: list[nn.Module] = []
    save: list[int] = []
    channels: list[int] = [ch]  # the input, until layer 0 replaces it
    strides: list[float] = [1.0]
    rows = list(cfg["backbone"]) + list(cfg["head"])
    for i, row in enumerate(rows):
        f, layer = _read_row(i, row, gains)
        _shape(i, f, layer, gains, channels, strides)
        m, args, n = layer.m, layer.args, layer.n
        module = nn.Sequential(*(m(*args) for _ in range(n))) if n > 1 else m(*args)
        _set_layer_attrs(module, m, i, f)  # a repeated block (n > 1) is typed by its class
        save.extend(j % i for j in _edges(f) if j != -1)
        layers.append(module)
        if i == 0:
            channels, strides = [], []
        channels.append(layer.c2)
        strides.append(layer.stride)
    return nn.Sequential(*layers), sorted(save)


def _read_row(i: int, row: Any, gains: _Gains) -> tuple[Any, _Layer]:
    """A cfg row [from, number, module, args] checked: its inputs, and the layer with its arguments parsed."""
    if not (isinstance(row, list | tuple) and len(row) == 4):
        raise ValueError(f"layer {i}: expected [from, number, module, args], got {row!r}")
    f, n, module_name, raw_args = row
    if module_name not in MODULES:
        raise ValueError(f"layer {i}: unsupported module {module_name!r}; known: {', '.join(MODULES)}")
    args = [_parse_arg(a, gains.nc, gains.anchors) for a in raw_args]
    n = max(round(n * gains.depth), 1) if n > 1 else n
    return f, _Layer(MODULES[module_name], args, n)


def _shape(i: int, f: Any, layer: _Layer, gains: _Gains, channels: list[int], strides: list[float]) -> None:
    """The layer's output channels and stride from its inputs'; the arguments that depend on them."""
    m, args = layer.m, layer.args
    if m in _CONV_LIKE:
        c1, c2 = channels[f], args[0]
        if c2 != gains.no:
            c2 = make_divisible(c2 * gains.width, 8)
        layer.args = args = [c1, c2, *args[1:]]
        if m is SPPCSPC:
            args.insert(2, layer.n)
            layer.n = 1
            layer.stride = strides[f]
        else:
            layer.stride = strides[f] * (args[3] if len(args) > 3 else 1)
        layer.c2 = c2
    elif m is Concat:
        layer.c2 = sum(channels[j] for j in f)
        level = {strides[j] for j in f}
        if len(level) != 1:
            raise ValueError(f"layer {i}: Concat of inputs with different strides {sorted(level)}")
        layer.stride = level.pop()
    elif m is Detect:
        if isinstance(args[1], int):
            args[1] = [list(range(args[1] * 2))] * len(f)
        args.append([channels[j] for j in f])
        args.append([strides[j] for j in f])
        layer.c2, layer.stride = 0, 0.0
    elif m is MP:
        layer.c2 = channels[f]
        layer.stride = strides[f] * (args[0] if args else 2)
    elif m is SP:
        layer.c2 = channels[f]
        layer.stride = strides[f] * (args[1] if len(args) > 1 else 1)
    else:  # nn.Upsample(size, scale_factor, mode)
        layer.c2 = channels[f]
        scale = args[1] if len(args) > 1 else 1
        layer.stride = strides[f] / float(scale)


class YOLOv7Model(nn.Module):
    """The YOLOv7 detection model: `model` runs layer by layer, each layer called as a module.

    Attributes as ultralytics' DetectionModel: model, save, stride (tensor [8, 16, 32]),
    names (class index -> name), yaml (the cfg dict, with nc and ch filled in), nc.
    """

    def __init__(self, cfg: Mapping[str, Any], nc: int | None = None, ch: int = 3) -> None:
        super().__init__()
        given = copy.deepcopy(dict(cfg))
        if nc is not None:
            given["nc"] = nc
        given.setdefault("ch", ch)
        self.yaml = model_cfg(given, "the model cfg")
        self.nc = int(self.yaml["nc"])
        self.model, self.save = parse_model(self.yaml, ch=int(self.yaml["ch"]))
        head = self.model[-1]
        if not isinstance(head, Detect):
            raise ValueError("the last layer of a YOLOv7 cfg must be Detect")
        self.stride: torch.Tensor = head.stride.clone()
        self.names: dict[int, str] = (
            dict(enumerate(COCO_NAMES)) if self.nc == len(COCO_NAMES) else {i: str(i) for i in range(self.nc)}
        )
        head.initialize_biases()

    def forward(self, x: torch.Tensor) -> Any:
        outputs: list[Any] = []
        y: Any = x
        for m in self.model:
            f: Any = m.f
            if f != -1:
                y = outputs[f] if isinstance(f, int) else [y if j == -1 else outputs[j] for j in f]
            y = m(y)
            outputs.append(y if m.i in self.save else None)
        return y

    @torch.no_grad()
    def fuse(self, verbose: bool = False) -> YOLOv7Model:
        """Re-parameterise RepConv and fold BatchNorm into Conv, in place (use in eval mode)."""
        targets = [m for m in self.model.modules() if isinstance(m, RepConv | Conv)]
        for m in targets:
            m.fuse()
        if verbose:
            count = sum(p.numel() for p in self.parameters())
            print(f"fused {len(targets)} layers: {count:,} parameters")
        return self

    @property
    def is_fused(self) -> bool:
        return all(m.fused for m in self.model.modules() if isinstance(m, RepConv | Conv))


def build_yolov7(name: str, nc: int = 80, cfg: Mapping[str, Any] | None = None) -> YOLOv7Model:
    """The unfused model `name` (one of MODEL_NAMES), or the architecture `cfg` if given.

    Initialisation follows the official code (PyTorch default conv init, BatchNorm eps 1e-3 and
    momentum 0.03, Detect bias priors); seed torch before calling for a reproducible init.
    """
    return YOLOv7Model(cfg if cfg is not None else _packaged_cfg(name), nc=nc)


def fold_implicit_head(state: Mapping[str, torch.Tensor], head_index: int) -> tuple[dict[str, torch.Tensor], bool]:
    """A state dict with an IDetect head (YOLOR implicit layers) turned into a Detect state dict.

    The official release checkpoints (yolov7.pt, yolov7x.pt, yolov7-tiny.pt) carry the training
    head IDetect: conv(x + ia) * im per level. The same numbers come from one conv with
        weight' = weight * im,   bias' = (bias + weight @ ia) * im,
    which is what the official reparameterization notebook computes. Returns (state, folded?).
    """
    prefix = f"model.{head_index}."
    if not any(k.startswith(prefix + "ia.") or k.startswith(prefix + "im.") for k in state):
        return dict(state), False
    out = {k: v for k, v in state.items() if not k.startswith((prefix + "ia.", prefix + "im."))}
    level = 0
    while f"{prefix}m.{level}.weight" in state:
        weight = state[f"{prefix}m.{level}.weight"].float()
        bias = state[f"{prefix}m.{level}.bias"].float()
        ia = state[f"{prefix}ia.{level}.implicit"].float().reshape(-1)
        im = state[f"{prefix}im.{level}.implicit"].float().reshape(-1)
        bias = (bias + weight.flatten(1) @ ia) * im
        weight = weight * im.view(-1, 1, 1, 1)
        out[f"{prefix}m.{level}.weight"] = weight
        out[f"{prefix}m.{level}.bias"] = bias
        level += 1
    return out, True


def architecture_of(cfg: Mapping[str, Any]) -> str | None:
    """Which of MODEL_NAMES has the layer list of `cfg` (IDetect counted as Detect), if any."""

    def layers(c: Mapping[str, Any]) -> list[Any]:
        rows = list(c.get("backbone") or []) + list(c.get("head") or [])
        return [[r[0], r[1], "Detect" if r[2] == "IDetect" else r[2], r[3]] for r in rows]

    try:
        wanted = layers(cfg)
    except (TypeError, IndexError, KeyError):
        return None
    for name in MODEL_NAMES:
        if layers(_packaged_cfg(name)) == wanted:
            return name
    return None
