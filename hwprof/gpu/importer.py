"""`hwprof gpu-import`: recorded GPU data (a torch.profiler CUDA trace, Nsight Compute CSVs, NVML
samples, measured peaks) turned into hwprof's GPU tables, without a GPU.

The same functions serve the live GPU collectors (collectors/gpu/), so a recording and a live run
give the same tables.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.analysis.gpu.kernels import class_shares, launch_fill, tensor_core_by_counter
from hwprof.analysis.gpu.roofline import NO_WARM_TIME, GpuRoof, roofline_rows, roofline_summary
from hwprof.schema.gpu_files import KinetoKernel, NcuKernel
from hwprof.schema.gpu_import import (
    GpuRecording,
    KernelClassRow,
    KinetoImport,
    KinetoImportLayer,
    LaunchFillDoc,
    NcuImport,
    NvmlImport,
    NvmlWindow,
    RoofRowDoc,
    TensorCoreDoc,
)
from hwprof.schema.ncu_tensor import TENSOR_MATH_FIX
from hwprof.session.registry import gpu_parsers

if TYPE_CHECKING:
    from hwprof.session.registry import GpuAttribution, NcuReport

TOP_LAYERS = 5
TOP_KERNELS = 3
RECORDED_BENCH_ITERS = 150
"""gpu_record.py's main() times 150 inferences per benchmark row (its rows do not say)."""


def kineto_summary(att: GpuAttribution, top: int = TOP_LAYERS) -> KinetoImport:
    busy = att.mean("gpu_busy_ns")
    kernel_rows = [(k.name, k.gpu_ns, k.calls) for row in att.layers for k in row.kernel_rows]
    return KinetoImport.of(
        forwards=len(att.forwards),
        cpu_us=att.mean("cpu_ns") / 1e3,
        gpu_busy_us=busy / 1e3,
        gpu_sum_us=att.mean("gpu_sum_ns") / 1e3,
        window_us=att.mean("window_ns") / 1e3,
        kernels=att.mean("kernels"),
        idle_share=att.idle_share,
        first_kernel_delay_us=att.mean("first_kernel_delay_ns") / 1e3,
        layer_sum_over_busy=att.layer_gpu_sum_ns() / busy if busy else None,
        layers=[
            KinetoImportLayer.of(
                layer=r.layer,
                type=r.type,
                gpu_us=r.gpu_ns / 1e3,
                kernels=r.kernels,
                cpu_us=r.cpu_ns / 1e3,
                launch_us=r.launch_ns / 1e3,
                api_us=r.api_ns / 1e3,
                top_kernels=[
                    KinetoKernel.of(name=k.name, gpu_us=k.gpu_ns / 1e3, calls=k.calls)
                    for k in r.kernel_rows[:TOP_KERNELS]
                ],
            )
            for r in att.layers
        ],
        top_layers=[r.layer for r in att.top(top)],
        kernel_classes=[
            KernelClassRow.of(cls=c.cls, gpu_us=c.gpu_ns / 1e3, kernels=c.kernels, share=c.share, top=c.top)
            for c in class_shares(kernel_rows, att.mean("gpu_sum_ns"))
        ],
    )


def import_kineto(path: Path, launch_cats: tuple[str, ...] | None = None) -> KinetoImport:
    parsers = gpu_parsers()
    trace = parsers.load_gpu_trace(path)
    att = parsers.attribute(trace) if launch_cats is None else parsers.attribute(trace, launch_cats)
    out = kineto_summary(att)
    out.update(file=str(path), device=trace.device_name, unmatched_launch_calls=att.unmatched_launches)
    return out


def peaks_from_results(path: Path) -> dict[str, float]:
    """The `peaks` object of a gpu_results.json recording (or of hwprof's GPU peaks cache)."""
    return GpuRecording.load(path).peak_table()


def _warm_times(reports: list[NcuReport], kineto: list[KinetoImport]) -> tuple[dict[str, float], str]:
    """Per-layer kernel time (ns per forward) of the one Kineto summary whose layers are the ncu layers
    (same indices and types), for the roofline's warm points; else none, and why."""
    types = {
        gpu_parsers().ncu_layer_key(w[0]): w[1] for rep in reports for row in rep.rows if (w := row.layer) is not None
    }
    matching = [
        k for k in kineto if types and all(types[key] == {r.layer: r.type for r in k.layers}.get(key) for key in types)
    ]
    if len(matching) != 1:
        return {}, (
            f"warm kernel time: {NO_WARM_TIME} (--kineto traces with the ncu layers' indices and types: "
            f"{len(matching)}; one needed)"
        )
    return {r.layer: r.gpu_us * 1e3 for r in matching[0].layers}, f"warm time: {matching[0].file}"


def import_ncu(
    kernel_csv: Path | None,
    range_csv: Path | None,
    peaks: dict[str, float] | None,
    kineto: list[KinetoImport] | None = None,
) -> NcuImport:
    """kineto: import_kineto summaries; the one of the same model gives the warm points their time."""
    parsers = gpu_parsers()
    kernel = parsers.load_ncu_csv(kernel_csv) if kernel_csv else None
    app_range = parsers.load_ncu_csv(range_csv) if range_csv else None
    tables, kernels = parsers.ncu_layer_tables(kernel, app_range)
    where = str(kernel_csv or range_csv)
    all_kernels = [NcuKernel.from_json(k, where) for rows in kernels.values() for k in rows]
    fill = launch_fill(all_kernels)
    types = {
        parsers.ncu_layer_key(row.layer[0]): row.layer[1]
        for report in (kernel, app_range)
        if report is not None
        for row in report.rows
        if row.layer is not None
    }
    tensor_cores = tensor_core_by_counter(all_kernels, TENSOR_MATH_FIX).to_dict()
    out = NcuImport.of(
        layers=tables.layers,
        types=types,
        units=tables.units,
        methods=tables.methods,
        kernels=kernels,
        tensor_cores=TensorCoreDoc.from_json(tensor_cores, where, "tensor_cores."),
        launch_fill=LaunchFillDoc.from_json(asdict(fill), where, "launch_fill.") if fill is not None else None,
    )
    if peaks:
        roof = GpuRoof(peaks["matmul_fp32_tflops"], peaks["d2d_copy_gbps_read_plus_write"])
        warm_ns, warm_time = _warm_times([r for r in (kernel, app_range) if r], kineto or [])
        rows = roofline_rows(tables.layers, roof, warm_ns)
        out.update(
            warm_time=warm_time,
            roofline=[
                RoofRowDoc.from_json(asdict(r) | {"lower_bound": r.lower_bound}, where, f"roofline.{i}.")
                for i, r in enumerate(rows)
            ],
            roofline_summary=roofline_summary(rows, roof).to_dict(),
            peaks=peaks,
        )
    return out


def import_nvml(path: Path, results: Path | None) -> NvmlImport:
    """Series summary, and energy per inference over each recorded benchmark window (gpu_results.json's
    `bench` rows: window_ns on CLOCK_MONOTONIC and the iterations), beside the recording's own figure."""
    parsers = gpu_parsers()
    recorded = GpuRecording.load(results) if results is not None else GpuRecording()
    cc = recorded.device.cc
    series = parsers.nvml_series.load(path, parsers.nvml_power_average_s(cc) if cc else None)
    times = series.times
    out = NvmlImport.of(
        file=str(path),
        samples=len(series.samples),
        columns=series.columns,
        span_s=(times[-1] - times[0]) / 1e9 if times else 0.0,
        power_average_s=series.power_average_s,
        power_average_source=f"compute capability {cc} (NVML reference)"
        if cc
        else "unknown device: taken as instantaneous",
        windows=[],
    )
    for bench in recorded.bench if recorded else []:
        begin, end = bench.window_ns
        try:
            joules, method = series.energy_j(begin, end)
        except ValueError as exc:
            out.windows.append(NvmlWindow.of(model=bench.model, precision=bench.precision, unavailable=str(exc)))
            continue
        iters = int(bench.iters if bench.iters is not None else RECORDED_BENCH_ITERS)
        out.windows.append(
            NvmlWindow.of(
                model=bench.model,
                precision=bench.precision,
                j_per_inference=joules / iters,
                power_w=joules / ((end - begin) / 1e9),
                method=method,
                recorded_j_per_inference=bench.joules_per_inference,
                means=series.window_means(begin, end),
            )
        )
    return out
