"""Rich tables of the GPU views: per-layer GPU time by launch correlation, kernel classes, the ncu
per-layer counters and roofline, NVML energy. They only read the dicts of hwprof.gpu_import."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from hwprof.analysis.gpu_roofline import MARKS
from hwprof.cppnames import kernel_label

NAME_WIDTH = 70


def _short(name: str, width: int = NAME_WIDTH) -> str:
    label = kernel_label(name)
    return label if len(label) <= width else label[: width - 1] + "…"


def print_kineto(console: Console, s: dict[str, Any], title: str, top: int = 5) -> None:
    console.print(
        f"[bold]{title}[/] ({s.get('device', '')}, {s['forwards']} forwards): forward CPU {s['cpu_us'] / 1e3:.2f} ms, "
        f"GPU busy {s['gpu_busy_us'] / 1e3:.3f} ms (union of kernel intervals), {s['kernels']:.0f} kernels, "
        f"GPU idle share {s['idle_share']:.1%} of the forward's window; "
        f"layer sums / busy = {s['layer_sum_over_busy']:.4f}",
        highlight=False,
    )
    rows = {r["layer"]: r for r in s["layers"]}
    table = Table(
        title=f"top {top} layers by GPU time (per forward; kernels charged by launch correlation)", title_justify="left"
    )
    for col in ("layer", "type", "GPU us", "kernels", "CPU us", "launch us", "top kernels (us)"):
        if col == "top kernels (us)":
            width = max(24, console.width - 62)
            table.add_column(col, justify="left", max_width=width, overflow="ellipsis", no_wrap=True)
        else:
            table.add_column(col, justify="left" if col in ("layer", "type") else "right", no_wrap=True)
    for key in s["top_layers"][:top]:
        r = rows[key]
        kern = "\n".join(f"{k['gpu_us']:.1f}  {_short(k['name'])}" for k in r["top_kernels"])
        table.add_row(
            r["layer"],
            r["type"],
            f"{r['gpu_us']:.1f}",
            f"{r['kernels']:.0f}",
            f"{r['cpu_us']:.0f}",
            f"{r['launch_us']:.0f}",
            kern,
        )
    console.print(table)
    classes = Table(title="GPU time by kernel class (by kernel name)", title_justify="left")
    for col in ("class", "GPU us", "kernels", "share", "largest"):
        classes.add_column(col, justify="left" if col in ("class", "largest") else "right")
    for c in s["kernel_classes"]:
        classes.add_row(
            c["class"],
            f"{c['gpu_us']:.1f}",
            f"{c['kernels']:.0f}",
            f"{c['share']:.1%}",
            "\n".join(f"{ns / 1e3:.1f}  {_short(n, 60)}" for n, ns in c["top"][:2]),
        )
    console.print(classes)


def print_ncu(console: Console, s: dict[str, Any]) -> None:
    table = Table(
        title="Nsight Compute per layer (kernel replay: duration, FP32 FLOPs, cold DRAM; app-range: warm DRAM)",
        title_justify="left",
    )
    cols = (
        "layer",
        "kernels",
        "replay us",
        "cold MB",
        "warm MB",
        "FP32 GFLOP",
        "TC kinst",
        "SM %",
        "mem %",
        "occup %",
        "<1 wave %",
        "L2 hit %",
    )
    for col in cols:
        table.add_column(col, justify="left" if col == "layer" else "right")

    def f(v: Any, scale: float = 1.0, fmt: str = "{:.1f}") -> str:
        return "-" if v is None else fmt.format(v * scale)

    for layer, m in sorted(s["layers"].items(), key=lambda kv: int(kv[0].split(".")[-1])):
        cold = (
            m.get("dram_read_bytes_cold", 0) + m.get("dram_write_bytes_cold", 0)
            if "dram_read_bytes_cold" in m
            else None
        )
        warm = (
            m.get("dram_read_bytes_warm", 0) + m.get("dram_write_bytes_warm", 0)
            if "dram_read_bytes_warm" in m
            else None
        )
        table.add_row(
            layer,
            f(m.get("kernels"), fmt="{:.0f}"),
            f(m.get("kernel_replay_ns"), 1e-3),
            f(cold, 1e-6),
            f(warm, 1e-6),
            f(m.get("fp32_flops"), 1e-9, "{:.3f}"),
            f(m.get("tensor_math_inst"), 1e-3, "{:.0f}"),
            f(m.get("sm_throughput_pct")),
            f(m.get("mem_throughput_pct")),
            f(m.get("achieved_occupancy_pct")),
            f(None if "under_one_wave_ns" not in m else 100 * m["under_one_wave_ns"] / m["kernel_replay_ns"]),
            f(m.get("l2_hit_pct")),
        )
    console.print(table)
    console.print(
        "TC kinst = tensor-core math (ncu HMMA + IMMA + GMMA warp instructions); <1 wave % = kernel time in "
        "launches of under one wave",
        highlight=False,
    )
    _print_tensor_and_fill(console, s)
    if "roofline" in s:
        _print_roofline(console, s)


def _print_tensor_and_fill(console: Console, s: dict[str, Any]) -> None:
    tc = s["tensor_cores"]
    if "unavailable" in tc:
        fix = f"; fix: {tc['fix']}" if tc["fix"] else ""
        console.print(f"tensor-core use per kernel and layer: unavailable: {tc['unavailable']}{fix}", highlight=False)
    else:
        total = tc["conv_gemm_tensor_ns"] + tc["conv_gemm_no_tensor_ns"]
        console.print(
            "conv/GEMM kernel time with tensor-core math (ncu HMMA/IMMA/GMMA): "
            f"{tc['conv_gemm_tensor_ns'] / 1e3:.1f} us; "
            f"without: {tc['conv_gemm_no_tensor_ns'] / 1e3:.1f} us ({tc['conv_gemm_no_tensor_ns'] / total:.1%})",
            highlight=False,
        )
    fill = s.get("launch_fill")
    if fill:
        occupancy = ""
        if fill["achieved_occupancy_pct"] is not None and fill["theoretical_occupancy_pct"] is not None:
            occupancy = (
                f"; achieved occupancy {fill['achieved_occupancy_pct']:.1f}% "
                f"(theoretical {fill['theoretical_occupancy_pct']:.1f}%)"
            )
        console.print(
            f"launch size ({fill['kernels']} kernels, weighted by kernel-replay time): {fill['under_one_wave']:.1%} in "
            f"launches of under one wave, {fill['sub_sm_grid']:.1%} in grids of fewer blocks than the "
            f"{fill['sm_count']:.0f} SMs{occupancy}",
            highlight=False,
        )


def _print_roofline(console: Console, s: dict[str, Any]) -> None:
    def f(v: Any, scale: float = 1.0, fmt: str = "{:.1f}") -> str:
        return "-" if v is None else fmt.format(v * scale)

    rs = s["roofline_summary"]
    roof = Table(
        title=(
            f"GPU roofline per layer: roofs {rs['peak_tflops']:.1f} TFLOP/s ({rs['compute_roof']}) and "
            f"{rs['peak_gbps']:.0f} GB/s ({rs['bandwidth_roof']}), ridge {rs['ridge_flop_per_byte']:.1f} FLOP/B; "
            "one cache state per row: warm = app-range DRAM bytes / kernel time in the real forward, "
            f"cold = kernel-replay bytes / kernel-replay time; FLOPs: SASS FP32 (kernel replay); {MARKS}"
        ),
        title_justify="left",
    )
    for col in ("layer", "cache", "MB", "us", "FLOP/B", "GB/s", "bound", "of roof"):
        roof.add_column(col, justify="left" if col in ("layer", "cache", "bound") else "right")
    for r in s["roofline"]:
        for p in (r["warm"], r["cold"]):
            if p is None:
                continue
            roof.add_row(
                r["layer"],
                p["cache"],
                f(p["bytes"], 1e-6, "{:.2f}"),
                f(p["ns"], 1e-3),
                f(p["intensity"], fmt="{:.2f}"),
                f(p["achieved_gbps"]),
                p["bound"],
                f(p["roof_share"], 100, "{:.1f}%"),
            )
    console.print(roof)
    console.print(f"{s.get('warm_time', '')}", highlight=False)


def print_nvml(console: Console, s: dict[str, Any]) -> None:
    console.print(f"NVML: {s['samples']} samples over {s['span_s']:.1f} s ({', '.join(s['columns'])})", highlight=False)
    if not s["windows"]:
        return
    table = Table(title="energy per inference over the recorded benchmark windows", title_justify="left")
    for col in ("model", "precision", "J/inf", "W", "recorded J/inf", "SM MHz", "util %", "method"):
        table.add_column(col, justify="left" if col in ("model", "precision", "method") else "right")
    for w in s["windows"]:
        rec = w["recorded_j_per_inference"]
        table.add_row(
            w["model"],
            w["precision"],
            f"{w['j_per_inference']:.3f}",
            f"{w['power_w']:.0f}",
            "-" if rec is None else f"{rec:.3f}",
            f"{w['means'].get('sm_mhz', 0):.0f}",
            f"{w['means'].get('util_gpu', 0):.0f}",
            "counter (estimate)" if "total-energy counter" in w["method"] else "power integral (estimate)",
        )
    console.print(table)
    methods = sorted({w["method"] for w in s["windows"] if "method" in w})
    for method in methods:
        console.print(f"J/inf: {method}", highlight=False)
    if s.get("power_average_s") is not None:
        console.print(
            f"NVML power readings average {s['power_average_s']:g} s ({s['power_average_source']}); recorded J/inf: "
            "the total-energy counter read before and after the window (good to one ~100 ms counter update)",
            highlight=False,
        )
