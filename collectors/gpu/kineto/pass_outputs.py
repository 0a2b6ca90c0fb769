"""The GPU trace pass's outputs from a parsed trace and its attribution: per-layer metrics, the
kernels of each layer, and spans on the run's clock (every GPU activity of the profiled window on its
stream's track under stage and layer slices, launches on the launching thread: gpu_spans.py).

Clock: Kineto stamps CPU and GPU events on one clock (CUPTI converts GPU timestamps to it). That
clock is mapped onto CLOCK_MONOTONIC by the `forward` ranges: each was opened right after hwprof's
forward stage marker, so marker time - range time is the offset, one value per forward; the median
is used and the spread (largest distance from the median) is recorded as the alignment error.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from hwprof.collectors.gpu.kineto.attribution import OUTSIDE, GpuAttribution
from hwprof.collectors.gpu.kineto.gpu_spans import gpu_spans
from hwprof.collectors.gpu.kineto.trace import GpuTrace

from hwprof.core.atomic import atomic_write_text
from hwprof.schema.gpu_files import KinetoKernel, layer_kernels_json
from hwprof.schema.records import MetricTables, Span, metrics_path, records_path, write_records
from hwprof.schema.summaries_gpu import GpuKinetoSummary, KinetoClock


def clock_offset(trace: GpuTrace, marker_ns: list[int]) -> KinetoClock:
    """mono = kineto + offset_ns, from the forward ranges against the forward markers (same order)."""
    pairs = list(zip(marker_ns, (f.ts for f in trace.forwards), strict=False))
    if not pairs:
        return KinetoClock.of(offset_ns=None, error_ns=None, method="no forward range to align")
    diffs = [m - k for m, k in pairs]
    mid = int(statistics.median(diffs))
    return KinetoClock.of(
        offset_ns=mid,
        error_ns=max(abs(d - mid) for d in diffs),
        pairs=len(pairs),
        method="median of (forward stage marker - Kineto 'forward' range begin); error: largest distance from it",
    )


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


def layer_kernels(att: GpuAttribution) -> dict[str, list[KinetoKernel]]:
    return {
        row.layer: [
            KinetoKernel.of(name=k.name, cat=k.cat, gpu_us=k.gpu_ns / 1e3, calls=k.calls) for k in row.kernel_rows
        ]
        for row in att.layers
    }


def spans(trace: GpuTrace, offset_ns: int) -> list[Span]:
    """Every GPU activity of the trace on its stream's track under its stage and layer slices, and its
    launch on the launching thread with a flow to it (gpu_spans.py)."""
    return gpu_spans(trace, offset_ns)


def run_summary(trace: GpuTrace, att: GpuAttribution, clock: KinetoClock) -> GpuKinetoSummary:
    """gpu_kineto's summary in run.json (`clock` from clock_offset, or the importer's)."""
    return GpuKinetoSummary.of(
        device=trace.device_name,
        forwards=len(att.forwards),
        forward_cpu_us=att.mean("cpu_ns") / 1e3,
        gpu_busy_us=att.mean("gpu_busy_ns") / 1e3,
        gpu_idle_share=att.idle_share,
        kernels_per_forward=att.mean("kernels"),
        layer_sum_over_busy=att.layer_gpu_sum_ns() / att.mean("gpu_busy_ns") if att.forwards else None,
        clock=clock,
    )


def write_outputs(out_dir: Path, name: str, trace: GpuTrace, att: GpuAttribution, clock: KinetoClock) -> list[Path]:
    """<name>.metrics.json, <name>.kernels.json and, when the clock is aligned, <name>.records.jsonl."""
    met = metrics_path(out_dir, name)
    metric_tables(att).save(met)
    kern = out_dir / f"{name}.kernels.json"
    atomic_write_text(kern, json.dumps(layer_kernels_json(layer_kernels(att)), indent=1))
    paths = [met, kern]
    if clock.offset_ns is not None:
        rec = records_path(out_dir, name)
        write_records(rec, spans(trace, int(clock.offset_ns)))
        paths.append(rec)
    return paths
