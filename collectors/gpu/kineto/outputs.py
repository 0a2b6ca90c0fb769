"""The GPU trace pass's outputs from a parsed trace and its attribution: per-layer metrics, the
kernels of each layer, and spans on the run's clock (kernels on a GPU track, launches and layer
ranges on the launching thread).

Clock: Kineto stamps CPU and GPU events on one clock (CUPTI converts GPU timestamps to it). That
clock is mapped onto CLOCK_MONOTONIC by the `forward` ranges: each was opened right after hwprof's
forward stage marker, so marker time - range time is the offset, one value per forward; the median
is used and the spread (largest distance from the median) is recorded as the alignment error.
"""

from __future__ import annotations

import bisect
import json
import statistics
from pathlib import Path
from typing import Any

from hwprof.collectors.gpu.kineto.attribution import OUTSIDE, GpuAttribution
from hwprof.collectors.gpu.kineto.trace import GpuTrace

from hwprof.atomic import atomic_write_text
from hwprof.records import MetricTables, Span, metrics_path, records_path, write_records

GPU_TRACK = "GPU {device} stream {stream}"
FLOW_BASE = 1 << 40
"""Flow ids of launch -> kernel arrows: the correlation id above this base (unique in the trace)."""


def clock_offset(trace: GpuTrace, marker_ns: list[int]) -> dict[str, Any]:
    """mono = kineto + offset_ns, from the forward ranges against the forward markers (same order)."""
    pairs = list(zip(marker_ns, (f.ts for f in trace.forwards), strict=False))
    if not pairs:
        return {"offset_ns": None, "error_ns": None, "method": "no forward range to align"}
    diffs = [m - k for m, k in pairs]
    mid = int(statistics.median(diffs))
    return {
        "offset_ns": mid,
        "error_ns": max(abs(d - mid) for d in diffs),
        "pairs": len(pairs),
        "method": "median of (forward stage marker - Kineto 'forward' range begin); error: largest distance from it",
    }


def metric_tables(att: GpuAttribution) -> MetricTables:
    tables = MetricTables(
        units={"gpu_us": "us", "kernels": "count", "cpu_us": "us", "launch_us": "us", "cuda_api_us": "us"},
        methods={
            "gpu_us": "kernels charged to the layer whose range launched them (launch correlation), per forward",
            "launch_us": "CUDA runtime/driver calls in the range that started a GPU activity, per forward",
        },
    )
    for row in att.layers:
        if row.layer == OUTSIDE:
            continue
        tables.layers[row.layer] = {
            "gpu_us": row.gpu_ns / 1e3,
            "kernels": row.kernels,
            "cpu_us": row.cpu_ns / 1e3,
            "launch_us": row.launch_ns / 1e3,
            "cuda_api_us": row.api_ns / 1e3,
        }
    if att.forwards:
        tables.stages["forward"] = {
            "cpu_us": att.mean("cpu_ns") / 1e3,
            "gpu_busy_us": att.mean("gpu_busy_ns") / 1e3,
            "gpu_idle_share": att.idle_share,
            "kernels": att.mean("kernels"),
        }
        tables.units.update(gpu_busy_us="us", gpu_idle_share="fraction")
        tables.methods["gpu_busy_us"] = "union of the forward's GPU activity intervals"
        tables.methods["gpu_idle_share"] = (
            "1 - busy / (forward range begin .. later of its end and its last kernel's end)"
        )
    return tables


def layer_kernels(att: GpuAttribution) -> dict[str, list[dict[str, Any]]]:
    return {
        row.layer: [{"name": k.name, "cat": k.cat, "gpu_us": k.gpu_ns / 1e3, "calls": k.calls} for k in row.kernel_rows]
        for row in att.layers
    }


def spans(trace: GpuTrace, offset_ns: int) -> list[Span]:
    """GPU activities of the forwards on their stream's track, with the launch's correlation, thread and
    layer in args (the trace renderer draws a flow from the launch to the kernel with them)."""
    layer_at: list[tuple[int, int, str, int]] = [(r.ts, r.end, r.name, r.tid) for r in trace.layers]
    out: list[Span] = []
    starts = [r[0] for r in layer_at]

    for fwd in trace.forwards:
        lo = bisect.bisect_left([c.ts for c in trace.launches], fwd.ts)
        for call in trace.launches[lo:]:
            if call.ts >= fwd.end:
                break
            act = trace.activities.get(call.correlation) if call.correlation is not None else None
            if act is None:
                continue
            k = bisect.bisect_right(starts, call.ts) - 1
            layer = layer_at[k][2] if k >= 0 and call.ts < layer_at[k][1] else ""
            flow = FLOW_BASE + act.correlation
            args = {"correlation": act.correlation, "launch_tid": call.tid, "layer": layer, "flow_in": flow, **act.args}
            out.append(
                Span(
                    call.name,
                    call.ts + offset_ns,
                    call.dur,
                    f"thread:{call.tid}",
                    "cuda_launch",
                    call.tid,
                    {"correlation": act.correlation, "flow_out": flow},
                )
            )
            out.append(
                Span(
                    act.name,
                    act.ts + offset_ns,
                    act.dur,
                    GPU_TRACK.format(device=act.device, stream=act.stream),
                    act.cat,
                    None,
                    args,
                )
            )
    return out


def run_summary(trace: GpuTrace, att: GpuAttribution, clock: dict[str, Any]) -> dict[str, Any]:
    """gpu_kineto's summary in run.json."""
    return {
        "device": trace.device_name,
        "forwards": len(att.forwards),
        "forward_cpu_us": att.mean("cpu_ns") / 1e3,
        "gpu_busy_us": att.mean("gpu_busy_ns") / 1e3,
        "gpu_idle_share": att.idle_share,
        "kernels_per_forward": att.mean("kernels"),
        "layer_sum_over_busy": att.layer_gpu_sum_ns() / att.mean("gpu_busy_ns") if att.forwards else None,
        "clock": clock,
    }


def write_outputs(out_dir: Path, name: str, trace: GpuTrace, att: GpuAttribution, clock: dict[str, Any]) -> list[Path]:
    """<name>.metrics.json, <name>.kernels.json and, when the clock is aligned, <name>.records.jsonl."""
    met = metrics_path(out_dir, name)
    metric_tables(att).save(met)
    kern = out_dir / f"{name}.kernels.json"
    atomic_write_text(kern, json.dumps({"layers": layer_kernels(att)}, indent=1))
    paths = [met, kern]
    if clock["offset_ns"] is not None:
        rec = records_path(out_dir, name)
        write_records(rec, spans(trace, clock["offset_ns"]))
        paths.append(rec)
    return paths
