"""The GPU sections of the report: the forward on the GPU (CPU time, GPU busy, idle share, CUDA graph,
energy), per-layer GPU time with its kernels, and the Nsight Compute roofline per layer.

Layout at 80 and 100 columns: a layer is named as the CPU tables name it, index ("#") then type, in two
columns that are never dropped nor cut; long text (kernel names, the forward's values) wraps, and the
least important columns are dropped with a note (render/tables.py fit), so a row stays identifiable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hwprof.analysis.gpu.roofline import MARKS, layer_index, layer_order
from hwprof.analysis.gpu.view import gpu_ranked_layers
from hwprof.core.cppnames import kernel_label
from hwprof.render.columns import Column, Ranked, build, with_cum
from hwprof.render.fmt import ms, pct, sig
from hwprof.render.tables import MISSING, Col, TableSpec
from hwprof.schema.codec import need
from hwprof.schema.summaries_gpu import CudaGraphSummary, GpuKinetoSummary, KinetoClock, NvmlSummary

if TYPE_CHECKING:
    from hwprof.analysis.gpu.roofline import GpuRoofRow
    from hwprof.analysis.gpu.view import GpuLayerRanking, GpuLayerRow
    from hwprof.analysis.layers.stats import LayerReport
    from hwprof.analysis.run_analysis import Analysis

KERNEL_NAME = 36
KERNEL_FIT = 30
"""The width a kernel-name column is counted at when a table is fitted to the terminal (it wraps below it)."""
LAYER_COLS = [Col("#"), Col("type", "left")]


def short_kernel(name: str, width: int = KERNEL_NAME) -> str:
    label = kernel_label(name)
    return label if len(label) <= width else label[: width - 1] + "…"


def layer_cells(name: str, types: Mapping[str, str]) -> list[str]:
    """A layer's "#" and type cells ("model.105" -> "105", "Detect"), as the CPU tables name layers."""
    return [layer_index(name), types.get(name, MISSING)]


def gpu_time_cols(kernels_header: str) -> list[Col]:
    """The columns of a per-layer GPU time table (report and gpu-import): the kernels' column wraps and goes first."""
    return [
        *LAYER_COLS,
        Col("GPU us"),
        Col("kernels"),
        Col("CPU us", priority=2),
        Col("launch us"),
        Col(kernels_header, "left", priority=1, max_width=KERNEL_FIT, wrap=True),
    ]


def _types(a: Analysis) -> dict[str, str]:
    return {r.name: r.type for r in a.layers.layers}


def _f(v: float | None, fmt: str = "{:.1f}") -> str:
    return MISSING if v is None else fmt.format(v)


def gpu_forward_spec(a: Analysis) -> TableSpec | None:
    g = a.gpu
    if g is None:
        return None
    k, graph, nvml = g.kineto, g.graph, g.nvml
    clock = k.clock or KinetoClock()
    same_clock = clock.offset_ns is not None and clock.error_ns is None
    # an imported run: its clock is the Kineto trace's own, so no offset was measured (none is needed)
    rows = _kineto_rows(k, clock, same_clock) if k else []
    rows += _graph_rows(graph) + _energy_rows(nvml)
    notes = [
        "GPU kernel times are CUPTI's, on the Kineto trace's clock, which is this run's clock"
        if same_clock
        else "GPU kernel times are CUPTI's, on Kineto's clock; the offset to the run's clock is measured per forward"
    ]
    if nvml.trace:
        notes.append(str(nvml.trace))
    model = a.doc.config.model
    for w in nvml.bench_windows or []:
        if "j_per_inference" in w and w["model"] == model:
            rec = w.get("recorded_j_per_inference")
            rows.append(
                [
                    f"energy per inference (NVML), recorded benchmark {w['precision']}",
                    f"{w['j_per_inference']:.3f} J at {w['power_w']:.0f} W"
                    + ("" if rec is None else f" (the recording's own figure: {rec:.3f} J)"),
                ]
            )
            if w["method"] not in notes:
                notes.append(w["method"])
    cols = [Col("", "left", wrap=True, max_width=24), Col("value", "left", wrap=True, max_width=40)]
    return TableSpec("forward on the GPU", cols, rows, notes)


def _kineto_rows(k: GpuKinetoSummary, clock: KinetoClock, same_clock: bool) -> list[list[str]]:
    """The profiled forward: CPU time, GPU busy and idle, and how the GPU clock was aligned."""
    rows = [
        ["device", str(k.device if k.device is not None else "")],
        [
            "forward CPU time (profiled)",
            f"{need(k.forward_cpu_us) / 1e3:.2f} ms, {need(k.kernels_per_forward):.0f} kernels",
        ],
        ["GPU busy (union of kernels)", f"{need(k.gpu_busy_us) / 1e3:.3f} ms"],
        ["GPU idle share", f"{need(k.gpu_idle_share):.1%} of the forward's window"],
        ["layer sums / GPU busy", _f(k.layer_sum_over_busy, "{:.4f}")],
    ]
    if same_clock:
        rows.append(["GPU clock alignment", f"none needed: {clock.method}"])
    elif clock.offset_ns is not None:
        rows.append(["GPU clock alignment", f"error {need(clock.error_ns) / 1e3:.1f} us ({clock.method})"])
    return rows


def _graph_rows(graph: CudaGraphSummary) -> list[list[str]]:
    rows = []
    if graph.eager_ms_p50 is not None:
        rows.append(["eager forward (synchronised)", f"{graph.eager_ms_p50:.3f} ms"])
    if graph.graph_ms_p50 is not None:
        rows.append(
            [
                "CUDA graph forward",
                f"{graph.graph_ms_p50:.3f} ms: launch overhead {need(graph.launch_overhead_share):.0%}",
            ]
        )
    return rows


def _energy_rows(nvml: NvmlSummary) -> list[list[str]]:
    """NVML's energy per iteration, or why there is none."""
    if nvml.j_per_iteration is not None:
        stage = ", ".join(f"{s} {j:.3f} J" for s, j in (nvml.stage_energy_j or {}).items())
        return [
            ["energy per iteration (NVML)", f"{nvml.j_per_iteration:.3f} J ({stage})"],
            ["energy method", str(nvml.energy_method if nvml.energy_method is not None else "")],
        ]
    if nvml.energy_unavailable:
        return [["energy per iteration (NVML)", f"unavailable: {nvml.energy_unavailable}"]]
    return []


def gpu_layers_spec(a: Analysis, top: int) -> TableSpec | None:
    g = a.gpu
    if g is None or not g.layers:
        return None
    ranked = sorted(g.layers.items(), key=lambda kv: -kv[1].get("gpu_us", 0.0))[:top]
    rows = []
    types = _types(a)
    for layer, m in ranked:
        kernels = g.kernels.get(layer, [])[:2]
        names = "\n".join(f"{k.gpu_us:.0f} {short_kernel(k.name)}" for k in kernels)
        rows.append(
            [
                *layer_cells(layer, types),
                f"{m['gpu_us']:.1f}",
                f"{m['kernels']:.0f}",
                f"{m['cpu_us']:.0f}",
                f"{m['launch_us']:.0f}",
                names,
            ]
        )
    cols = gpu_time_cols("largest kernels (us)")
    notes = ["kernels charged to the layer whose range launched them (launch correlation), per forward"]
    return TableSpec("layers by GPU time", cols, rows, notes)


NO_GPU_TIME = "none"
"""The GPU ms cell of a layer whose range launched no kernel in the gpu pass (measured: nothing, not a gap)."""


@dataclass(frozen=True)
class _GpuLayerTable:
    """What decides the GPU layer table's columns: the CPU layer report and the whole GPU ranking."""

    rep: LayerReport
    rank: GpuLayerRanking


def _gpu_flops(t: _GpuLayerTable) -> bool:
    return t.rep.has("flops")


GPU_LAYER_COLUMNS: list[Column[_GpuLayerTable, Ranked[GpuLayerRow]]] = [
    Column(Col("#"), lambda r: str(r.item.stat.index)),
    Column(Col("type", "left", max_width=14), lambda r: r.item.stat.type),
    Column(Col("GPU ms"), lambda r: NO_GPU_TIME if r.item.gpu_ms is None else ms(r.item.gpu_ms)),
    Column(Col("GPU share"), lambda r: pct(r.item.share)),
    Column(Col("cum", priority=6), lambda r: MISSING if r.item.share is None else pct(r.cum)),
    Column(Col("host (launch) ms"), lambda r: ms(r.item.stat.time_ms)),
    Column(Col("kernels", priority=3), lambda r: _f(r.item.kernels, "{:.0f}")),
    Column(
        Col("GFLOPs", priority=7),
        lambda r: sig(r.item.stat.flops / 1e9 if r.item.stat.flops is not None else None),
        _gpu_flops,
    ),
    Column(Col("AI", priority=4), lambda r: sig(r.item.stat.intensity), _gpu_flops),
    Column(
        Col("out shape", "left", priority=9, max_width=16),
        lambda r: r.item.stat.out_shape,
        lambda t: any(r.stat.out_shape for r in t.rank.rows),
    ),
]


def gpu_main_layers_spec(a: Analysis, top: int) -> TableSpec | None:
    """The main layer table of a GPU run: ranked by GPU time per forward, the host (launch) time beside it.
    None where the run has no GPU time per layer (a CPU run; a GPU run whose gpu pass did not run): the
    table by host time stands."""
    g = a.gpu
    if g is None or not g.layers or not a.layers.layers:
        return None
    rank = gpu_ranked_layers(a.layers.layers, g)
    cols, rows = build(GPU_LAYER_COLUMNS, _GpuLayerTable(a.layers, rank), with_cum(rank.rows[:top], lambda r: r.share))
    forwards = g.kineto.forwards
    outside = f"; {ms(rank.outside_gpu_ms)} ms of it launched outside every layer" if rank.outside_gpu_ms else ""
    notes = [
        f"ranked by GPU ms per forward: the kernels charged to the layer whose range launched them (launch "
        f"correlation, gpu pass{f', mean of {forwards} forwards' if forwards else ''}); GPU share = of the "
        f"forward's GPU kernel time, {ms(rank.forward_gpu_ms)} ms{outside}",
        f"host (launch) ms: {a.layers.time_note}",
    ]
    if none := rank.without_gpu:
        names = ", ".join(f"{r.stat.index} {r.stat.type}" for r in none)
        notes.append(
            f"{len(none)} layer{'s' if len(none) > 1 else ''} launched no GPU kernel in the gpu pass (GPU ms "
            f"'{NO_GPU_TIME}'), ranked last by host time: {names}"
        )
    title = f"top {len(rows)} layers by GPU time (of {len(rank.rows)})"
    return TableSpec(title, cols, rows, notes, key="layers")


def gpu_roofline_spec(a: Analysis) -> TableSpec | None:
    """One row per layer and cache state: warm (app-range bytes, the real forward's kernel time) and cold
    (kernel-replay bytes and time); bytes and time of a row always come from the same caches."""
    g = a.gpu
    if g is None or not g.roofline:
        return None
    return roofline_spec(g.roofline, _types(a), g.peaks)


def _bound_cell(bound: str, notes: dict[str, str]) -> str:
    """The bound's first words ("memory"), marked where the full text qualifies it; the text goes to a note."""
    short = bound.split(" (")[0]
    if short == bound:
        return bound
    notes.setdefault(bound, f"{short}+: {bound}")
    return short + "+"


def roofline_spec(rows_in: Sequence[GpuRoofRow], types: Mapping[str, str], peaks: Mapping[str, float]) -> TableSpec:
    """The per-layer GPU roofline (report and gpu-import)."""
    bound_notes: dict[str, str] = {}
    rows = [
        [
            *layer_cells(r.layer, types),
            pt.cache,
            _f(pt.bytes / 1e6, "{:.2f}"),
            _f(None if pt.ns is None else pt.ns / 1e3),
            _f(r.flops / 1e9, "{:.3f}"),
            _f(pt.intensity, "{:.2f}"),
            _f(pt.achieved_gbps, "{:.0f}"),
            _bound_cell(pt.bound, bound_notes),
            _f(None if pt.roof_share is None else 100 * pt.roof_share, "{:.1f}%"),
        ]
        for r in sorted(rows_in, key=lambda r: layer_order(r.layer))
        for pt in r.points
    ]
    cols = [
        *LAYER_COLS,
        Col("cache", "left"),
        Col("DRAM MB"),
        Col("us"),
        Col("GFLOP", priority=3),
        Col("FLOP/B", priority=2),
        Col("GB/s", priority=1),
        Col("bound", "left"),
        Col("of roof"),
    ]
    sources = sorted(
        {f"{pt.cache}: bytes {pt.bytes_source}, time {pt.time_source}" for r in rows_in for pt in r.points}
    )
    notes = [
        *sources,
        f"GFLOP: ncu SASS FP32 (2 FFMA + FADD + FMUL); {MARKS}",
        *bound_notes.values(),
        f"roofs: {peaks['matmul_fp32_tflops']:.1f} TFLOP/s FP32 matmul, "
        f"{peaks['d2d_copy_gbps_read_plus_write']:.0f} GB/s device copy (measured on this GPU)",
    ]
    return TableSpec("GPU roofline per layer (Nsight Compute)", cols, rows, notes)
