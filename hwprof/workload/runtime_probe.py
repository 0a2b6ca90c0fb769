"""Which runtimes this host can run the forward on, for `hwprof doctor` (imports each package)."""

from __future__ import annotations

from dataclasses import dataclass

from hwprof.core.host_facts import current
from hwprof.core.runtime_names import RUNTIME_PRECISIONS, import_runtime


@dataclass(frozen=True)
class RuntimeStatus:
    runtime: str
    version: str | None
    """None when the package cannot be imported."""
    precisions: tuple[str, ...]
    note: str


def openvino_note(capabilities: list[str]) -> str:
    """doctor's note on OpenVINO: its CPU capabilities and what a bf16 hint runs in."""
    if "BF16" in capabilities:
        return "CPU capabilities " + ", ".join(capabilities) + ": bf16 runs natively (OpenVINO's default here)"
    return "CPU capabilities " + ", ".join(capabilities) + ": no BF16, a bf16 hint runs fp32"


def torch_note(capability: str) -> str:
    """doctor's note on torch: the instruction set of its CPU kernels."""
    return f"CPU capability {capability}; bf16 by autocast"


def _bf16_note() -> str:
    try:
        capabilities = current().openvino_capabilities()
    except Exception as exc:
        return f"OpenVINO CPU plugin unusable: {type(exc).__name__}: {exc}"
    return openvino_note(capabilities)


def runtime_statuses() -> list[RuntimeStatus]:
    out = []
    for runtime, precisions in RUNTIME_PRECISIONS.items():
        try:
            module = import_runtime(runtime)
        except ImportError as exc:
            out.append(
                RuntimeStatus(runtime, None, precisions, f"cannot be imported ({exc}); fix: pip install {runtime}")
            )
            continue
        note = ""
        if runtime == "torch":
            note = torch_note(current().torch_cpu().capability)
        elif runtime == "openvino":
            note = _bf16_note()
        elif runtime == "onnxruntime":
            note = "providers: " + ", ".join(module.get_available_providers())
        out.append(RuntimeStatus(runtime, str(getattr(module, "__version__", "?")), precisions, note))
    return out
