"""The GPU view of a run directory (collectors/gpu/ outputs) and the GPU findings, each with its evidence.

Read: passes/gpu/gpu_kineto.{metrics,kernels}.json and its run.json summary (per-layer GPU time by
launch correlation, the forward's CPU time, GPU busy time and idle share), cuda_graph's summary
(eager against graph replay), nvml's summary (energy), passes/ncu/ncu.{metrics,kernels}.json and
passes/ncu_range/ncu_range.metrics.json (Nsight Compute per layer), passes/gpu/gpu_peaks.json.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hwprof.analysis.finding import Finding
from hwprof.analysis.gpu.kernels import TRANSPOSE, class_shares, launch_fill, tensor_core_by_counter
from hwprof.analysis.gpu.roofline import MEMORY, GpuRoof, GpuRoofRow, layer_index, roofline_rows
from hwprof.schema.codec import need
from hwprof.schema.gpu_files import KinetoKernel, NcuKernel
from hwprof.schema.ncu_tensor import TENSOR_MATH_FIX
from hwprof.schema.summaries_gpu import CudaGraphSummary, GpuKinetoSummary, NvmlSummary

if TYPE_CHECKING:
    from collections.abc import Iterable

    from hwprof.analysis.layers.stats import LayerStat
    from hwprof.rundir.reader import RunData

LAUNCH_BOUND_IDLE = 0.5
"""A forward whose GPU idles more than this share of its window is launch-bound."""
TRANSPOSE_SHARE = 0.05
MEMORY_ROOF_SHARE = 0.5
"""A layer that moves DRAM bytes at this share of the bandwidth roof or more is memory-bound by measurement."""
SMALL_LAUNCH_SHARE = 0.5
"""Kernels are called too small to fill the GPU only when at least this share of the kernel time is in
launches of under one wave (ncu's launch__waves_per_multiprocessor), the figure printed with it."""


@dataclass
class GpuView:
    kineto: GpuKinetoSummary = field(default_factory=GpuKinetoSummary)
    """gpu_kineto's run.json summary."""
    layers: dict[str, dict[str, float]] = field(default_factory=dict)
    kernels: dict[str, list[KinetoKernel]] = field(default_factory=dict)
    """gpu_kineto.kernels.json: each layer's kernels, per forward."""
    graph: CudaGraphSummary = field(default_factory=CudaGraphSummary)
    nvml: NvmlSummary = field(default_factory=NvmlSummary)
    ncu_layers: dict[str, dict[str, float]] = field(default_factory=dict)
    ncu_kernels: dict[str, list[NcuKernel]] = field(default_factory=dict)
    peaks: dict[str, float] = field(default_factory=dict)
    roofline: list[GpuRoofRow] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)
    """Layer name ("model.14") -> its type, from the run's layer table: findings name layers as the tables do."""

    def label(self, layer: str) -> str:
        """ "model.14" -> "14 Upsample", as the tables name a layer (index, then type)."""
        kind = self.types.get(layer)
        return f"{layer_index(layer)} {kind}" if kind else layer

    def kernel_classes(self) -> list[Any]:
        rows = [(k.name, k.gpu_us * 1e3, k.calls) for ks in self.kernels.values() for k in ks]
        total = sum(ns for _, ns, _ in rows)
        return class_shares(rows, total)


def load_gpu_view(data: RunData) -> GpuView | None:
    view = GpuView()
    if (m := data.pass_json("gpu", "gpu_kineto.metrics.json")) is not None:
        view.layers = m.get("layers", {})
        view.kernels = data.gpu_kernels
        view.kineto = data.summary(GpuKinetoSummary)
    view.graph = data.summary(CudaGraphSummary)
    view.nvml = data.summary(NvmlSummary)
    for pass_name in ("ncu", "ncu_range"):
        for layer, row in ((data.pass_json(pass_name, f"{pass_name}.metrics.json") or {}).get("layers", {})).items():
            view.ncu_layers.setdefault(layer, {}).update(row)
    view.ncu_kernels = data.ncu_kernels
    view.peaks = (data.pass_json("gpu", "gpu_peaks.json") or {}).get("peaks", {})
    if view.ncu_layers and view.peaks:
        roof = GpuRoof(view.peaks["matmul_fp32_tflops"], view.peaks["d2d_copy_gbps_read_plus_write"])
        warm_ns = {layer: m["gpu_us"] * 1e3 for layer, m in view.layers.items() if m.get("gpu_us")}
        view.roofline = roofline_rows(view.ncu_layers, roof, warm_ns)
    if not (view.layers or view.graph or view.nvml or view.ncu_layers):
        return None
    return view


@dataclass
class GpuLayerRow:
    """A top-level layer of a GPU run: its GPU time per forward beside its host (launch) time (stat.time_ms)."""

    stat: LayerStat
    gpu_ms: float | None
    """Kernels launched from the layer's range, per forward; None: it launched none in the gpu pass."""
    share: float | None
    """Of the forward's GPU kernel time (every layer's and what was launched outside them)."""
    kernels: float | None


@dataclass
class GpuLayerRanking:
    rows: list[GpuLayerRow]
    """Largest GPU time first; layers with no GPU time last, by host time."""
    forward_gpu_ms: float
    outside_gpu_ms: float | None
    """Launched between the layer ranges (attribution's "(outside layers)" row), per forward."""

    @property
    def without_gpu(self) -> list[GpuLayerRow]:
        return [r for r in self.rows if r.gpu_ms is None]


def gpu_ranked_layers(layers: Iterable[LayerStat], view: GpuView) -> GpuLayerRanking:
    """Why by GPU time: on a launch-bound forward the host time of a layer is the time spent launching its
    kernels, so a ranking by it ranks the launching; the GPU pass's kernels, charged to the layer whose range
    launched them, rank what the device spent on each layer."""
    total_us = sum(m.get("gpu_us", 0.0) for m in view.layers.values())
    rows = []
    for stat in layers:
        if stat.depth != 1:
            continue
        m = view.layers.get(stat.name)
        if not m or not m.get("kernels"):
            rows.append(GpuLayerRow(stat, None, None, None))
            continue
        gpu_ms = m["gpu_us"] / 1e3
        rows.append(GpuLayerRow(stat, gpu_ms, gpu_ms * 1e3 / total_us if total_us > 0 else None, m["kernels"]))
    rows.sort(key=lambda r: (r.gpu_ms is None, -(r.gpu_ms or 0.0), -(r.stat.time_ms or 0.0), r.stat.index))
    named = {r.stat.name for r in rows}
    outside = [m["gpu_us"] for name, m in view.layers.items() if name not in named and m.get("gpu_us")]
    return GpuLayerRanking(rows, total_us / 1e3, sum(outside) / 1e3 if outside else None)


def gpu_findings(view: GpuView) -> list[Finding]:
    out: list[Finding] = []
    k, g = view.kineto, view.graph
    if k.gpu_idle_share is not None and k.gpu_idle_share > LAUNCH_BOUND_IDLE:
        evidence = (
            f"forward: {need(k.forward_cpu_us) / 1e3:.2f} ms of CPU launching {need(k.kernels_per_forward):.0f} "
            f"kernels against {need(k.gpu_busy_us) / 1e3:.3f} ms of GPU busy time (torch.profiler pass)"
        )
        if g.graph_ms_p50:
            evidence += (
                f"; as one CUDA graph the forward takes {g.graph_ms_p50:.2f} ms against {g.eager_ms_p50:.2f} ms "
                f"eager ({g.launch_overhead_share:.0%} of the eager forward is launch overhead)"
            )
        out.append(
            Finding(
                f"launch-bound: the GPU idles {k.gpu_idle_share:.0%} of the forward",
                evidence
                + (
                    ""
                    if g.graph_ms_p50
                    else "; not measured in this run: a CUDA graph (the timing pass's cuda_graph collector), "
                    "torch.compile(mode='reduce-overhead') or a larger batch, the ways to fill it"
                ),
                "gpu",
                k.gpu_idle_share,
                topic="launch-bound",
            )
        )
    classes = {c.cls: c for c in view.kernel_classes()}
    if (t := classes.get(TRANSPOSE)) and t.share >= TRANSPOSE_SHARE:
        top = "; ".join(f"{ns / 1e3:.0f} us {name.split('<')[0].split('::')[-1]}" for name, ns in t.top[:2])
        out.append(
            Finding(
                f"layout transposes take {t.share:.0%} of the GPU time",
                f"{t.gpu_ns / 1e3:.0f} us per forward in {t.kernels:.0f} cuDNN NCHW<->NHWC kernels ({top}); "
                "whether --channels-last removes them is not measured in this run (a --channels-last run measures it)",
                "gpu",
                t.share,
                topic="layout-transposes",
            )
        )
    out += _tensor_core_findings(view) + _roof_findings(view)
    return out


def _tensor_core_findings(view: GpuView) -> list[Finding]:
    """Only from ncu's tensor-core math counters; kernel names alone (the class table) make no finding."""
    counted = tensor_core_by_counter((k for ks in view.ncu_kernels.values() for k in ks), TENSOR_MATH_FIX)
    off = counted.no_tensor_ns or 0.0
    if not off:
        return []
    total = off + (counted.tensor_ns or 0.0)
    return [
        Finding(
            "convolutions off the tensor cores (measured)",
            f"{off / 1e3:.0f} us of {total / 1e3:.0f} us of conv/GEMM kernel time had no tensor-core math "
            "instruction (ncu sm__inst_executed_pipe_tensor_op_hmma/imma/gmma)",
            "gpu",
            off / total,
            topic="no-tensor-cores",
        )
    ]


def _roof_findings(view: GpuView) -> list[Finding]:
    """Each layer at its timed point (warm caches where the forward's kernel time is known, else cold)."""
    timed = [(r, p) for r in view.roofline if (p := r.timed) is not None and p.ns]
    total_ns = max(1.0, sum(p.ns or 0.0 for _, p in timed))
    memory = [(r, p) for r, p in timed if p.bound.startswith(MEMORY) and (p.roof_share or 0) >= MEMORY_ROOF_SHARE]
    if memory:
        return [
            Finding(
                f"memory-bound by measured DRAM traffic: {', '.join(view.label(r.layer) for r, _ in memory)}",
                "; ".join(
                    f"{view.label(r.layer)} {p.achieved_gbps:.0f} GB/s "
                    f"({p.roof_share:.0%} of the copy peak, {p.cache} caches)"
                    for r, p in memory
                ),
                "gpu",
                sum(p.ns or 0.0 for _, p in memory) / total_ns,
            )
        ]
    if not timed:
        return []
    best, point = max(timed, key=lambda rp: rp[1].roof_share or 0.0)
    evidence = (
        f"best {view.label(best.layer)}: {(point.roof_share or 0):.0%} of its roof ({point.bound}) "
        f"with {point.cache} caches "
        f"(DRAM bytes: {point.bytes_source}; time: {point.time_source}; FLOPs: ncu SASS FP32)"
    )
    fill = launch_fill(k for ks in view.ncu_kernels.values() for k in ks)
    if fill is None:
        evidence += (
            "; launch sizes and occupancy were not recorded (ncu launch__grid_size, "
            "launch__waves_per_multiprocessor, sm__warps_active), so no cause is given"
        )
        return [Finding("no layer reaches half of a roof", evidence, "gpu", 0.0)]
    occupancy = ""
    if fill.achieved_occupancy_pct is not None and fill.theoretical_occupancy_pct is not None:
        occupancy = (
            f"; achieved occupancy {fill.achieved_occupancy_pct:.0f}% of the warps an SM holds, against "
            f"{fill.theoretical_occupancy_pct:.0f}% theoretical"
        )
    evidence += (
        f"; of the kernel time of {fill.kernels} kernels (ncu kernel replay), {fill.under_one_wave:.0%} is in "
        f"launches of under one wave and {fill.sub_sm_grid:.0%} in grids of fewer blocks than the "
        f"{fill.sm_count:.0f} SMs{occupancy}"
    )
    small = fill.under_one_wave >= SMALL_LAUNCH_SHARE
    title = "no layer reaches half of a roof" + (
        ": most kernel time is in launches too small to fill the GPU" if small else ""
    )
    return [
        Finding(title, evidence, "gpu", fill.under_one_wave if small else 0.0, topic="small-launches" if small else "")
    ]
