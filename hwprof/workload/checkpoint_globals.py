"""The globals a checkpoint may name, allowlisted exactly, and the unpickling that refuses any other by name
before torch.load(weights_only=True) runs.
"""

from __future__ import annotations

import contextlib
import io
import pickle
import re
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from hwprof.core.uservalue import shown
from hwprof.workload import yolov7 as y7
from hwprof.workload import yolov7_modules as y7m


class WeightsError(Exception):
    """A checkpoint that cannot be used; str() is one line: file, problem, what to do."""

    def __init__(self, path: Path | str, problem: str, action: str) -> None:
        self.path = Path(path)
        self.problem = " ".join(problem.split())
        self.action = " ".join(action.split())
        super().__init__(f"{shown(self.path)}: {self.problem}; {self.action}")

    def __reduce__(self) -> tuple[type[WeightsError], tuple[Path, str, str]]:
        return (type(self), (self.path, self.problem, self.action))


class _UnusedModule(nn.Module):
    """Stands in for official classes whose state is read but never run (IDetect, ImplicitA/M)."""


_OFFICIAL_YOLOV7: dict[str, type[nn.Module]] = {
    "models.yolo.Model": y7.YOLOv7Model,
    "models.yolo.Detect": y7m.Detect,
    "models.yolo.IDetect": _UnusedModule,
    "models.common.Conv": y7m.Conv,
    "models.common.Concat": y7m.Concat,
    "models.common.MP": y7m.MP,
    "models.common.SP": y7m.SP,
    "models.common.SPPCSPC": y7m.SPPCSPC,
    "models.common.RepConv": y7m.RepConv,
    "models.common.ImplicitA": _UnusedModule,
    "models.common.ImplicitM": _UnusedModule,
}
_OFFICIAL_YOLOV7 |= {f"yolov7.{name}": cls for name, cls in _OFFICIAL_YOLOV7.items()}
"""Official YOLOv7 class paths (deploy and release checkpoints) -> the classes they unpickle as; also under
`yolov7.` (the official repository packaged as the `yolov7detect` sdist, whose checkpoints name its package)."""
_TORCH_NN: tuple[type[nn.Module], ...] = (
    nn.Conv2d,
    nn.BatchNorm2d,
    nn.SiLU,
    nn.LeakyReLU,
    nn.ReLU,
    nn.Hardswish,
    nn.Sigmoid,
    nn.Identity,
    nn.MaxPool2d,
    nn.Upsample,
    nn.Sequential,
    nn.ModuleList,
)
"""The torch.nn classes inside YOLOv7 and ultralytics YOLOv5u/v8/11 detection models."""


def _numpy_data_globals() -> list[Any]:
    """numpy scalars and arrays as training code stores them (e.g. best_fitness): data only."""
    import importlib

    import numpy as np

    multiarray = importlib.import_module("numpy._core.multiarray")
    entries: list[Any] = [np.dtype, np.ndarray]
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        entries.append((multiarray.scalar, f"{module}.scalar"))
        entries.append((multiarray._reconstruct, f"{module}._reconstruct"))
    for dtype_class in ("Float64", "Float32", "Float16", "Int64", "Int32", "Bool"):
        entries.append(getattr(np.dtypes, f"{dtype_class}DType"))
    return entries


def _ultralytics_globals() -> list[Any]:
    """ultralytics' own classes as its checkpoints pickle them.

    Model and layer classes (ultralytics.nn.modules.*, ultralytics.nn.tasks), the training-only
    loss and assigner objects some checkpoints carry (ultralytics.utils.loss / .tal; their state is
    restored as data, none of their code runs), the argument namespace (also under its pre-8.0.44
    path) and pathlib paths in training arguments.
    """
    import inspect
    import pathlib

    import ultralytics.nn.modules  # noqa: F401  (loads every ultralytics.nn.modules.* submodule)
    import ultralytics.nn.tasks as tasks
    import ultralytics.utils.loss as loss
    import ultralytics.utils.tal as tal
    from ultralytics.utils import IterableSimpleNamespace

    found: dict[str, type] = {}
    model_modules = [
        tasks,
        *(m for name, m in sys.modules.items() if name.startswith("ultralytics.nn.modules.")),
    ]
    for module in [*model_modules, loss, tal]:
        for _, obj in inspect.getmembers(module, inspect.isclass):
            own = obj.__module__ == module.__name__
            if own and (issubclass(obj, nn.Module) or module in (loss, tal)):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    found["ultralytics.utils.IterableSimpleNamespace"] = IterableSimpleNamespace
    found["ultralytics.yolo.utils.IterableSimpleNamespace"] = IterableSimpleNamespace
    for name in ("PosixPath", "WindowsPath"):
        for module_name in ("pathlib", "pathlib._local"):
            found[f"{module_name}.{name}"] = pathlib.PurePosixPath
    return [(obj, name) for name, obj in found.items()]


def _global_name(entry: Any) -> str:
    if isinstance(entry, tuple):
        return str(entry[1])
    return f"{entry.__module__}.{entry.__qualname__}"


def _allowlist(file_globals: Iterable[str] | None) -> list[Any]:
    """Every global a YOLO checkpoint may name; only those the file names when its list is known.

    torch looks allowlisted globals up by scanning the whole list on every pickle opcode that
    needs one, so a short list keeps loading fast.
    """
    allowed: list[Any] = [*_TORCH_NN, *((cls, name) for name, cls in _OFFICIAL_YOLOV7.items())]
    allowed.extend(_numpy_data_globals())
    named = None if file_globals is None else set(file_globals)
    if named is None or any(g.startswith(("ultralytics.", "pathlib.")) for g in named):
        with contextlib.suppress(ImportError):
            allowed.extend(_ultralytics_globals())
    if named is None:
        return allowed
    if "numpy.dtype" in named:  # a dtype is rebuilt as an instance of numpy.dtypes.*DType, never named
        named |= {_global_name(entry) for entry in allowed if _global_name(entry).startswith("numpy.dtypes.")}
    return [entry for entry in allowed if _global_name(entry) in named]


def _refusal(path: Path, name: str) -> WeightsError:
    return WeightsError(
        path,
        f"refusing to unpickle {name}: not a known YOLO class, and loading it could run code from the file",
        "use a checkpoint from ultralytics or WongKinYiu/yolov7, or save a plain state dict "
        "(torch.save(model.state_dict(), path)) from code you trust",
    )


def _file_globals(data: bytes) -> list[str] | None:
    """Globals the checkpoint's pickle names (not torch's own tensor machinery), without loading it."""
    if not zipfile.is_zipfile(io.BytesIO(data)):
        return None
    try:
        return torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data))
    except Exception:
        return None


def unpickle_checkpoint(path: Path, data: bytes) -> Any:
    file_globals = _file_globals(data)
    allowed = _allowlist(file_globals)
    if file_globals is not None:
        names = {_global_name(entry) for entry in allowed}
        refused = [g for g in file_globals if g not in names]
        if refused:
            raise _refusal(path, few_keys(sorted(refused)))
    try:
        with torch.serialization.safe_globals(allowed):
            return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        match = re.search(r"GLOBAL (\S+)", str(exc)) or re.search(r"unrecognized function (\S+)", str(exc))
        if match:
            raise _refusal(path, match.group(1)) from None
        raise _not_readable(path, exc) from None
    except Exception as exc:
        raise _not_readable(path, exc) from None


def _not_readable(path: Path, exc: BaseException) -> WeightsError:
    text = str(exc)
    inner = re.search(r"WeightsUnpickler error:\s*(.+)", text)
    if inner:
        text = inner.group(1)
    reason = (text.strip().split(". ")[0].splitlines() or [""])[0][:120] or type(exc).__name__
    return WeightsError(
        path,
        f"cannot be read as a PyTorch checkpoint: corrupt, truncated or another kind of file ({reason})",
        "download or export the weights again (.pt files written by torch.save)",
    )


def few_keys(keys: list[str], n: int = 3) -> str:
    more = f", +{len(keys) - n} more" if len(keys) > n else ""
    return ", ".join(keys[:n]) + more
