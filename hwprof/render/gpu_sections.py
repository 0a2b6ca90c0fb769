"""The GPU sections of the report: the forward on the GPU (CPU time, GPU busy, idle share, CUDA graph,
energy), per-layer GPU time with its kernels, and the Nsight Compute roofline per layer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwprof.analysis.gpu_roofline import MARKS
from hwprof.cppnames import kernel_label
from hwprof.render.tables import MISSING, Col, TableSpec

if TYPE_CHECKING:
    from hwprof.analysis.run_analysis import Analysis

KERNEL_NAME = 60


def _f(v: float | None, fmt: str = "{:.1f}") -> str:
    return MISSING if v is None else fmt.format(v)


def gpu_forward_spec(a: Analysis) -> TableSpec | None:
    g = a.gpu
    if g is None:
        return None
    k, graph, nvml = g.kineto, g.graph, g.nvml
    rows = []
    if k:
        rows += [
            ["device", str(k.get("device", ""))],
            [
                "forward CPU time (profiled)",
                f"{k['forward_cpu_us'] / 1e3:.2f} ms, {k['kernels_per_forward']:.0f} kernels",
            ],
            ["GPU busy (union of kernels)", f"{k['gpu_busy_us'] / 1e3:.3f} ms"],
            ["GPU idle share", f"{k['gpu_idle_share']:.1%} of the forward's window"],
            ["layer sums / GPU busy", _f(k.get("layer_sum_over_busy"), "{:.4f}")],
        ]
        clock = k.get("clock", {})
        if clock.get("offset_ns") is not None:
            rows.append(["GPU clock alignment", f"error {clock['error_ns'] / 1e3:.1f} us ({clock['method']})"])
    if graph.get("eager_ms_p50") is not None:
        rows.append(["eager forward (synchronised)", f"{graph['eager_ms_p50']:.3f} ms"])
    if graph.get("graph_ms_p50") is not None:
        rows.append(
            [
                "CUDA graph forward",
                f"{graph['graph_ms_p50']:.3f} ms: launch overhead {graph['launch_overhead_share']:.0%}",
            ]
        )
    if nvml.get("j_per_iteration") is not None:
        stage = ", ".join(f"{s} {j:.3f} J" for s, j in nvml.get("stage_energy_j", {}).items())
        rows.append(["energy per iteration (NVML)", f"{nvml['j_per_iteration']:.3f} J ({stage})"])
        rows.append(["energy method", str(nvml.get("energy_method", ""))])
    elif nvml.get("energy_unavailable"):
        rows.append(["energy per iteration (NVML)", f"unavailable: {nvml['energy_unavailable']}"])
    notes = ["GPU kernel times are CUPTI's, on Kineto's clock; the offset to the run's clock is measured per forward"]
    return TableSpec("forward on the GPU", [Col("", "left"), Col("value", "left")], rows, notes)


def gpu_layers_spec(a: Analysis, top: int) -> TableSpec | None:
    g = a.gpu
    if g is None or not g.layers:
        return None
    ranked = sorted(g.layers.items(), key=lambda kv: -kv[1].get("gpu_us", 0.0))[:top]
    rows = []
    for layer, m in ranked:
        kernels = g.kernels.get(layer, [])[:2]
        names = "; ".join(f"{k['gpu_us']:.0f} us {kernel_label(k['name'])[:KERNEL_NAME]}" for k in kernels)
        rows.append(
            [layer, f"{m['gpu_us']:.1f}", f"{m['kernels']:.0f}", f"{m['cpu_us']:.0f}", f"{m['launch_us']:.0f}", names]
        )
    cols = [
        Col("layer", "left"),
        Col("GPU us"),
        Col("kernels"),
        Col("CPU us"),
        Col("launch us", priority=2),
        Col("largest kernels", "left", priority=1, max_width=90),
    ]
    notes = ["kernels charged to the layer whose range launched them (launch correlation), per forward"]
    return TableSpec("layers by GPU time", cols, rows, notes)


def gpu_roofline_spec(a: Analysis) -> TableSpec | None:
    """One row per layer and cache state: warm (app-range bytes, the real forward's kernel time) and cold
    (kernel-replay bytes and time); bytes and time of a row always come from the same caches."""
    g = a.gpu
    if g is None or not g.roofline:
        return None
    rows = [
        [
            r.layer,
            p.cache,
            _f(p.bytes / 1e6, "{:.2f}"),
            _f(None if p.ns is None else p.ns / 1e3),
            _f(r.flops / 1e9, "{:.3f}"),
            _f(p.intensity, "{:.2f}"),
            _f(p.achieved_gbps, "{:.0f}"),
            p.bound,
            _f(None if p.roof_share is None else 100 * p.roof_share, "{:.1f}%"),
        ]
        for r in g.roofline
        for p in r.points
    ]
    cols = [
        Col("layer", "left"),
        Col("cache", "left"),
        Col("DRAM MB"),
        Col("us"),
        Col("FP32 GFLOP", priority=1),
        Col("FLOP/B"),
        Col("GB/s"),
        Col("bound", "left"),
        Col("of roof"),
    ]
    sources = sorted({f"{p.cache}: bytes {p.bytes_source}, time {p.time_source}" for r in g.roofline for p in r.points})
    notes = [
        *sources,
        f"FLOPs: ncu SASS FP32 (2 FFMA + FADD + FMUL); {MARKS}",
        f"roofs: {g.peaks['matmul_fp32_tflops']:.1f} TFLOP/s FP32 matmul, "
        f"{g.peaks['d2d_copy_gbps_read_plus_write']:.0f} GB/s device copy (measured on this GPU)",
    ]
    return TableSpec("GPU roofline per layer (Nsight Compute)", cols, rows, notes)
