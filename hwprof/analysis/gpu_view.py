"""The GPU view of a run directory (collectors/gpu/ outputs) and the GPU findings, each with its evidence.

Read: passes/gpu/gpu_kineto.{metrics,kernels}.json and its run.json summary (per-layer GPU time by
launch correlation, the forward's CPU time, GPU busy time and idle share), cuda_graph's summary
(eager against graph replay), nvml's summary (energy), passes/ncu/ncu.{metrics,kernels}.json and
passes/ncu_range/ncu_range.metrics.json (Nsight Compute per layer), passes/gpu/gpu_peaks.json.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.analysis.finding import Finding
from hwprof.analysis.gpu_kernels import CONV_FP32, TRANSPOSE, class_shares, tensor_core_by_counter
from hwprof.analysis.gpu_roofline import GpuRoof, GpuRoofRow, roofline_rows

if TYPE_CHECKING:
    from hwprof.rundata import RunData

LAUNCH_BOUND_IDLE = 0.5
"""A forward whose GPU idles more than this share of its window is launch-bound."""
TRANSPOSE_SHARE = 0.05
MEMORY_ROOF_SHARE = 0.5
"""A layer that moves DRAM bytes at this share of the bandwidth roof or more is memory-bound by measurement."""


def _json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


@dataclass
class GpuView:
    kineto: dict[str, Any] = field(default_factory=dict)
    """gpu_kineto's run.json summary."""
    layers: dict[str, dict[str, float]] = field(default_factory=dict)
    kernels: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    graph: dict[str, Any] = field(default_factory=dict)
    nvml: dict[str, Any] = field(default_factory=dict)
    ncu_layers: dict[str, dict[str, float]] = field(default_factory=dict)
    ncu_kernels: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    peaks: dict[str, float] = field(default_factory=dict)
    roofline: list[GpuRoofRow] = field(default_factory=list)

    def kernel_classes(self) -> list[Any]:
        rows = [(k["name"], k["gpu_us"] * 1e3, k["calls"]) for ks in self.kernels.values() for k in ks]
        total = sum(ns for _, ns, _ in rows)
        return class_shares(rows, total)


def load_gpu_view(data: RunData) -> GpuView | None:
    view = GpuView()
    gpu, ncu, rng = data.root / "passes" / "gpu", data.root / "passes" / "ncu", data.root / "passes" / "ncu_range"
    if (m := _json(gpu / "gpu_kineto.metrics.json")) is not None:
        view.layers = m.get("layers", {})
        view.kernels = (_json(gpu / "gpu_kineto.kernels.json") or {}).get("layers", {})
        view.kineto = data.collector("gpu_kineto").get("summary", {})
    view.graph = data.collector("cuda_graph").get("summary", {})
    view.nvml = data.collector("nvml").get("summary", {})
    for path in (ncu / "ncu.metrics.json", rng / "ncu_range.metrics.json"):
        for layer, row in ((_json(path) or {}).get("layers", {})).items():
            view.ncu_layers.setdefault(layer, {}).update(row)
    view.ncu_kernels = (_json(ncu / "ncu.kernels.json") or {}).get("layers", {})
    view.peaks = (_json(gpu / "gpu_peaks.json") or {}).get("peaks", {})
    if view.ncu_layers and view.peaks:
        roof = GpuRoof(view.peaks["matmul_fp32_tflops"], view.peaks["d2d_copy_gbps_read_plus_write"])
        view.roofline = roofline_rows(view.ncu_layers, roof)
    if not (view.layers or view.graph or view.nvml or view.ncu_layers):
        return None
    return view


def gpu_findings(view: GpuView) -> list[Finding]:
    out: list[Finding] = []
    k, g = view.kineto, view.graph
    if k.get("gpu_idle_share") is not None and k["gpu_idle_share"] > LAUNCH_BOUND_IDLE:
        evidence = (
            f"forward: {k['forward_cpu_us'] / 1e3:.2f} ms of CPU launching {k['kernels_per_forward']:.0f} kernels "
            f"against {k['gpu_busy_us'] / 1e3:.3f} ms of GPU busy time (torch.profiler pass)"
        )
        if g.get("graph_ms_p50"):
            evidence += (
                f"; as one CUDA graph the forward takes {g['graph_ms_p50']:.2f} ms against {g['eager_ms_p50']:.2f} ms "
                f"eager ({g['launch_overhead_share']:.0%} of the eager forward is launch overhead)"
            )
        out.append(
            Finding(
                f"launch-bound: the GPU idles {k['gpu_idle_share']:.0%} of the forward",
                evidence + "; CUDA graphs, torch.compile(mode='reduce-overhead') or a larger batch fill it",
                "gpu",
                k["gpu_idle_share"],
            )
        )
    classes = {c.cls: c for c in view.kernel_classes()}
    if (t := classes.get(TRANSPOSE)) and t.share >= TRANSPOSE_SHARE:
        top = "; ".join(f"{ns / 1e3:.0f} us {name.split('<')[0].split('::')[-1]}" for name, ns in t.top[:2])
        out.append(
            Finding(
                f"layout transposes take {t.share:.0%} of the GPU time",
                f"{t.gpu_ns / 1e3:.0f} us per forward in {t.kernels:.0f} cuDNN NCHW<->NHWC kernels ({top}); "
                "the model runs NCHW: --channels-last removes them",
                "gpu",
                t.share,
            )
        )
    counted = tensor_core_by_counter(k for ks in view.ncu_kernels.values() for k in ks)
    if counted["conv_gemm_no_tensor_ns"] > 0:
        total = counted["conv_gemm_no_tensor_ns"] + counted["conv_gemm_tensor_ns"]
        out.append(
            Finding(
                "convolutions off the tensor cores (measured)",
                f"{counted['conv_gemm_no_tensor_ns'] / 1e3:.0f} us of {total / 1e3:.0f} us of conv/GEMM kernel time "
                "had no tensor-pipe instruction (ncu sm__inst_executed_pipe_tensor)",
                "gpu",
                counted["conv_gemm_no_tensor_ns"] / total,
            )
        )
    elif (c := classes.get(CONV_FP32)) and c.gpu_ns > 0:
        evidence = f"{c.gpu_ns / 1e3:.0f} us per forward ({c.share:.0%} of GPU time): " + "; ".join(
            f"{ns / 1e3:.0f} us {name[:60]}" for name, ns in c.top[:2]
        )
        if view.ncu_kernels:
            evidence += (
                "; ncu counted tensor-pipe instructions in every conv/GEMM kernel, these included, "
                "so the counter does not confirm it"
            )
        out.append(
            Finding("convolutions on the CUDA cores, not the tensor cores (by kernel name)", evidence, "gpu", c.share)
        )
    memory = [r for r in view.roofline if r.bound.startswith("memory") and (r.roof_share or 0) >= MEMORY_ROOF_SHARE]
    if memory:
        out.append(
            Finding(
                f"memory-bound by measured DRAM traffic: {', '.join(r.layer for r in memory)}",
                "; ".join(
                    f"{r.layer} {r.achieved_gbps:.0f} GB/s ({r.roof_share:.0%} of the copy peak)" for r in memory
                ),
                "gpu",
                sum(r.kernel_ns for r in memory) / max(1.0, sum(r.kernel_ns for r in view.roofline)),
            )
        )
    elif view.roofline:
        best = max(view.roofline, key=lambda r: r.roof_share or 0.0)
        out.append(
            Finding(
                "no layer reaches half of a roof: the kernels are too small to fill the GPU",
                f"best {best.layer}: {(best.roof_share or 0):.0%} of its roof ({best.bound}); DRAM bytes from "
                f"{best.bytes_source}, FLOPs from ncu SASS counts",
                "gpu",
                0.0,
            )
        )
    return out
