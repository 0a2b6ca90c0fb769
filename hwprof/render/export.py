"""summary.json and the enriched layers.csv: everything the report shows, for machines.

summary.json (summary_version 1), all times in ms, shares as fractions (0.25 = 25%):
- run_id, status, model (run.json "model"), config {imgsz, batch, threads, iters, warmup}
- detections: run.json "detections" (the boxes NMS kept in the measured iterations: {pass, conf, iou, images:
  [{image, boxes, classes [{id, name, boxes}], iterations, differed, drawn}] or video: {video, frames, boxes,
  per_frame_min, per_frame_median, per_frame_max, frames_with_boxes, classes, drawn}}), or null where the run
  did not record them (older runs, a program's)
- host {cpu_model, logical_cpus, torch, cpu_capability}
- peaks: {peak_gflops (the run's compute roof), peak_gbps, ridge_flop_per_byte, threads, gflops_method,
  gbps_method, busy_host, load_avg_1m, compute_probe, interference, source, gflops_spread,
  quiet_measurements, measured_gflops and raised_by (the probe's peak and the layer whose rate is the roof,
  where a layer beat the probe; null and "" otherwise), layers_above_measured, best_unscaled_gflops (that
  layer's rate by its own unscaled time, where the roof is mostly the scaling), paper (run.json's
  peaks.paper)} or {status: "unavailable", reason, fix}
- stages: {source, batch, fps (end to end), inference_fps (forward alone), end_to_end (the stages an
  iteration ran, in order), disturbed (why the timing pass is not clean, or null),
  rows: [{name, n, p50_ms, p90_ms, p99_ms, mean_ms,
  stdev_ms, share (of iteration p50), fps (batch / p50), energy_j, energy_j_per_image}],
  energy: {J_per_image, avg_W} or {status: "unavailable", reason, fix}}
- layers: {time_pass, iterations, scale, time_note, forward_ms, source_forward_ms,
  outside_layers_ms, methods {column: how}, unavailable {family: {status, reason, fix}},
  rows: [one per layer: index, name, type, depth, params, out_shape, flops, min_bytes,
  intensity (FLOP/B), time_raw_ms (time pass, median), time_ms (scaled), time_incl_ms, share,
  gflops_s, pct_peak, attainable_gflops, pct_roof, gbps, bound ("memory"/"compute"),
  measured_bytes, measured_intensity, bound_measured, cpi, ipc, llc_mpki, l1_mpki, cpus
  (task-clock / wall), cycles, instructions, energy_j, kernels [{name, label, self_ms, calls,
  share}], frames [{function, share, value, unit}], frame_shares {python, native, waiting},
  native {samples, share_of_forward, kinds {kind: share}, kernels [{name, kind, library, share,
  samples, cpi}], threads, cpi, too_few} (perf sampling, all threads),
  metrics {"<collector>.<metric>": value}]}; a value that was not measured is null, and the
  family's reason is under "unavailable".
- types: [{type, count, params, flops, min_bytes, time_ms, share, gflops_s, intensity, bound,
  pct_peak, cpi, energy_j}]
- roofline: {peak_gflops, peak_gbps, ridge, flops, min_bytes, intensity, gflops_s, pct_peak,
  bound, layers_by_bound {memory|compute: {layers, share}}, measured_bytes, measured_intensity,
  bound_measured} or {status: "unavailable", reason, fix}
- overheads: {passes [{name, status, collectors, wall_s, forward_p50_ms, ratio (pass-level, older
  key), cost and pass_level ({method, ratio, low, high, q1, q3, blocks, block_ratios, forward_on_ms,
  forward_off_ms, covers, always_on, added_blocks, extension, shapes (only where blocks mixed input shapes),
  resolved, unresolved_why (only where not resolved)}: paired_cost.PassCostFigure; an
  unresolved cost has ratio null, its blocks' median under ratio_unresolved and the report's words under
  text), neighbours (hwprof.perf.neighbours.NeighbourLoad: other work on the run's CPUs during the pass)}],
  outside_layers_ms, outside_layers_share, outside_layers_cpu_ms, between_ops_ms,
  between_ops_share, between_ops_layers [[layer, ms, share]], harness_vs_reference, missing}
- findings: [{title, evidence, kind, weight, topic, layers, sources, unconfirmed, unfit}] ranked; kind "caveat" for
  notes on the data itself; sources: the measurements a finding rests on; unconfirmed: why it is not a measured fact
  (a pass under it was unfit for a verdict: hwprof.analysis.health), listed after the ranked ones; unfit: those
  passes
- unavailable: {collector: {status, reason, fix}} for every collector that did not fully run
- advice: advice.json as Advice.to_dict() (hwprof/analysis/advice/table.py: baseline, device, rows in display order
  with ranked and breakeven_inferences, blocks, methods, notes, wall_s), or null when the run was not advised
  (or its advice.json is unreadable: then a line in warnings says why)

layers.csv: one row per layer: index, name, type, from (space-separated from-edges), params, flops,
in_bytes, out_bytes, weight_bytes, then the summary's other layer columns (kernels and frames flattened
to the top one: top_kernel, top_kernel_label, top_kernel_share, top_frame, top_frame_share; and the
layer's most sampled native kernel outside the OpenMP runtime, from perf: top_native_kernel,
top_native_kernel_kind, top_native_kernel_share)
followed by every `<collector>.<metric>` column; an empty cell is a figure that was not measured.

advice.csv (an advised run only): one row per advice row, columns in render/advice/export.py.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from hwprof.analysis.run_analysis import Analysis, missing_dict
from hwprof.core.csvtext import CsvRow, csv_text
from hwprof.core.kernels import KIND_OPENMP
from hwprof.render.advice.export import COLUMNS as ADVICE_COLUMNS
from hwprof.render.advice.export import advice_csv_rows
from hwprof.rundir.writer import ReportFiles

if TYPE_CHECKING:
    from hwprof.analysis.gpu.view import GpuView
    from hwprof.analysis.layers.stats import LayerReport
    from hwprof.analysis.stages import Stages
    from hwprof.schema.run import RunConfigDoc

SUMMARY_VERSION = 1
CSV_COLUMNS = (
    "index",
    "name",
    "type",
    "from",
    "params",
    "flops",
    "in_bytes",
    "out_bytes",
    "weight_bytes",
    "depth",
    "out_shape",
    "min_bytes",
    "intensity",
    "time_raw_ms",
    "time_ms",
    "time_incl_ms",
    "share",
    "gflops_s",
    "pct_peak",
    "attainable_gflops",
    "pct_roof",
    "gbps",
    "bound",
    "measured_bytes",
    "measured_intensity",
    "bound_measured",
    "cpi",
    "ipc",
    "llc_mpki",
    "l1_mpki",
    "cpus",
    "cycles",
    "instructions",
    "energy_j",
)

CSV_ATTRIBUTES = {"from": "from_edges"}
"""CSV column -> LayerStat attribute, where the names differ."""


def _clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def summary_dict(a: Analysis) -> dict[str, Any]:
    run = a.doc
    cfg = run.config
    rep = a.layers
    roof = rep.roof.roof
    out = {
        "summary_version": SUMMARY_VERSION,
        "run_id": run.run_id,
        "status": run.status,
        "warnings": a.warnings,
        "model": run.model.to_json(),
        "detections": run.detections.to_json() if run.detections else None,
        "config": {
            "imgsz": cfg.imgsz,
            "batch": cfg.batch,
            "threads": cfg.threads,
            "iters": cfg.iters,
            "warmup": cfg.warmup,
        },
        "host": {
            "cpu_model": run.host.cpu_model,
            "logical_cpus": run.host.logical_cpus,
            "torch": run.host.torch.version,
            "cpu_capability": run.host.torch.cpu_capability,
        },
        "peaks": roof.to_dict() if roof is not None else rep.missing["roofline"].to_dict(),
        "stages": _stages_json(a.stages),
        "layers": _layers_json(rep),
        "types": [t.to_dict() for t in a.types],
        "roofline": a.roofline.to_dict() if a.roofline is not None else rep.missing["roofline"].to_dict(),
        "overheads": a.overheads.to_dict(),
        "findings": [f.to_dict() for f in a.findings],
        "unavailable": a.unavailable,
        "advice": a.advice.to_dict() if a.advice is not None else None,
    }
    if a.gpu is not None:
        out["gpu"] = _gpu_json(cfg, a.gpu)
    if a.layer_shapes is not None:
        out["layers_by_shape"] = asdict(a.layer_shapes)
    return dict(_clean(out))


def _stages_json(st: Stages) -> dict[str, Any]:
    """summary.json's stages; energy per image, or why it is not there."""
    energy: dict[str, Any]
    if st.j_per_image is not None:
        energy = {"J_per_image": st.j_per_image, "avg_W": st.avg_w}
    else:
        energy = st.energy_missing.to_dict() if st.energy_missing else {}
    return {
        "source": st.source,
        "batch": st.batch,
        "fps": st.fps,
        "inference_fps": st.inference_fps,
        "end_to_end": st.iteration_stages,
        "disturbed": st.disturbed,
        "rows": [r.to_dict() for r in st.rows],
        "energy": energy,
    }


def _layers_json(rep: LayerReport) -> dict[str, Any]:
    return {
        "time_pass": rep.time_pass,
        "iterations": rep.time_iterations,
        "scale": rep.scale,
        "time_note": rep.time_note,
        "forward_ms": rep.forward_ms,
        "source_forward_ms": rep.source_forward_ms,
        "outside_layers_ms": rep.outside_ms,
        "methods": rep.methods,
        "unavailable": missing_dict(rep.missing),
        "rows": [r.to_dict() for r in rep.layers],
    }


def _gpu_json(cfg: RunConfigDoc, gpu: GpuView) -> dict[str, Any]:
    return {
        "device": cfg.device,
        "precision": cfg.precision,
        "channels_last": cfg.channels_last,
        "forward": gpu.kineto.to_json(),
        "cuda_graph": gpu.graph.to_json(),
        "nvml": gpu.nvml.to_json(),
        "peaks": gpu.peaks,
        # one point per cache state (warm, cold); tensor-core math: true/false by ncu, or why it is unknown
        "roofline": [
            asdict(r)
            | {
                "tensor_work_not_in_flops": r.lower_bound
                if r.lower_bound is not None
                else "unavailable: tensor-core math not recorded by ncu"
            }
            for r in gpu.roofline
        ],
    }


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if not math.isfinite(value) else f"{value:.6g}"
    return value


LAYER_TOP_COLUMNS = (
    "top_kernel",
    "top_kernel_label",
    "top_kernel_share",
    "top_frame",
    "top_frame_share",
    "top_native_kernel",
    "top_native_kernel_kind",
    "top_native_kernel_share",
)
"""The columns that flatten a layer's kernels, frames and native kernels to the top one, after CSV_COLUMNS."""


def layer_table(a: Analysis) -> tuple[list[str], list[CsvRow]]:
    """layers.csv's columns and rows with raw values (None: not measured): the CSV writes them as cells, the
    library (hwprof.Run.layers) as a typed table."""
    extra = sorted({k for r in a.layers.layers for k in r.metrics})
    columns = [*CSV_COLUMNS, *LAYER_TOP_COLUMNS, *extra]
    rows = []
    for r in a.layers.layers:
        row: CsvRow = {c: getattr(r, CSV_ATTRIBUTES.get(c, c)) for c in CSV_COLUMNS}
        if r.kernels:
            row.update(
                top_kernel=r.kernels[0].name,
                top_kernel_label=r.kernels[0].label,
                top_kernel_share=r.kernels[0].share,
            )
        if r.frames:
            row.update(top_frame=r.frames[0].function, top_frame_share=r.frames[0].share)
        busy = next((k for k in r.native.kernels if k.kind != KIND_OPENMP), None) if r.native else None
        if busy is not None:
            row.update(
                top_native_kernel=busy.name, top_native_kernel_kind=busy.kind, top_native_kernel_share=busy.share
            )
        row.update(r.metrics)
        rows.append(row)
    return columns, rows


def layer_csv_rows(a: Analysis) -> tuple[list[str], list[CsvRow]]:
    columns, rows = layer_table(a)
    return columns, [{k: _cell(v) for k, v in row.items()} for row in rows]


def layers_csv_text(a: Analysis) -> str:
    return csv_text(*layer_csv_rows(a))


def advice_csv_text(a: Analysis) -> str:
    """advice.csv (empty when the run has no readable advice.json)."""
    rows = advice_csv_rows(a.advice) if a.advice is not None else []
    return csv_text(list(ADVICE_COLUMNS), [{k: _cell(v) for k, v in r.items()} for r in rows])


def report_files(a: Analysis) -> ReportFiles:
    """What a report leaves in the run directory, as content (hwprof.rundir.writer writes it): summary.json,
    layers.csv when there is a layer table, advice.csv when the run was advised (the plots: render.plots)."""
    return ReportFiles(
        summary_json=json.dumps(summary_dict(a), indent=1) + "\n",
        layers_csv=layers_csv_text(a) if a.layers.layers else None,
        advice_csv=advice_csv_text(a) if a.advice is not None else None,
    )
