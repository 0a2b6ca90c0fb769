"""Which runtimes this host can run the forward on, for `hwprof doctor` (imports each package)."""

from __future__ import annotations

from dataclasses import dataclass

from hwprof.core.runtime_names import RUNTIME_PRECISIONS, import_runtime


@dataclass(frozen=True)
class RuntimeStatus:
    runtime: str
    version: str | None
    """None when the package cannot be imported."""
    precisions: tuple[str, ...]
    note: str


def _bf16_note() -> str:
    try:
        ov = import_runtime("openvino")
        capabilities = [str(c) for c in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")]
    except Exception as exc:
        return f"OpenVINO CPU plugin unusable: {type(exc).__name__}: {exc}"
    if "BF16" in capabilities:
        return "CPU capabilities " + ", ".join(capabilities) + ": bf16 runs natively (OpenVINO's default here)"
    return "CPU capabilities " + ", ".join(capabilities) + ": no BF16, a bf16 hint runs fp32"


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
            import torch

            note = f"CPU capability {torch.backends.cpu.get_cpu_capability()}; bf16 by autocast"
        elif runtime == "openvino":
            note = _bf16_note()
        elif runtime == "onnxruntime":
            note = "providers: " + ", ".join(module.get_available_providers())
        out.append(RuntimeStatus(runtime, str(getattr(module, "__version__", "?")), precisions, note))
    return out
