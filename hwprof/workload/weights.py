"""Loading YOLO checkpoints without running code from the file.

    model, info = load_checkpoint(path, model_name, build)

`build(model_name)` must return a freshly built, unfused model of the architecture the caller
wants; when the checkpoint records a class count other than 80, it is called as
`build(model_name, nc=nc)` instead (build_yolov7 and ultralytics' DetectionModel accept that).
The checkpoint's tensors are copied into that model with strict key and shape matching
(fp16 -> fp32); if they fit only the fused form (a checkpoint saved after fuse()), the model is
fused first and `info.fused` is True. Anything wrong raises WeightsError, one line for the user.

Formats (WeightsInfo.format):
  "ultralytics"      a dict whose "ema" or "model" is a pickled ultralytics DetectionModel
  "yolov7-official"  a dict whose "model" (or "ema") is a pickled official models.yolo.Model; the
                     release files carry the training head IDetect, which is folded into Detect
  "state_dict"       a mapping of str -> tensor, or one under "state_dict", "model" or "ema"

Safety: torch.load(weights_only=True) always. The pickled-module formats need classes, so the
globals a file may name are allowlisted exactly: the torch.nn layer classes YOLO models use, the
official YOLOv7 class names mapped onto this project's own classes (the official code is never
imported), ultralytics' own classes (see _ultralytics_globals), and numpy scalars and arrays.
Before loading, the file's globals are listed without unpickling and any other global is
refused by name; torch's own refusal is the second line (and the only one for legacy files).
The unpickled module tree is not used: only its tensors (and, for YOLOv7, its class count,
class names and cfg, read as data) go into the freshly built model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from hwprof.workload import yolov7 as y7
from hwprof.workload.checkpoint_globals import WeightsError, few_keys, unpickle_checkpoint
from hwprof.workload.weights_file import WEIGHTS_FIX, weights_file_problem

Format = Literal["ultralytics", "yolov7-official", "state_dict"]
Builder = Callable[..., nn.Module]

_DEFAULT_NC = 80


@dataclass(frozen=True)
class WeightsInfo:
    path: Path
    format: Format
    dtype: str
    """Floating-point dtype of the tensors in the file ("float16", or "mixed(float16,float32)")."""
    sha256: str
    num_tensors: int
    """Tensors in the file's state dict, before any conversion."""
    nc: int | None = None
    """Class count recorded in the checkpoint, if it records one."""
    fused: bool = False
    """The tensors were the fused form; the returned model has been fused."""
    notes: tuple[str, ...] = ()
    source: str | None = None
    """Where the file came from and its licence, for a trained model fetched by name (hwprof.workload.trained)."""
    origin: str | None = None
    """`source` in short (the wheel and its licence), for the report's first screen."""
    names: dict[int, str] | None = None
    """Class id -> name as the checkpoint records them (None: it records none)."""

    def to_dict(self) -> dict[str, Any]:
        """model.json's `weights` (hwprof.schema.weights.WeightsDoc); origin and names only where known, so that
        a file without them is written as before."""
        data = asdict(self)
        data["path"] = str(self.path)
        data["notes"] = list(self.notes)
        for key in ("origin", "names"):
            if data[key] is None:
                del data[key]
        if self.names is not None:
            data["names"] = {str(k): v for k, v in sorted(self.names.items())}
        return data


def _is_state_dict(obj: Any) -> bool:
    return (
        isinstance(obj, Mapping)
        and len(obj) > 0
        and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items())
    )


def _module_state(path: Path, module: nn.Module) -> dict[str, torch.Tensor]:
    try:
        state = module.state_dict()
    except Exception as exc:
        raise WeightsError(path, f"the pickled model is malformed ({exc})", "export the weights again") from None
    bad = [k for k, v in state.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise WeightsError(path, f"the pickled model has non-tensor state at {bad[:3]}", "export the weights again")
    return dict(state)


def _dtype_of(state: Mapping[str, torch.Tensor]) -> str:
    dtypes = sorted({str(v.dtype).removeprefix("torch.") for v in state.values() if v.is_floating_point()})
    if len(dtypes) == 1:
        return dtypes[0]
    return f"mixed({','.join(dtypes)})" if dtypes else "none"


def _names(value: Any) -> dict[int, str] | None:
    if isinstance(value, Mapping) and value:
        return {int(k): str(v) for k, v in value.items()}
    if isinstance(value, list | tuple) and value:
        return {i: str(v) for i, v in enumerate(value)}
    return None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass
class _Extracted:
    format: Format
    state: dict[str, torch.Tensor]
    nc: int | None
    names: dict[int, str] | None
    cfg: Mapping[str, Any] | None


def _extract(path: Path, obj: Any) -> _Extracted:
    if isinstance(obj, nn.Module):
        obj = {"model": obj}
    if not isinstance(obj, Mapping):
        raise WeightsError(
            path,
            f"holds a {type(obj).__name__}, not a checkpoint dict or state dict",
            "pass a .pt checkpoint of a YOLO model",
        )
    if not obj:
        raise WeightsError(path, "is an empty checkpoint (no model, no tensors)", "pass a checkpoint with weights")
    for key in ("ema", "model"):
        module = obj.get(key)
        if isinstance(module, y7.YOLOv7Model):
            cfg = module.__dict__.get("yaml")
            cfg = cfg if isinstance(cfg, Mapping) else None
            nc = _int_or_none(cfg.get("nc") if cfg else None) or _int_or_none(module.__dict__.get("nc"))
            return _Extracted(
                "yolov7-official", _module_state(path, module), nc, _names(module.__dict__.get("names")), cfg
            )
        if isinstance(module, nn.Module) and type(module).__module__.startswith("ultralytics."):
            cfg = module.__dict__.get("yaml")
            cfg = cfg if isinstance(cfg, Mapping) else None
            nc = _int_or_none(cfg.get("nc") if cfg else None) or _int_or_none(module.__dict__.get("nc"))
            return _Extracted(
                "ultralytics", _module_state(path, module), nc, _names(module.__dict__.get("names")), None
            )
        if isinstance(module, nn.Module):
            raise WeightsError(
                path,
                f"its {key!r} is a {type(module).__qualname__}, not a YOLO detection model",
                "pass an ultralytics or YOLOv7 checkpoint",
            )
    if _is_state_dict(obj):
        return _Extracted("state_dict", dict(obj), None, None, None)
    for key in ("state_dict", "model", "ema"):
        if _is_state_dict(obj.get(key)):
            return _Extracted("state_dict", dict(obj[key]), None, None, None)
    keys = ", ".join(repr(k) for k in list(obj)[:6])
    raise WeightsError(
        path,
        f"is not a YOLO checkpoint (top-level keys {keys}; no model, ema or state dict of tensors)",
        "pass an ultralytics or YOLOv7 .pt file, or a state dict (torch.save(model.state_dict(), path))",
    )


def _build(path: Path, build: Builder, model_name: str, nc: int | None) -> nn.Module:
    try:
        model = build(model_name) if nc in (None, _DEFAULT_NC) else build(model_name, nc=nc)
    except TypeError:
        if nc in (None, _DEFAULT_NC):
            raise
        raise WeightsError(
            path, f"the checkpoint has {nc} classes and the model builder cannot take nc", "build with nc="
        ) from None
    return model.float()


def _mismatch(model: nn.Module, state: Mapping[str, torch.Tensor]) -> tuple[list[str], list[str], list[str]]:
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    shapes = [
        f"{k}: file {tuple(state[k].shape)} vs model {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and state[k].shape != v.shape
    ]
    return missing, unexpected, shapes


def _fuse(model: nn.Module) -> bool:
    fuse = getattr(model, "fuse", None)
    if not callable(fuse):
        return False
    try:
        fuse(verbose=False)
    except TypeError:
        fuse()
    return True


def _load_strict(path: Path, model: nn.Module, state: Mapping[str, torch.Tensor], model_name: str, hint: str) -> bool:
    """Copy `state` into `model`; True when the model had to be fused to fit."""
    missing, unexpected, shapes = _mismatch(model, state)
    fused = False
    if (missing or unexpected or shapes) and _fuse(model):
        fused_result = _mismatch(model, state)
        if not any(fused_result):
            missing, unexpected, shapes, fused = [], [], [], True
    if missing or unexpected or shapes:
        parts = []
        if shapes:
            parts.append(f"{len(shapes)} shapes differ ({few_keys(shapes, 2)})")
        if missing:
            parts.append(f"{len(missing)} tensors missing from the file ({few_keys(missing)})")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected tensors ({few_keys(unexpected)})")
        raise WeightsError(
            path,
            f"the weights do not fit model {model_name!r}: {'; '.join(parts)}",
            hint or "pass the model name these weights were trained for",
        )
    with torch.no_grad():
        model.load_state_dict(state, strict=True)
    return fused


def load_checkpoint(
    path: Path | str, model_name: str, build: Builder, source: str | None = None, origin: str | None = None
) -> tuple[nn.Module, WeightsInfo]:
    """The model `build` makes for `model_name`, holding the checkpoint's weights, and what was loaded
    (`source`: where the file came from, `origin` the same in short; both kept in the info)."""
    path = Path(path)
    problem = weights_file_problem(path)
    if problem:
        raise WeightsError(path, problem, WEIGHTS_FIX)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WeightsError(path, f"cannot be read ({exc.strerror})", "check the file's permissions") from None
    if not data:
        raise WeightsError(path, "is an empty file", "download or export the weights again")
    sha256 = hashlib.sha256(data).hexdigest()

    extracted = _extract(path, unpickle_checkpoint(path, data))
    num_tensors = len(extracted.state)
    dtype = _dtype_of(extracted.state)
    state = extracted.state
    notes: list[str] = []
    hint = ""
    if extracted.format == "yolov7-official":
        head_index = max(
            (int(k.split(".")[1]) for k in state if k.startswith("model.") and k.split(".")[1].isdigit()),
            default=-1,
        )
        state, folded = y7.fold_implicit_head(state, head_index)
        if folded:
            notes.append("IDetect implicit layers folded into Detect (release checkpoint)")
        arch = y7.architecture_of(extracted.cfg) if extracted.cfg is not None else None
        if arch is not None and arch != model_name:
            raise WeightsError(path, f"holds {arch} weights, not {model_name}", f"use model {arch!r} with this file")
        if arch is not None:
            hint = f"the checkpoint's cfg is {arch}"

    model = _build(path, build, model_name, extracted.nc)
    fused = _load_strict(path, model, state, model_name, hint)
    if fused:
        notes.append("the file holds fused weights; the model was fused to load them")
    if extracted.names is not None and hasattr(model, "names"):
        setattr(model, "names", extracted.names)  # noqa: B010  (nn.Module's typed __setattr__)
    info = WeightsInfo(
        path=path,
        format=extracted.format,
        dtype=dtype,
        sha256=sha256,
        num_tensors=num_tensors,
        nc=extracted.nc,
        fused=fused,
        notes=tuple(notes),
        source=source,
        origin=origin,
        names=extracted.names,
    )
    return model, info
