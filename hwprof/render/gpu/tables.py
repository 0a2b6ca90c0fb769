"""Rich tables of the GPU views: per-layer GPU time by launch correlation, kernel classes, the ncu
per-layer counters and roofline, NVML energy. They read hwprof.gpu.importer's summaries as records
(hwprof.schema.gpu_import)."""

from __future__ import annotations

from rich.console import Console

from hwprof.analysis.gpu.roofline import GpuRoofRow, RoofPoint, layer_order
from hwprof.render.gpu.sections import LAYER_COLS, gpu_time_cols, layer_cells, roofline_spec, short_kernel
from hwprof.render.tables import MISSING, Col, TableSpec, spec_renderables
from hwprof.schema.codec import need
from hwprof.schema.gpu_import import (
    KinetoImport,
    LaunchFillDoc,
    NcuImport,
    NvmlImport,
    RoofPointDoc,
    RoofRowDoc,
    TensorCoreDoc,
)

MORE = "see hwprof gpu-import --format json"
CLASS_KERNEL = 26
"""Kernel names in the class table: its class column is wide, so they are cut shorter than per layer."""


def print_kineto(console: Console, s: KinetoImport, title: str, top: int = 5) -> None:
    console.print(
        f"[bold]{title}[/] ({s.device or ''}, {s.forwards} forwards): forward CPU {s.cpu_us / 1e3:.2f} ms, "
        f"GPU busy {s.gpu_busy_us / 1e3:.3f} ms (union of kernel intervals), {s.kernels:.0f} kernels, "
        f"GPU idle share {s.idle_share:.1%} of the forward's window; "
        f"layer sums / busy = {need(s.layer_sum_over_busy):.4f}",
        highlight=False,
    )
    rows = {r.layer: r for r in s.layers}
    types = {r.layer: r.type for r in s.layers}
    cols = gpu_time_cols("top kernels (us)")
    table_rows = []
    for key in s.top_layers[:top]:
        r = rows[key]
        table_rows.append(
            [
                *layer_cells(r.layer, types),
                f"{r.gpu_us:.1f}",
                f"{r.kernels:.0f}",
                f"{r.cpu_us:.0f}",
                f"{r.launch_us:.0f}",
                "\n".join(f"{k.gpu_us:.0f} {short_kernel(k.name)}" for k in r.top_kernels),
            ]
        )
    title = f"top {top} layers by GPU time (per forward; kernels charged by launch correlation)"
    _print(console, TableSpec(title, cols, table_rows, more=MORE))
    classes = [
        [
            c.cls,
            f"{c.gpu_us:.1f}",
            f"{c.kernels:.0f}",
            f"{c.share:.1%}",
            "\n".join(f"{ns / 1e3:.0f} {short_kernel(n, CLASS_KERNEL)}" for n, ns in c.top[:2]),
        ]
        for c in s.kernel_classes
    ]
    class_cols = [
        Col("class", "left", wrap=True, max_width=20),
        Col("GPU us"),
        Col("kernels"),
        Col("share"),
        Col("largest (us)", "left", priority=1, max_width=CLASS_KERNEL, wrap=True),
    ]
    _print(console, TableSpec("GPU time by kernel class (by kernel name)", class_cols, classes, more=MORE))


def _print(console: Console, spec: TableSpec) -> None:
    for part in spec_renderables(spec, console):
        console.print(part)


def print_ncu(console: Console, s: NcuImport) -> None:
    types = s.types
    rows = [_ncu_row(layer, m, types) for layer, m in sorted(s.layers.items(), key=lambda kv: layer_order(kv[0]))]
    title = "Nsight Compute per layer (kernel replay: duration, FP32 FLOPs, cold DRAM; app-range: warm DRAM)"
    notes = [
        "TC kinst = tensor-core math (ncu HMMA + IMMA + GMMA warp instructions); "
        "<1 wave % = kernel time in launches of under one wave"
    ]
    _print(console, TableSpec(title, _ncu_cols(), rows, notes, more=MORE))
    _print_tensor_and_fill(console, s.tensor_cores, s.launch_fill)
    if s.roofline is None:
        return
    roof_rows = [_roof_row(r) for r in s.roofline]
    spec = roofline_spec(roof_rows, types, s.peaks or {})
    spec.more = MORE
    _print(console, spec)
    if s.warm_time:
        console.print(s.warm_time, highlight=False)


def _ncu_cols() -> list[Col]:
    return [
        *LAYER_COLS,
        Col("kernels", priority=4),
        Col("replay us"),
        Col("cold MB"),
        Col("warm MB"),
        Col("FP32 GFLOP"),
        Col("TC kinst", priority=5),
        Col("SM %", priority=1),
        Col("mem %", priority=2),
        Col("occup %", priority=3),
        Col("<1 wave %", priority=7),
        Col("L2 hit %", priority=6),
    ]


def _scaled(v: float | None, scale: float = 1.0, fmt: str = "{:.1f}") -> str:
    return MISSING if v is None else fmt.format(v * scale)


def _ncu_row(layer: str, m: dict[str, float], types: dict[str, str]) -> list[str]:
    """A layer's ncu figures: DRAM traffic cold (kernel replay) and warm (app-range) in MB, the rest as measured."""
    return [
        *layer_cells(layer, types),
        _scaled(m.get("kernels"), fmt="{:.0f}"),
        _scaled(m.get("kernel_replay_ns"), 1e-3),
        _scaled(_dram_bytes(m, "cold"), 1e-6),
        _scaled(_dram_bytes(m, "warm"), 1e-6),
        _scaled(m.get("fp32_flops"), 1e-9, "{:.3f}"),
        _scaled(m.get("tensor_math_inst"), 1e-3, "{:.0f}"),
        _scaled(m.get("sm_throughput_pct")),
        _scaled(m.get("mem_throughput_pct")),
        _scaled(m.get("achieved_occupancy_pct")),
        _scaled(None if "under_one_wave_ns" not in m else 100 * m["under_one_wave_ns"] / m["kernel_replay_ns"]),
        _scaled(m.get("l2_hit_pct")),
    ]


def _dram_bytes(m: dict[str, float], cache: str) -> float | None:
    """A layer's DRAM bytes read and written at `cache` ("cold": kernel replay, "warm": app-range); None where
    the reads were not measured."""
    read = m.get(f"dram_read_bytes_{cache}")
    if read is None:
        return None
    return read + m.get(f"dram_write_bytes_{cache}", 0)


def _roof_point(p: RoofPointDoc | None) -> RoofPoint | None:
    if p is None:
        return None
    return RoofPoint(
        cache=p.cache,
        bytes=p.bytes,
        bytes_source=p.bytes_source,
        ns=p.ns,
        time_source=p.time_source,
        intensity=p.intensity,
        achieved_tflops=p.achieved_tflops,
        achieved_gbps=p.achieved_gbps,
        attainable_tflops=p.attainable_tflops,
        bound=p.bound,
        roof_share=p.roof_share,
    )


def _roof_row(r: RoofRowDoc) -> GpuRoofRow:
    """A roofline row back from gpu-import's record of it."""
    return GpuRoofRow(
        r.layer, r.flops, r.tensor_math_inst, _roof_point(r.warm), _roof_point(r.cold), r.sm_pct, r.mem_pct
    )


def _print_tensor_and_fill(console: Console, tc: TensorCoreDoc, fill: LaunchFillDoc | None) -> None:
    if tc.unavailable is not None:
        fix = f"; fix: {tc.fix}" if tc.fix else ""
        console.print(f"tensor-core use per kernel and layer: unavailable: {tc.unavailable}{fix}", highlight=False)
    else:
        on, off = need(tc.conv_gemm_tensor_ns), need(tc.conv_gemm_no_tensor_ns)
        console.print(
            "conv/GEMM kernel time with tensor-core math (ncu HMMA/IMMA/GMMA): "
            f"{on / 1e3:.1f} us; without: {off / 1e3:.1f} us ({off / (on + off):.1%})",
            highlight=False,
        )
    if fill:
        occupancy = ""
        if fill.achieved_occupancy_pct is not None and fill.theoretical_occupancy_pct is not None:
            occupancy = (
                f"; achieved occupancy {fill.achieved_occupancy_pct:.1f}% "
                f"(theoretical {fill.theoretical_occupancy_pct:.1f}%)"
            )
        console.print(
            f"launch size ({fill.kernels} kernels, weighted by kernel-replay time): {fill.under_one_wave:.1%} in "
            f"launches of under one wave, {fill.sub_sm_grid:.1%} in grids of fewer blocks than the "
            f"{fill.sm_count:.0f} SMs{occupancy}",
            highlight=False,
        )


def print_nvml(console: Console, s: NvmlImport) -> None:
    console.print(f"NVML: {s.samples} samples over {s.span_s:.1f} s ({', '.join(s.columns)})", highlight=False)
    if not s.windows:
        return
    methods: dict[str, str] = {}
    rows = []
    for w in s.windows:
        if w.unavailable is not None:
            rows.append([w.model, w.precision, *[MISSING] * 5, f"unavailable: {w.unavailable}"])
            continue
        rec, means, method = w.recorded_j_per_inference, w.means, need(w.method)
        label = "counter" if "total-energy counter" in method else "power"
        methods.setdefault(method, f"{label}: {method}")
        rows.append(
            [
                w.model,
                w.precision,
                f"{need(w.j_per_inference):.3f}",
                f"{need(w.power_w):.0f}",
                MISSING if rec is None else f"{rec:.3f}",
                MISSING if means.get("sm_mhz") is None else f"{means['sm_mhz']:.0f}",
                MISSING if means.get("util_gpu") is None else f"{means['util_gpu']:.0f}",
                label,
            ]
        )
    cols = [
        Col("model", "left"),
        Col("precision", "left"),
        Col("J/inf"),
        Col("W"),
        Col("recorded J/inf"),
        Col("SM MHz", priority=2),
        Col("util %", priority=1),
        Col("method", "left", wrap=True, max_width=16),
    ]
    notes = list(methods.values())
    if s.power_average_s is not None:
        notes.append(
            f"NVML power readings average {s.power_average_s:g} s ({s.power_average_source}); recorded "
            "J/inf: the total-energy counter read before and after the window (good to one ~100 ms update)"
        )
    title = "energy per inference over the recorded benchmark windows"
    _print(console, TableSpec(title, cols, rows, notes, more=MORE))
