"""`hwprof models`: every known model with its layer count, fused params and FLOPs, cached per host.

Counting FLOPs runs on the meta device (no compute), so the whole catalogue takes seconds; the
figures are cached under ~/.cache/hwprof keyed by torch and ultralytics versions and image size.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hwprof.core.atomic import atomic_write_text
from hwprof.hardware.machine import cache_dir
from hwprof.workload.zoo import MODEL_NAMES, build_model, meta_flops

StepFn = Callable[[int, int, str], None]


def cache_path(imgsz: int) -> Path:
    root = cache_dir()
    versions = "-".join(importlib.metadata.version(p) for p in ("torch", "ultralytics", "hwprof"))
    return root / f"models-{versions}-{imgsz}.json"


def describe(name: str, imgsz: int) -> dict[str, Any]:
    built = build_model(name)
    flops = meta_flops(built.module, imgsz)
    return {
        "name": name,
        "family": built.family,
        "layers": len(built.module.model),  # type: ignore[arg-type]
        "params": built.params,
        "params_fused": built.params_fused,
        "flops": flops,
        "gflops": flops / 1e9,
    }


def model_catalog(imgsz: int = 640, step: StepFn | None = None) -> list[dict[str, Any]]:
    path = cache_path(imgsz)
    cached: dict[str, Any] = {}
    if path.exists():
        try:
            cached = json.loads(path.read_text())
        except ValueError:
            cached = {}
    out = []
    for i, name in enumerate(MODEL_NAMES):
        if step:
            step(i, len(MODEL_NAMES), name)
        if name not in cached:
            cached[name] = describe(name, imgsz)
        out.append(cached[name])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(cached, indent=1))
    except OSError:
        pass
    return out
