"""GPU kernels sorted into what they do, from their names (cuDNN, CUTLASS and ATen naming), and
tensor-core use per kernel from the one counter that shows it.

By name only (a guess, labelled as such wherever it is shown): cuDNN's `nchwToNhwcKernel` /
`nhwcToNchwKernel` are layout transposes; a convolution or GEMM kernel whose name carries a tensor-core
data type (tf32, f16, bf16) or `tensorop`/`hmma`/`gmma` is named for tensor cores, while
`implicit_convolve_sgemm` and `..._f32f32_f32f32_...` engines are named for FP32 on the CUDA cores.
Whether a kernel did tensor-core math is measured only by ncu's HMMA/IMMA/GMMA instruction counters
(`tensor_math_inst`, collectors/gpu/ncu/per_layer.py): see `tensor_core_by_counter`. The tensor-pipe total
(sm__inst_executed_pipe_tensor) is not used: on the H100 recording it counts in layout transposes and
elementwise kernels too. No finding comes from the names alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from hwprof.schema.codec import need
from hwprof.schema.gpu_files import NcuKernel

TRANSPOSE = "layout transpose"
CONV_TENSOR = "conv/gemm, tensor-core name"
CONV_FP32 = "conv/gemm, FP32 (CUDA-core) name"
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


@dataclass
class TensorCoreUse:
    """Conv/GEMM kernel time with and without tensor-core math instructions (measured by ncu), in ns; or
    why it is unknown and the ncu option that records it."""

    tensor_ns: float | None = None
    no_tensor_ns: float | None = None
    unavailable: str | None = None
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        """As gpu-import's JSON holds it: {"unavailable", "fix"}, or the two times."""
        if self.unavailable is not None:
            return {"unavailable": self.unavailable, "fix": self.fix}
        return {"conv_gemm_tensor_ns": self.tensor_ns, "conv_gemm_no_tensor_ns": self.no_tensor_ns}


def tensor_core_by_counter(kernels: Iterable[NcuKernel], fix: str) -> TensorCoreUse:
    """From ncu kernel rows: conv/gemm kernel time with and without tensor-core math instructions
    (measured); unavailable where a conv/gemm kernel has no tensor-core math figure (the counters were not
    recorded). `fix`: the ncu option that records them."""
    on = off = 0.0
    unmeasured = 0
    conv = 0
    for k in kernels:
        if kernel_class(k.name) in (CONV_TENSOR, CONV_FP32):
            conv += 1
            math = k.tensor_math_inst
            if math is None:
                unmeasured += 1
            elif math > 0:
                on += k.ns
            else:
                off += k.ns
    if not conv:
        return TensorCoreUse(unavailable="no conv/GEMM kernel measured by ncu")
    if unmeasured:
        return TensorCoreUse(
            unavailable=f"the ncu CSV has no tensor-core math counter for {unmeasured} of {conv} conv/GEMM kernels",
            fix=fix,
        )
    return TensorCoreUse(tensor_ns=on, no_tensor_ns=off)


@dataclass
class LaunchFill:
    """How much of the GPU the kernels' launches could fill (ncu kernel replay), weighted by kernel time."""

    kernels: int
    sm_count: float
    under_one_wave: float
    """Share of kernel time in launches of under one wave (launch__waves_per_multiprocessor < 1)."""
    sub_sm_grid: float
    """Share of kernel time in launches of fewer blocks than SMs (launch__grid_size < launch__sm_count)."""
    achieved_occupancy_pct: float | None
    theoretical_occupancy_pct: float | None


def launch_fill(kernels: Iterable[NcuKernel]) -> LaunchFill | None:
    """From ncu kernel rows with their launch size (grid_blocks, sm_count, waves); None where any kernel
    lacks it (an older run or a CSV without launch__ columns): no figure, so no cause."""
    rows = list(kernels)
    if not rows or any(not k.launch_known for k in rows):
        return None
    total = sum(k.ns for k in rows)
    if total <= 0:
        return None

    def weighted(value: Callable[[NcuKernel], float | None]) -> float | None:
        known = [(k.ns, v) for k in rows if (v := value(k)) is not None]
        ns = sum(n for n, _ in known)
        return sum(n * v for n, v in known) / ns if known and ns > 0 else None

    return LaunchFill(
        kernels=len(rows),
        sm_count=max(need(k.sm_count) for k in rows),
        under_one_wave=sum(k.ns for k in rows if need(k.waves) < 1.0) / total,
        sub_sm_grid=sum(k.ns for k in rows if need(k.grid_blocks) < need(k.sm_count)) / total,
        achieved_occupancy_pct=weighted(lambda k: k.achieved_occupancy_pct),
        theoretical_occupancy_pct=weighted(lambda k: k.theoretical_occupancy_pct),
    )
