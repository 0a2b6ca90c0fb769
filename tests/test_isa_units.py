"""The host line's units and which runtime uses them: a pure function of the recorded flags (fixed flag sets)."""

from __future__ import annotations

import pytest

from hwprof.core.isa_units import advice_units, units_text, uses_text
from hwprof.core.runtime_names import check_runtime_precision, runs_on

XEON = ["avx2", "avx512f", "avx512_bf16", "avx512_fp16", "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8"]


def test_the_advice_units_are_named_in_order() -> None:
    assert advice_units(XEON) == ["AMX-BF16", "AMX-INT8", "AVX512-BF16", "AVX512-FP16", "AVX512-VNNI", "AVX-VNNI"]
    assert units_text(["avx2", "avx512f", "avx512_bf16", "avx512_vnni"]) == "units AVX512-BF16, AVX512-VNNI"


def test_each_runtime_names_the_units_it_will_use() -> None:
    text = uses_text(XEON)
    assert text is not None
    assert "torch bf16 (autocast, bf16-weights; oneDNN): AMX-BF16, AVX512-BF16" in text
    assert "OpenVINO bf16 (CPU plugin, oneDNN): AMX-BF16, AVX512-BF16" in text
    assert "ONNX Runtime int8-static (QDQ u8s8; MLAS): AMX-INT8, AVX512-VNNI, AVX-VNNI" in text
    assert "AVX512-FP16: none" in text
    epyc = uses_text(["avx2", "avx512f", "avx512_bf16", "avx512_vnni"])
    assert epyc is not None and "AMX" not in epyc and "FP16" not in epyc


@pytest.mark.parametrize("flags", [["avx2", "fma"], []])
def test_a_host_without_the_units_says_so(flags: list[str]) -> None:
    assert units_text(flags).startswith("no AMX, AVX512-BF16/FP16 or VNNI units")
    assert uses_text(flags) is None


def test_a_run_that_recorded_no_flags_still_renders() -> None:
    assert units_text(None) == "units not recorded (the run recorded no ISA flags)"
    assert uses_text(None) is None
    # a run recorded before avx512_fp16 was in ISA_RECORDED: the units it has, nothing made up
    assert units_text(["avx512f", "avx512_bf16"]) == "units AVX512-BF16"


def test_the_new_precisions_are_refused_in_one_line_where_they_do_not_apply() -> None:
    with pytest.raises(ValueError, match="runs on --device cpu only") as info:
        check_runtime_precision("torch", "bf16-weights", "cuda")
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="runtime onnxruntime does not run precision 'bf16-weights'"):
        check_runtime_precision("onnxruntime", "bf16-weights")
    with pytest.raises(ValueError, match="runtime torch does not run precision 'int8-static'"):
        check_runtime_precision("torch", "int8-static")
    check_runtime_precision("torch", "bf16-weights")
    check_runtime_precision("onnxruntime", "int8-static")
    assert runs_on("torch", "bf16-weights", "cpu") and not runs_on("torch", "bf16-weights", "cuda")


@pytest.mark.parametrize(
    ("runtime", "precision", "said"),
    [
        ("torch", "fp32", None),
        ("torch", "bf16", "torch bf16 (autocast, bf16-weights; oneDNN): AMX-BF16, AVX512-BF16"),
        ("torch", "bf16-weights", "torch bf16 (autocast, bf16-weights; oneDNN): AMX-BF16, AVX512-BF16"),
        ("openvino", "bf16", "OpenVINO bf16 (CPU plugin, oneDNN): AMX-BF16, AVX512-BF16"),
        ("onnxruntime", "int8-static", "ONNX Runtime int8-static (QDQ u8s8; MLAS): AMX-INT8, AVX512-VNNI, AVX-VNNI"),
        ("onnxruntime", "int8", None),
        ("openvino", "fp32", None),
    ],
)
def test_a_run_names_only_the_units_its_own_runtime_and_precision_used(
    runtime: str, precision: str, said: str | None
) -> None:
    """Issue 68: "units used ONNX Runtime int8-static (QDQ u8s8; MLAS)" stood in the header of a torch fp32 run."""
    from hwprof.core.isa_units import run_uses_text

    assert run_uses_text(XEON, runtime, precision) == said
    assert run_uses_text(["avx2"], runtime, precision) is None and run_uses_text(None, runtime, precision) is None
