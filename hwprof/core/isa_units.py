"""The CPU units that matter for advice, named from run.json's recorded ISA flags, and which runtime will use each.

Pure: a function of the recorded flags (core/host.ISA_RECORDED), so a run copied from another machine names its
own host's units, and a run recorded before a flag was in that list simply does not name it. "Will use" is said
only where the library documents or ships the kernels:
- torch on the CPU runs bf16 convolutions and matmuls through oneDNN, whose brgemm kernels use AMX-BF16 where the
  CPU has it and AVX512-BF16 (avx512_core_bf16) otherwise; hwprof's torch bf16 is autocast and bf16-weights.
- OpenVINO's CPU plugin runs INFERENCE_PRECISION_HINT=bf16 on the same oneDNN kernels (AMX, else AVX512-BF16).
- ONNX Runtime's MLAS has u8s8 QGEMM kernels for AMX-INT8 (qgemm_kernel_amx.cpp, falling back to AVX512-VNNI for
  small GEMMs), AVX512-VNNI and AVX-VNNI: the static int8 model (QDQ, uint8 activations, int8 weights) is u8s8.
  The dynamic int8 model quantizes its weights to uint8 (u8u8), which those kernels do not take: no claim for it.
- AVX512-FP16: hwprof runs no fp16 precision on the CPU, so no runtime here uses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

UNIT_LABELS: tuple[tuple[str, str], ...] = (
    ("amx_bf16", "AMX-BF16"),
    ("amx_int8", "AMX-INT8"),
    ("avx512_bf16", "AVX512-BF16"),
    ("avx512_fp16", "AVX512-FP16"),
    ("avx512_vnni", "AVX512-VNNI"),
    ("avx_vnni", "AVX-VNNI"),
)
"""/proc/cpuinfo flag -> the unit's name, in the order the host line names them."""
BF16_FLAGS = ("amx_bf16", "avx512_bf16")
INT8_FLAGS = ("amx_int8", "avx512_vnni", "avx_vnni")


@dataclass(frozen=True)
class RuntimeUse:
    """Which of the host's units one runtime and precision will use."""

    what: str
    """The runtime and precision, with the library that dispatches ("torch bf16 (autocast, bf16-weights; oneDNN)")."""
    units: tuple[str, ...]
    """Unit names (UNIT_LABELS) present on the host, best first."""


TORCH_BF16 = "torch bf16 (autocast, bf16-weights; oneDNN)"
OPENVINO_BF16 = "OpenVINO bf16 (CPU plugin, oneDNN)"
ORT_INT8_STATIC = "ONNX Runtime int8-static (QDQ u8s8; MLAS)"
USES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (TORCH_BF16, BF16_FLAGS),
    (OPENVINO_BF16, BF16_FLAGS),
    (ORT_INT8_STATIC, INT8_FLAGS),
)
RUNS: dict[tuple[str, str], str] = {
    ("torch", "bf16"): TORCH_BF16,
    ("torch", "bf16-weights"): TORCH_BF16,
    ("openvino", "bf16"): OPENVINO_BF16,
    ("onnxruntime", "int8-static"): ORT_INT8_STATIC,
}
"""A run's runtime and precision -> the USES entry it is (the others use none of these units)."""


def _label(flag: str) -> str:
    return dict(UNIT_LABELS)[flag]


def advice_units(flags: Sequence[str]) -> list[str]:
    """The advice-relevant units among the flags, named, in UNIT_LABELS' order."""
    return [label for flag, label in UNIT_LABELS if flag in flags]


def runtime_uses(flags: Sequence[str]) -> list[RuntimeUse]:
    """Each runtime and precision that will use one of the host's units, with those units (none: left out)."""
    out = []
    for what, wanted in USES:
        units = tuple(_label(f) for f in wanted if f in flags)
        if units:
            out.append(RuntimeUse(what, units))
    return out


def units_text(flags: Sequence[str] | None) -> str:
    """The host line's part: the units, or why none are named."""
    if flags is None:
        return "units not recorded (the run recorded no ISA flags)"
    units = advice_units(flags)
    if not units:
        return "no AMX, AVX512-BF16/FP16 or VNNI units (bf16 and int8 would be emulated)"
    return "units " + ", ".join(units)


def run_uses_text(flags: Sequence[str] | None, runtime: str, precision: str) -> str | None:
    """The units this run's runtime and precision used, as one clause; None where it used none of them (an fp32
    run: the report's header names only what the run itself used)."""
    what = RUNS.get((runtime, precision))
    use = next((u for u in runtime_uses(flags or []) if u.what == what), None)
    return None if use is None else f"{use.what}: {', '.join(use.units)}"


def uses_text(flags: Sequence[str] | None) -> str | None:
    """Which runtime will use which unit, one clause each; None where there is nothing to say."""
    if flags is None:
        return None
    clauses = [f"{u.what}: {', '.join(u.units)}" for u in runtime_uses(flags)]
    if "avx512_fp16" in flags:
        clauses.append("AVX512-FP16: none (hwprof runs no fp16 on the CPU)")
    return "; ".join(clauses) or None
