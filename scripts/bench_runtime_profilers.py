"""The cost of each runtime's own profiler, paired inside one process, and its clock alignment.

Two instances of the same runtime on the same exported model, one with its profiler on (ORT's
enable_profiling, OpenVINO's PERF_COUNT with get_profiling_info after every run; for torch, the
layer hooks feeding a marker log) and one without, run alternately in ABBA blocks on the same
batch, so drift and neighbours hit both alike. Reported: median forward with and without, their
ratio, the median of the per-block ratios, and the profiled instance's clock check.

    python scripts/bench_runtime_profilers.py --models yolov7,yolov8n --imgsz 640 --threads 2 --blocks 10
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from hwprof.core.config import RunConfig
from hwprof.core.runtime_names import RUNTIME_PRECISIONS


def _timed(runtime: Any, batch: Any, iteration: int) -> float:
    t0 = time.perf_counter_ns()
    runtime.run(batch, iteration, False)
    return (time.perf_counter_ns() - t0) / 1e6


def paired(model: str, runtime_name: str, precision: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import torch

    from hwprof.core.markers import MarkerBus, MarkerLog, attach_layer_markers
    from hwprof.workload.runtimes import make_runtime
    from hwprof.workload.zoo import build_model

    torch.set_num_threads(args.threads)
    config = RunConfig(model=model, runtime=runtime_name, precision=precision, imgsz=args.imgsz, threads=args.threads)
    built = build_model(model)
    batch = torch.rand(1, 3, args.imgsz, args.imgsz)
    instances = {}
    for profiled in (False, True):
        out = work / f"{model}-{runtime_name}-{precision}-{'on' if profiled else 'off'}"
        out.mkdir(parents=True, exist_ok=True)
        instances[profiled] = make_runtime(config, built, work, out, profile=profiled)
        instances[profiled].prepare(batch)
    remove_hooks = None
    if runtime_name == "torch":
        # torch's per-layer view in the layers pass is the forward hooks; toggled around its runs
        bus = MarkerBus()
        bus.subscribe(MarkerLog())
    times: dict[bool, list[float]] = {False: [], True: []}
    ratios = []
    for i in range(args.warmup + args.blocks):
        block: dict[bool, list[float]] = {False: [], True: []}
        for profiled in (False, True, True, False):
            if runtime_name == "torch" and profiled:
                remove_hooks = attach_layer_markers(built.module, bus)
            block[profiled].append(_timed(instances[profiled], batch, i))
            if remove_hooks is not None:
                remove_hooks()
                remove_hooks = None
        if i >= args.warmup:
            for k in (False, True):
                times[k] += block[k]
            ratios.append(statistics.fmean(block[True]) / statistics.fmean(block[False]))
    off, on = statistics.median(times[False]), statistics.median(times[True])
    profile = instances[True].finish()
    clock = profile.clock.to_json() if profile is not None else {}
    return {
        "model": model,
        "runtime": runtime_name,
        "precision": precision,
        "executed_precision": instances[True].info.executed_precision,
        "off_p50_ms": off,
        "on_p50_ms": on,
        "ratio_of_medians": on / off,
        "median_block_ratio": statistics.median(ratios),
        "blocks": args.blocks,
        "clock": clock,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="yolov7,yolov8n")
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("results/bench-runtime-profilers.json"))
    args = parser.parse_args()
    console = Console()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in [m for m in args.models.split(",") if m]:
            for runtime_name, precisions in RUNTIME_PRECISIONS.items():
                for precision in precisions:
                    console.print(f"[dim]{model} {runtime_name} {precision}[/dim]")
                    rows.append(paired(model, runtime_name, precision, args, Path(tmp)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1, default=str))
    table = Table(title="runtime profilers: forward with / without, paired ABBA in one process", title_justify="left")
    for col in ("model", "runtime", "precision", "off p50 ms", "on p50 ms", "on/off", "block ratio p50", "clock µs"):
        table.add_column(col, justify="left" if col in ("model", "runtime", "precision") else "right")
    for r in rows:
        bound = r["clock"].get("error_bound_us")
        table.add_row(
            r["model"],
            r["runtime"],
            str(r["executed_precision"]),
            f"{r['off_p50_ms']:.1f}",
            f"{r['on_p50_ms']:.1f}",
            f"{r['ratio_of_medians']:.3f}",
            f"{r['median_block_ratio']:.3f}",
            f"{bound:.0f}" if bound is not None else "-",
        )
    console.print(table)
    console.print(
        "clock µs = the alignment error bound of the profiled instance (ORT: how far a model_run leaves "
        "its run() call; OpenVINO: |call time - sum of node times|); torch: hooks, no foreign clock"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
