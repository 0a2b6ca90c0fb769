"""`hwprof models`: every known model with its layer count, fused params and FLOPs, cached per host.

Counting FLOPs runs on the meta device (no compute), so the whole catalogue takes seconds; the
figures are cached under ~/.cache/hwprof keyed by torch and ultralytics versions and image size.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hwprof.core.atomic import atomic_write_text
from hwprof.hardware.machine import cache_dir
from hwprof.workload.trained import TRAINED
from hwprof.workload.zoo import MODEL_NAMES, build_model, meta_flops

StepFn = Callable[[int, int, str], None]


def cache_path(imgsz: int) -> Path:
    root = cache_dir()
    versions = "-".join(importlib.metadata.version(p) for p in ("torch", "ultralytics", "hwprof"))
    return root / f"models-{versions}-{imgsz}.json"


@dataclass(frozen=True)
class ModelRow:
    """One model of the catalogue: a row of the table, and an entry of the cache file."""

    name: str
    family: str
    layers: int
    params: int
    params_fused: int
    flops: int
    gflops: float
    weights: str = "random init"
    """"random init", or a trained model's source (hwprof.workload.trained)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelRow:
        return cls(**d)


def describe(name: str, imgsz: int) -> ModelRow:
    """A model's sizes; a trained one's from its architecture with its class count (the same sizes; nothing is
    fetched for the list)."""
    trained = TRAINED.get(name)
    built = build_model(trained.architecture, nc=len(trained.classes)) if trained else build_model(name)
    flops = meta_flops(built.module, imgsz)
    return ModelRow(
        name=name,
        family=built.family,
        weights=f"trained ({'/'.join(trained.classes)}): {trained.requirement}, {trained.licence}"
        if trained
        else "random init",
        layers=len(built.module.model),  # type: ignore[arg-type]
        params=built.params,
        params_fused=built.params_fused,
        flops=flops,
        gflops=flops / 1e9,
    )


def read_cache_json(path: Path) -> dict[str, ModelRow]:
    """The cache file's rows by model name; a damaged file, or a row this hwprof cannot read, is left out
    (and measured again)."""
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text())
    except ValueError:
        return {}
    if not isinstance(doc, dict):
        return {}
    out = {}
    for name, row in doc.items():
        try:
            out[name] = ModelRow.from_dict(row)
        except TypeError:
            continue
    return out


def model_catalog(imgsz: int = 640, step: StepFn | None = None) -> list[ModelRow]:
    path = cache_path(imgsz)
    cached = read_cache_json(path)
    out = []
    for i, name in enumerate(MODEL_NAMES):
        if name not in cached:  # only a model built now is a step (the cached ones cost nothing to say)
            if step:
                step(i, len(MODEL_NAMES), name)
            cached[name] = describe(name, imgsz)
        out.append(cached[name])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({k: v.to_dict() for k, v in cached.items()}, indent=1))
    except OSError:
        pass
    return out
