"""ncu rows charged to their NVTX layer range: per-layer counter tables.

Kernel replay (one row per kernel) gives, per layer:
- `kernel_replay_ns`: the sum of gpu__time_duration over the layer's kernels, each measured alone
  under kernel replay (clocks not locked: `--clock-control none`);
- `dram_read_bytes_cold` / `dram_write_bytes_cold`: kernel replay flushes the caches before every
  kernel (ncu's default `--cache-control all`), so these are cold-cache figures;
- `fp32_flops`: FP32 FLOPs from SASS thread instructions, 2 x FFMA + FADD + FMUL (predicated-on);
- `tensor_inst`: warp-level instructions on the tensor pipe (sm__inst_executed_pipe_tensor). They
  are counted, not converted into FLOPs: the FLOPs of one instruction depend on its shape (HMMA/HGMMA
  m x n x k), which this metric does not give. ncu's `sm__ops_path_tensor_src_<in>_dst_<out>` counters
  count tensor math ops by type; they are not in the metric set that ran on the H100 and are untested,
  so the live pass does not ask for them (an unknown metric makes ncu refuse the whole run);
- `sm_throughput_pct`, `mem_throughput_pct` (gpu__compute_memory_throughput), `achieved_occupancy_pct`
  (sm__warps_active.avg.pct_of_peak_sustained_active) and `l2_hit_pct` (lts__t_sector_hit_rate):
  means over the layer's kernels weighted by kernel duration.
Application-range replay (one row per layer range) gives `dram_read_bytes_warm` /
`dram_write_bytes_warm`: the layer's kernels back to back with the caches as the forward leaves
them, and `range_ns`, the range's wall time under the profiler (including CPU launch gaps: not a
kernel time).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hwprof.collectors.gpu.ncu.csv_report import NcuReport

from hwprof.records import MetricTables

DURATION = "gpu__time_duration.sum"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
FFMA = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum"
FADD = "sm__sass_thread_inst_executed_op_fadd_pred_on.sum"
FMUL = "sm__sass_thread_inst_executed_op_fmul_pred_on.sum"
TENSOR = "sm__inst_executed_pipe_tensor.sum"
WEIGHTED = {
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "mem_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "l2_hit_pct": "lts__t_sector_hit_rate.pct",
}
KERNEL_METRICS = (DURATION, DRAM_READ, DRAM_WRITE, FFMA, FADD, FMUL, TENSOR, *WEIGHTED.values())
"""What the live pass asks ncu for (`--metrics`), the metrics of the recorded H100 CSV."""
RANGE_METRICS = (DURATION, DRAM_READ, DRAM_WRITE, TENSOR, "sm__throughput.avg.pct_of_peak_sustained_elapsed")
"""Application-range replay refuses SASS instruction metrics (FFMA and friends)."""

UNITS = {
    "kernel_replay_ns": "ns",
    "kernels": "count",
    "dram_read_bytes_cold": "B",
    "dram_write_bytes_cold": "B",
    "fp32_flops": "FLOP",
    "tensor_inst": "warp inst",
    "sm_throughput_pct": "%",
    "mem_throughput_pct": "%",
    "achieved_occupancy_pct": "%",
    "l2_hit_pct": "%",
    "dram_read_bytes_warm": "B",
    "dram_write_bytes_warm": "B",
    "range_ns": "ns",
}
METHODS = {
    "kernel_replay_ns": "ncu kernel replay: each kernel alone, caches flushed before it; sum over the layer's kernels",
    "dram_read_bytes_cold": "ncu kernel replay (caches flushed before every kernel): cold-cache DRAM bytes",
    "dram_write_bytes_cold": "ncu kernel replay (caches flushed before every kernel): cold-cache DRAM bytes",
    "fp32_flops": "ncu SASS thread instructions: 2 x FFMA + FADD + FMUL; tensor-pipe work not included",
    "tensor_inst": "ncu sm__inst_executed_pipe_tensor (warp instructions; FLOPs per instruction depend on its shape)",
    "dram_read_bytes_warm": "ncu application-range replay over the layer's NVTX range: warm caches, as in the forward",
    "dram_write_bytes_warm": "ncu application-range replay over the layer's NVTX range: warm caches, as in the forward",
    "range_ns": "ncu application-range replay: the range's wall time, CPU launch gaps included",
    **{k: "ncu, mean over the layer's kernels weighted by kernel duration" for k in WEIGHTED},
}


def layer_key(index: int) -> str:
    return f"model.{index}"


def kernel_layers(report: NcuReport) -> dict[str, dict[str, Any]]:
    """Per layer from a kernel-replay report, plus each layer's kernels ("kernel_rows")."""
    acc: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(float))
    for row in report.rows:
        where = row.layer
        if where is None:
            continue
        d = acc[layer_key(where[0])]
        d["type"] = where[1]
        dur = row.value(DURATION)
        d["kernels"] += 1
        d["kernel_replay_ns"] += dur
        d["dram_read_bytes_cold"] += row.value(DRAM_READ)
        d["dram_write_bytes_cold"] += row.value(DRAM_WRITE)
        d["fp32_flops"] += 2 * row.value(FFMA) + row.value(FADD) + row.value(FMUL)
        d["tensor_inst"] += row.value(TENSOR)
        for column, metric in WEIGHTED.items():
            if metric in row.metrics:
                d["_w_" + column] += dur * row.metrics[metric]
                d["_d_" + column] += dur
        d.setdefault("kernel_rows", []).append(
            {
                "name": row.name,
                "ns": dur,
                "dram_bytes": row.value(DRAM_READ) + row.value(DRAM_WRITE),
                "tensor_inst": row.value(TENSOR),
                "grid": row.text.get("Grid Size", ""),
                "block": row.text.get("Block Size", ""),
            }
        )
    out: dict[str, dict[str, Any]] = {}
    for key, d in acc.items():
        row_out = {k: v for k, v in d.items() if not k.startswith("_")}
        for name in WEIGHTED:
            if d.get("_d_" + name):
                row_out[name] = d["_w_" + name] / d["_d_" + name]
        out[key] = row_out
    return out


def range_layers(report: NcuReport) -> dict[str, dict[str, Any]]:
    """Per layer from an application-range report (one row per layer range)."""
    out: dict[str, dict[str, Any]] = {}
    for row in report.rows:
        where = row.layer
        if where is None:
            continue
        out[layer_key(where[0])] = {
            "type": where[1],
            "dram_read_bytes_warm": row.value(DRAM_READ),
            "dram_write_bytes_warm": row.value(DRAM_WRITE),
            "range_ns": row.value(DURATION),
            "tensor_inst_range": row.value(TENSOR),
        }
    return out


def layer_tables(
    kernel: NcuReport | None, app_range: NcuReport | None
) -> tuple[MetricTables, dict[str, list[dict[str, Any]]]]:
    """One MetricTables of both replays, and the kernels of each layer (kernel replay)."""
    tables = MetricTables(units=dict(UNITS), methods=dict(METHODS))
    kernels: dict[str, list[dict[str, Any]]] = {}
    if kernel is not None:
        for key, row in kernel_layers(kernel).items():
            kernels[key] = sorted(row.pop("kernel_rows"), key=lambda r: -r["ns"])
            row.pop("type")
            tables.layers.setdefault(key, {}).update(row)
    if app_range is not None:
        for key, row in range_layers(app_range).items():
            row.pop("type")
            row.pop("tensor_inst_range")
            tables.layers.setdefault(key, {}).update(row)
    return tables, kernels
