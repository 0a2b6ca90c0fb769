"""GPU kernels sorted into what they do, from their names (cuDNN, CUTLASS and ATen naming), and the
findings this supports: layout transposes, convolutions on or off the tensor cores.

By name only: cuDNN's `nchwToNhwcKernel` / `nhwcToNchwKernel` are layout transposes; a convolution
or GEMM kernel whose name carries a tensor-core data type (tf32, f16, bf16) or `tensorop`/`hmma`/
`gmma` runs on tensor cores, while `implicit_convolve_sgemm` and `..._f32f32_f32f32_...` engines are
FP32 on the CUDA cores. Where Nsight Compute measured the kernel, its tensor-pipe instruction count
settles it (collectors/gpu/ncu): see `tensor_core_by_counter`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

TRANSPOSE = "layout transpose"
CONV_TENSOR = "conv/gemm on tensor cores"
CONV_FP32 = "conv/gemm on CUDA cores (no tensor cores)"
ELEMENTWISE = "elementwise/other"

_TRANSPOSE = re.compile(r"nchwToNhwc|nhwcToNchw")
_FP32_SIMT = re.compile(r"implicit_convolve_sgemm|_f32f32_f32f32_|\bsgemm|gemv2T_kernel|gemmSN_")
_TENSOR = re.compile(r"tf32|f16|bf16|tensorop|hmma|gmma|_h\d{4}gemm|s1688|s16816", re.I)
_CONVGEMM = re.compile(r"conv|fprop|dgrad|wgrad|gemm|xmma|cutlass", re.I)


def kernel_class(name: str) -> str:
    if _TRANSPOSE.search(name):
        return TRANSPOSE
    if _FP32_SIMT.search(name):
        return CONV_FP32
    if _CONVGEMM.search(name):
        return CONV_TENSOR if _TENSOR.search(name) else CONV_FP32
    return ELEMENTWISE


@dataclass
class ClassShare:
    cls: str
    gpu_ns: float
    kernels: float
    share: float
    """Of the forward's GPU time."""
    top: list[tuple[str, float]]
    """The largest kernels of the class: (name, ns per forward)."""


def class_shares(rows: Iterable[tuple[str, float, float]], total_ns: float, top: int = 3) -> list[ClassShare]:
    """rows: (kernel name, ns per forward, calls per forward)."""
    by: dict[str, list[tuple[str, float, float]]] = {}
    for name, ns, calls in rows:
        by.setdefault(kernel_class(name), []).append((name, ns, calls))
    out = []
    for cls, items in by.items():
        merged: dict[str, float] = {}
        for name, ns, _ in items:
            merged[name] = merged.get(name, 0.0) + ns
        gpu = sum(ns for _, ns, _ in items)
        out.append(
            ClassShare(
                cls,
                gpu,
                sum(c for _, _, c in items),
                gpu / total_ns if total_ns > 0 else 0.0,
                sorted(merged.items(), key=lambda kv: -kv[1])[:top],
            )
        )
    out.sort(key=lambda c: -c.gpu_ns)
    return out


def tensor_core_by_counter(kernels: Iterable[dict]) -> dict[str, float]:
    """From ncu kernel rows ({"name", "ns", "tensor_inst"}): conv/gemm kernel time with and without
    tensor-pipe instructions (measured), in ns."""
    on = off = 0.0
    for k in kernels:
        if kernel_class(k["name"]) in (CONV_TENSOR, CONV_FP32):
            if k.get("tensor_inst", 0) > 0:
                on += k["ns"]
            else:
                off += k["ns"]
    return {"conv_gemm_tensor_ns": on, "conv_gemm_no_tensor_ns": off}
