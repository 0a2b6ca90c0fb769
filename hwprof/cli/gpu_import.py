"""The `hwprof gpu-import` command's options and output (the import itself is hwprof.gpu.importer)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

if TYPE_CHECKING:
    from hwprof.schema.codec import JsonObject
    from hwprof.schema.gpu_import import KinetoImport, NcuImport, NvmlImport


def add_gpu_import_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kineto",
        type=Path,
        action="append",
        default=[],
        help="torch.profiler chrome trace with CUDA activities (repeatable)",
    )
    p.add_argument("--ncu", type=Path, help="ncu --csv --page raw, kernel replay, under NVTX layer ranges")
    p.add_argument(
        "--ncu-app-range", type=Path, help="ncu --csv --page raw, --replay-mode app-range over the layer ranges"
    )
    p.add_argument("--peaks", type=Path, help="measured GPU peaks: gpu_results.json or hwprof's GPU peaks cache file")
    p.add_argument("--nvml", type=Path, help="NVML samples (nvml_samples.json.gz)")
    p.add_argument("--bench", type=Path, help="with --nvml: gpu_results.json whose bench windows get their energy")
    p.add_argument(
        "--launches",
        choices=("runtime+driver", "runtime"),
        default="runtime+driver",
        help="CPU calls that count as launches (runtime: cudaLaunchKernel alone, as gpu_record.py counted)",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="also write a run directory (run.json, per-pass outputs, layers.csv, summary.json, trace.pftrace) "
        "from one --kineto trace and the other files, for hwprof report / trace / compare",
    )
    p.add_argument("--model", help="with --out: the model's name in the run (default: the --kineto file's name)")
    p.add_argument(
        "--experiments",
        type=Path,
        help="with --out: gpu_experiments.json (eager vs CUDA graph, precisions, layouts, batches), copied into the "
        "run with --compile-experiments; the run's advice.json is the advice table they give",
    )
    p.add_argument("--compile-experiments", type=Path, help="with --out: gpu_compile.json (torch.compile vs eager)")
    p.add_argument("--batch", type=int, default=1, help="with --out: the batch of the recorded forwards")
    p.add_argument(
        "--precision",
        choices=("fp32", "fp16", "bf16"),
        help="with --out: the recorded forwards' precision (default: from the --kineto file's name, e.g. _fp32)",
    )
    p.add_argument("--channels-last", action="store_true", help="with --out: the recorded forwards ran channels_last")
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--format", choices=("rich", "json"), default="rich")


def run_gpu_import(args: argparse.Namespace, console: Console) -> int:
    from hwprof.gpu.importer import import_kineto, import_ncu, import_nvml, peaks_from_results

    if not (args.kineto or args.ncu or args.ncu_app_range or args.nvml):
        raise ValueError("give at least one of --kineto, --ncu, --ncu-app-range, --nvml")
    recorded = [args.experiments, args.compile_experiments]
    for path in [*args.kineto, args.ncu, args.ncu_app_range, args.peaks, args.nvml, args.bench, *recorded]:
        if path is not None and not path.is_file():
            raise ValueError(f"{path}: no such file")
    if args.out is not None and len(args.kineto) != 1:
        raise ValueError("--out needs exactly one --kineto trace: the run's clock, markers and layers come from it")
    cats = ("cuda_runtime",) if args.launches == "runtime" else None
    kineto = [import_kineto(p, cats) for p in args.kineto]
    ncu = nvml = None
    if args.ncu or args.ncu_app_range:
        peaks = peaks_from_results(args.peaks) if args.peaks else None
        ncu = import_ncu(args.ncu, args.ncu_app_range, peaks, kineto)
    if args.nvml:
        nvml = import_nvml(args.nvml, args.bench)
    if args.format == "json":
        console.print_json(json.dumps(imports_json(kineto, ncu, nvml), default=str))
    else:
        _print_tables(console, kineto, ncu, nvml, args.top)
    if args.out is not None:
        write_run(args, cats, console)
    return 0


def write_run(args: argparse.Namespace, cats: tuple[str, ...] | None, console: Console) -> None:
    """The run directory of --out, finished as a collect finishes one: run.json's summaries, the exports and
    the trace."""
    from hwprof.gpu.rundir import ImportSources, write_import_run, write_recorded_advice
    from hwprof.session.finish import finalize, write_final_exports, write_trace

    src = ImportSources(
        args.kineto[0],
        args.ncu,
        args.ncu_app_range,
        args.peaks,
        args.nvml,
        args.bench,
        args.model,
        cats,
        args.experiments,
        args.compile_experiments,
        args.batch,
        args.precision,
        args.channels_last,
    )
    run = write_import_run(src, args.out, ["hwprof", *getattr(args, "argv", [])])
    data = finalize(args.out, run)
    if src.experiments or src.compiled:
        advice = write_recorded_advice(args.out)
        console.print(
            f"advice.json: {len(advice.rows)} rows from the recorded experiments"
            if advice
            else "advice.json not written: the recorded forwards' precision is not known (give --precision)",
            highlight=False,
        )
    write_final_exports(data)  # after advice.json: the exports' analysis reads it
    write_trace(args.out, console, data)
    console.print(
        f"run directory: {args.out} (hwprof report {args.out}; hwprof trace {args.out}; hwprof compare {args.out} "
        "OTHER)",
        highlight=False,
    )


def imports_json(kineto: list[KinetoImport], ncu: NcuImport | None, nvml: NvmlImport | None) -> JsonObject:
    """--format json: the summaries of what was given ("kineto" always, "ncu" and "nvml" where given)."""
    out: JsonObject = {"kineto": [k.to_json() for k in kineto]}
    if ncu is not None:
        out["ncu"] = ncu.to_json()
    if nvml is not None:
        out["nvml"] = nvml.to_json()
    return out


def _print_tables(
    console: Console, kineto: list[KinetoImport], ncu: NcuImport | None, nvml: NvmlImport | None, top: int
) -> None:
    from hwprof.render.gpu.tables import print_kineto, print_ncu, print_nvml

    for summary in kineto:
        print_kineto(console, summary, Path(str(summary.file)).name, top)
    if ncu is not None:
        print_ncu(console, ncu)
    if nvml is not None:
        print_nvml(console, nvml)
