"""The runtimes hwprof can run the forward with: loads every runtime module, each of which registers itself
with hwprof.workload.runtime, and picks the one a run asked for."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.workload.runtime import RUNTIMES, Runtime

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig
    from hwprof.workload.zoo import BuiltModel

RUNTIME_MODULES = ("hwprof.workload.rt_onnxruntime", "hwprof.workload.rt_openvino", "hwprof.workload.rt_cuda")
"""Modules whose import registers a runtime beside PyTorch (their packages are imported only when one runs)."""


def load_runtimes() -> dict[tuple[str, str], type[Runtime]]:
    for module in RUNTIME_MODULES:
        importlib.import_module(module)
    return RUNTIMES


def make_runtime(config: RunConfig, built: BuiltModel, run_dir: Path, out_dir: Path, profile: bool) -> Runtime:
    """The runtime of config.runtime for config's device kind, else its CPU one (ONNX Runtime and OpenVINO run
    on the CPU whatever the device); profile only for a runtime whose profiler hwprof drives."""
    known = load_runtimes()
    kind = config.device.split(":", 1)[0]
    cls = known.get((config.runtime, kind)) or known[(config.runtime, "cpu")]
    return cls(config, built, run_dir, out_dir, profile and bool(cls.profiler_name))
