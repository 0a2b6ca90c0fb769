"""ncu rows charged to their NVTX layer range: per-layer counter tables.

Kernel replay (one row per kernel) gives, per layer:
- `kernel_replay_ns`: the sum of gpu__time_duration over the layer's kernels, each measured alone
  under kernel replay (clocks not locked: `--clock-control none`);
- `dram_read_bytes_cold` / `dram_write_bytes_cold`: kernel replay flushes the caches before every
  kernel (ncu's default `--cache-control all`), so these are cold-cache figures;
- `fp32_flops`: FP32 FLOPs from SASS thread instructions, 2 x FFMA + FADD + FMUL (predicated-on);
- `tensor_math_inst`: warp instructions of tensor-core math, the sum of the HMMA, IMMA and GMMA (Hopper's
  warpgroup MMA) instruction counters (TENSOR_MATH). Only present when the CSV has those columns: the H100
  recording does not (its ncu run did not ask for them), and then tensor-core use is unavailable with the
  `--metrics` option that records it (TENSOR_MATH_FIX). They are counted, not converted into FLOPs: the
  FLOPs of one instruction depend on its shape (m x n x k). ncu's `sm__ops_path_tensor_src_<in>_dst_<out>`
  counters count tensor math ops by type; they are untested on the H100, so the live pass does not ask
  for them (an unknown metric makes ncu refuse the whole run);
- `tensor_pipe_inst`: sm__inst_executed_pipe_tensor, every warp instruction on the tensor pipe. On the H100
  recording it is above 0 in 271 of 295 kernels, layout transposes (nchwToNhwcKernel 25,600) and
  elementwise kernels (51,200) included: it does not show tensor-core math, and nothing claims it does;
- launch size (`launch__grid_size`, `launch__sm_count`, `launch__waves_per_multiprocessor`): per layer
  `sub_sm_grid_ns` (kernel time in launches of fewer blocks than SMs) and `under_one_wave_ns` (kernel time
  in launches of under one wave: the grid does not fill every SM's block slots once);
- `sm_throughput_pct`, `mem_throughput_pct` (gpu__compute_memory_throughput), `achieved_occupancy_pct`
  (sm__warps_active.avg.pct_of_peak_sustained_active), `theoretical_occupancy_pct`
  (sm__maximum_warps_per_active_cycle_pct) and `l2_hit_pct` (lts__t_sector_hit_rate):
  means over the layer's kernels weighted by kernel duration.
Application-range replay (one row per layer range) gives `dram_read_bytes_warm` /
`dram_write_bytes_warm`: the layer's kernels back to back with the caches as the forward leaves
them, and `range_ns`, the range's wall time under the profiler (including CPU launch gaps: not a
kernel time; on the H100 recording 53 to 548 times the layer's kernel-replay time, so no roofline divides
by it).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from hwprof.collectors.gpu.ncu.csv_report import NcuReport, NcuRow

from hwprof.schema.codec import JsonObject
from hwprof.schema.ncu_tensor import TENSOR_MATH, TENSOR_MATH_FIX
from hwprof.schema.records import MetricTables

__all__ = ["TENSOR_MATH", "TENSOR_MATH_FIX", "layer_key", "layer_tables"]

DURATION = "gpu__time_duration.sum"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
FFMA = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum"
FADD = "sm__sass_thread_inst_executed_op_fadd_pred_on.sum"
FMUL = "sm__sass_thread_inst_executed_op_fmul_pred_on.sum"
TENSOR = "sm__inst_executed_pipe_tensor.sum"
GRID = "launch__grid_size"
SM_COUNT = "launch__sm_count"
WAVES = "launch__waves_per_multiprocessor"
WEIGHTED = {
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "mem_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "l2_hit_pct": "lts__t_sector_hit_rate.pct",
}
KERNEL_METRICS = (
    DURATION,
    DRAM_READ,
    DRAM_WRITE,
    FFMA,
    FADD,
    FMUL,
    TENSOR,
    GRID,
    SM_COUNT,
    WAVES,
    *WEIGHTED.values(),
)
"""What the live kernel pass asks ncu for (`--metrics`): the metrics of the recorded H100 CSV and the launch
size (which ncu reported there unasked); TENSOR_MATH, which it lacks, is added where the device lists it
(live.py metrics_for)."""
RANGE_METRICS = (DURATION, DRAM_READ, DRAM_WRITE, TENSOR, "sm__throughput.avg.pct_of_peak_sustained_elapsed")
"""Application-range replay refuses SASS instruction metrics (FFMA and friends)."""

UNITS = {
    "kernel_replay_ns": "ns",
    "kernels": "count",
    "dram_read_bytes_cold": "B",
    "dram_write_bytes_cold": "B",
    "fp32_flops": "FLOP",
    "tensor_math_inst": "warp inst",
    "tensor_pipe_inst": "warp inst",
    "sub_sm_grid_ns": "ns",
    "under_one_wave_ns": "ns",
    "theoretical_occupancy_pct": "%",
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
    "tensor_math_inst": "ncu " + " + ".join(TENSOR_MATH) + " (warp instructions of tensor-core math)",
    "tensor_pipe_inst": "ncu sm__inst_executed_pipe_tensor: every tensor-pipe instruction, not only tensor-core math",
    "sub_sm_grid_ns": "ncu kernel replay: kernel time in launches of fewer blocks (launch__grid_size) than SMs",
    "under_one_wave_ns": "ncu kernel replay: kernel time in launches under one wave (launch__waves_per_multiprocessor)",
    "dram_read_bytes_warm": "ncu application-range replay over the layer's NVTX range: warm caches, as in the forward",
    "dram_write_bytes_warm": "ncu application-range replay over the layer's NVTX range: warm caches, as in the forward",
    "range_ns": "ncu application-range replay: the range's wall time, CPU launch gaps included",
    **{k: "ncu, mean over the layer's kernels weighted by kernel duration" for k in WEIGHTED},
}


def layer_key(index: int) -> str:
    return f"model.{index}"


def tensor_math(row: NcuRow) -> float | None:
    """The row's tensor-core math instructions, or None where the CSV has none of TENSOR_MATH."""
    present = [row.metrics[m] for m in TENSOR_MATH if m in row.metrics]
    return sum(present) if present else None


def _launch(row: NcuRow) -> dict[str, float]:
    """Grid size, SM count and waves of the launch, where the CSV has them."""
    names = {"grid_blocks": GRID, "sm_count": SM_COUNT, "waves": WAVES}
    return {key: row.metrics[metric] for key, metric in names.items() if metric in row.metrics}


@dataclass
class NcuLayer:
    """One layer of a kernel-replay report: its figures (UNITS's names) and its kernels' rows for
    ncu.kernels.json."""

    type: str = ""
    figures: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    kernel_rows: list[JsonObject] = field(default_factory=list)
    math_missing: int = 0
    """Kernels without the TENSOR_MATH counters."""
    launch_known: int = 0
    """Kernels whose launch size the CSV has."""
    weighted: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    """WEIGHTED column -> sum of duration x value, and its duration in `durations`."""
    durations: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add(self, row: NcuRow) -> None:
        d = self.figures
        dur = row.value(DURATION)
        d["kernels"] += 1
        d["kernel_replay_ns"] += dur
        d["dram_read_bytes_cold"] += row.value(DRAM_READ)
        d["dram_write_bytes_cold"] += row.value(DRAM_WRITE)
        d["fp32_flops"] += 2 * row.value(FFMA) + row.value(FADD) + row.value(FMUL)
        d["tensor_pipe_inst"] += row.value(TENSOR)
        math = tensor_math(row)
        self.math_missing += math is None
        d["tensor_math_inst"] += math or 0.0
        launch = _launch(row)
        if len(launch) == 3:
            self.launch_known += 1
            d["sub_sm_grid_ns"] += dur if launch["grid_blocks"] < launch["sm_count"] else 0.0
            d["under_one_wave_ns"] += dur if launch["waves"] < 1.0 else 0.0
        for column, metric in WEIGHTED.items():
            if metric in row.metrics:
                self.weighted[column] += dur * row.metrics[metric]
                self.durations[column] += dur
        self.kernel_rows.append(_kernel_row_json(row, math, launch))

    def layer_figures(self) -> dict[str, float]:
        """The layer's row of the metric table: sums, and the WEIGHTED means over its kernels."""
        out = dict(self.figures)
        if self.math_missing:
            del out["tensor_math_inst"]  # unmeasured for some kernel: no layer figure
        if self.launch_known != self.figures["kernels"]:
            out.pop("sub_sm_grid_ns", None)
            out.pop("under_one_wave_ns", None)
        for name in WEIGHTED:
            if self.durations.get(name):
                out[name] = self.weighted[name] / self.durations[name]
        return out


def _kernel_row_json(row: NcuRow, math: float | None, launch: dict[str, float]) -> JsonObject:
    """One kernel's row of ncu.kernels.json (hwprof.schema.gpu_files.NcuKernel)."""
    return {
        "name": row.name,
        "ns": row.value(DURATION),
        "dram_bytes": row.value(DRAM_READ) + row.value(DRAM_WRITE),
        "tensor_math_inst": math,
        "tensor_pipe_inst": row.value(TENSOR),
        "grid": row.text.get("Grid Size", ""),
        "block": row.text.get("Block Size", ""),
        **launch,
        "achieved_occupancy_pct": row.metrics.get(WEIGHTED["achieved_occupancy_pct"]),
        "theoretical_occupancy_pct": row.metrics.get(WEIGHTED["theoretical_occupancy_pct"]),
    }


def kernel_layers(report: NcuReport) -> dict[str, NcuLayer]:
    """Per layer from a kernel-replay report, with each layer's kernels."""
    out: dict[str, NcuLayer] = defaultdict(NcuLayer)
    for row in report.rows:
        where = row.layer
        if where is None:
            continue
        layer = out[layer_key(where[0])]
        layer.type = where[1]
        layer.add(row)
    return dict(out)


def range_layers(report: NcuReport) -> dict[str, dict[str, float]]:
    """Per layer from an application-range report (one row per layer range)."""
    out: dict[str, dict[str, float]] = {}
    for row in report.rows:
        where = row.layer
        if where is None:
            continue
        out[layer_key(where[0])] = {
            "dram_read_bytes_warm": row.value(DRAM_READ),
            "dram_write_bytes_warm": row.value(DRAM_WRITE),
            "range_ns": row.value(DURATION),
        }
    return out


def layer_tables(
    kernel: NcuReport | None, app_range: NcuReport | None
) -> tuple[MetricTables, dict[str, list[JsonObject]]]:
    """One MetricTables of both replays, and the kernels of each layer (kernel replay): ncu.kernels.json's rows."""
    tables = MetricTables(units=dict(UNITS), methods=dict(METHODS))
    kernels: dict[str, list[JsonObject]] = {}
    if kernel is not None:
        for key, layer in kernel_layers(kernel).items():
            kernels[key] = sorted(layer.kernel_rows, key=lambda r: -r["ns"])
            tables.layers.setdefault(key, {}).update(layer.layer_figures())
    if app_range is not None:
        for key, row in range_layers(app_range).items():
            tables.layers.setdefault(key, {}).update(row)
    return tables, kernels
