"""The `hwprof gpu-import` command's options and output (the import itself is hwprof.gpu_import)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console


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
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--format", choices=("rich", "json"), default="rich")


def run_gpu_import(args: argparse.Namespace, console: Console) -> int:
    from hwprof.gpu_import import import_kineto, import_ncu, import_nvml, peaks_from_results
    from hwprof.render.gpu_tables import print_kineto, print_ncu, print_nvml

    if not (args.kineto or args.ncu or args.ncu_app_range or args.nvml):
        raise ValueError("give at least one of --kineto, --ncu, --ncu-app-range, --nvml")
    for path in [*args.kineto, args.ncu, args.ncu_app_range, args.peaks, args.nvml, args.bench]:
        if path is not None and not path.is_file():
            raise ValueError(f"{path}: no such file")
    cats = ("cuda_runtime",) if args.launches == "runtime" else None
    out: dict = {"kineto": [import_kineto(p, cats) for p in args.kineto]}
    if args.ncu or args.ncu_app_range:
        peaks = peaks_from_results(args.peaks) if args.peaks else None
        out["ncu"] = import_ncu(args.ncu, args.ncu_app_range, peaks, out["kineto"])
    if args.nvml:
        out["nvml"] = import_nvml(args.nvml, args.bench)
    if args.format == "json":
        console.print_json(json.dumps(out, default=str))
        return 0
    for summary in out["kineto"]:
        print_kineto(console, summary, Path(summary["file"]).name, args.top)
    if "ncu" in out:
        print_ncu(console, out["ncu"])
    if "nvml" in out:
        print_nvml(console, out["nvml"])
    return 0
