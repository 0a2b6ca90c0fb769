"""Rich tables of the GPU views: per-layer GPU time by launch correlation, kernel classes, the ncu
per-layer counters and roofline, NVML energy. They only read the dicts of hwprof.gpu_import."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

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
        "tensor kinst",
        "SM %",
        "mem %",
        "occup %",
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
            f(m.get("tensor_inst"), 1e-3, "{:.0f}"),
            f(m.get("sm_throughput_pct")),
            f(m.get("mem_throughput_pct")),
            f(m.get("achieved_occupancy_pct")),
            f(m.get("l2_hit_pct")),
        )
    console.print(table)
    if "roofline" not in s:
        return
    rs = s["roofline_summary"]
    roof = Table(
        title=(
            f"GPU roofline per layer: roofs {rs['peak_tflops']:.1f} TFLOP/s ({rs['compute_roof']}) and "
            f"{rs['peak_gbps']:.0f} GB/s ({rs['bandwidth_roof']}), ridge {rs['ridge_flop_per_byte']:.1f} FLOP/B; "
            f"bytes: {', '.join(rs['bytes_source'])}; FLOPs: SASS FP32 (kernel replay); "
            "* = tensor-pipe work not in FLOPs"
        ),
        title_justify="left",
    )
    for col in ("layer", "FLOP/B", "TFLOP/s", "GB/s", "bound", "of roof"):
        roof.add_column(col, justify="left" if col in ("layer", "bound") else "right")
    for r in s["roofline"]:
        star = "*" if r["lower_bound"] else ""
        roof.add_row(
            r["layer"],
            f(r["intensity"], fmt="{:.2f}") + star,
            f(r["achieved_tflops"], fmt="{:.3f}") + star,
            f(r["achieved_gbps"]),
            r["bound"],
            f(r["roof_share"], 100, "{:.1f}%"),
        )
    console.print(roof)
    tc = s["tensor_cores"]
    total = tc["conv_gemm_tensor_ns"] + tc["conv_gemm_no_tensor_ns"]
    if total:
        console.print(
            f"conv/GEMM kernel time with tensor-pipe instructions (ncu): {tc['conv_gemm_tensor_ns'] / 1e3:.1f} us; "
            f"without: {tc['conv_gemm_no_tensor_ns'] / 1e3:.1f} us ({tc['conv_gemm_no_tensor_ns'] / total:.1%})",
            highlight=False,
        )


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
