"""The runtimes that can run the forward and the precisions each supports (no heavy imports here)."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from hwprof.core.uservalue import shown

BF16_WEIGHTS = "bf16-weights"
INT8_STATIC = "int8-static"
RUNTIME_PRECISIONS: dict[str, tuple[str, ...]] = {
    "torch": ("fp32", "bf16", BF16_WEIGHTS, "fp16"),
    "onnxruntime": ("fp32", "int8", INT8_STATIC),
    "openvino": ("fp32", "bf16"),
}
"""torch bf16 is CPU autocast on the CPU and a bf16 model on a CUDA device; bf16-weights (CPU only) is a copy of the
model converted to bf16 with its input in bf16 and its output back to float; fp16 runs on a CUDA device
only; ONNX Runtime int8 is dynamic quantization of the exported model, int8-static static quantization (QDQ)
calibrated on the run's own images; OpenVINO's precisions are INFERENCE_PRECISION_HINT values."""

RUNTIMES: tuple[str, ...] = tuple(RUNTIME_PRECISIONS)
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", BF16_WEIGHTS, "fp16", "int8", INT8_STATIC)
CPU_ONLY = (BF16_WEIGHTS,)
"""Torch precisions that run on the CPU only (on a CUDA device, bf16 is already a bf16 model)."""
DEVICE_RE = r"^(cpu|cuda(:\d+)?)$"


def runs_on(runtime: str, precision: str, device: str) -> bool:
    """Whether hwprof runs this runtime at this precision on this device (cpu or cuda[:N])."""
    if precision not in RUNTIME_PRECISIONS.get(runtime, ()):
        return False
    if device == "cpu":
        return precision != "fp16"
    return runtime == "torch" and precision not in CPU_ONLY


def supported_text() -> str:
    return "; ".join(f"{r}: {', '.join(p)}" for r, p in RUNTIME_PRECISIONS.items())


def check_runtime_precision(runtime: str, precision: str, device: str = "cpu") -> None:
    """Raise ValueError (one line) for a runtime, precision or device this tool cannot run."""
    import re

    if not re.match(DEVICE_RE, device):
        raise ValueError(f"--device is cpu, cuda or cuda:N (got {device!r})")
    if device != "cpu" and runtime != "torch":
        raise ValueError(f"--device {device} runs the torch runtime only (got --runtime {runtime})")
    if device == "cpu" and precision == "fp16":
        raise ValueError("fp16 runs on --device cuda only (CPU deployments run fp32, bf16 or int8)")
    if device != "cpu" and precision in CPU_ONLY:
        raise ValueError(
            f"--precision {precision} runs on --device cpu only (on {device}, --precision bf16 is already a bf16 model)"
        )
    if runtime not in RUNTIME_PRECISIONS:
        raise ValueError(f"unknown runtime '{shown(runtime)}'; known: {', '.join(RUNTIMES)}")
    if precision not in RUNTIME_PRECISIONS[runtime]:
        raise ValueError(f"runtime {runtime} does not run precision {precision!r}; supported: {supported_text()}")


TELEMETRY_MODULES: dict[str, tuple[str, ...]] = {"openvino": ("openvino_telemetry",)}
"""Usage-reporting packages kept out of a runtime's import. `import openvino` sends an "import" event
over the network through openvino_telemetry (unless the user opted out), from a thread that forks a
multiprocessing child to do it: network traffic at run time, and under Scalene the forked copy of
the worker outlived it (issue 17, see hwprof/session/child.py). With the package unimportable, OpenVINO uses
its own no-op telemetry stub (openvino.tools.ovc.telemetry_stub)."""


def import_runtime(runtime: str) -> ModuleType:
    """Import a runtime's package without its telemetry (ImportError when it cannot be imported)."""
    for module in TELEMETRY_MODULES.get(runtime, ()):
        sys.modules.setdefault(module, None)  # type: ignore[arg-type]  # None: `import module` raises ImportError
    return importlib.import_module(runtime)
