"""Forward latency of each runtime and precision, layer by layer against torch fp32, and the cost of
each runtime's own profiler.

For every model and every (runtime, precision) pair it runs `hwprof collect --only timing,flops`:
the timing pass is the clean latency (no profiler), the layers pass runs the same runtime with its
profiler on (ORT's enable_profiling, OpenVINO's PERF_COUNT; torch's forward hooks), so the layers
pass's forward p50 over the timing pass's is that profiler's cost, measured in one run.

    python scripts/bench_runtimes.py --models yolov7,yolov8n --imgsz 640 --threads 2
    python scripts/bench_runtimes.py --reuse results/bench-runtimes   # re-read runs already collected

Writes results/bench-runtimes/bench_runtimes.json and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from hwprof.core.runtime_names import RUNTIME_PRECISIONS

TOP_LAYERS = 5


def collect(model: str, runtime: str, precision: str, args: argparse.Namespace, out: Path) -> bool:
    if (out / "run.json").exists() and json.loads((out / "run.json").read_text()).get("status") == "complete":
        return True
    command = [sys.executable, "-m", "hwprof", "collect", "--model", model, "--runtime", runtime]
    command += ["--precision", precision, "--imgsz", str(args.imgsz), "--threads", str(args.threads)]
    command += ["--iters", str(args.iters), "--warmup", str(args.warmup), "--only", "timing,flops"]
    command += ["--no-report", "--out", str(out)]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"{out.name}: collect failed: {(proc.stdout + proc.stderr).strip().splitlines()[-1:]}", file=sys.stderr)
    return proc.returncode == 0


def summarize(run_dir: Path) -> dict[str, Any]:
    from hwprof.analysis.run_analysis import analyse
    from hwprof.core.spans import forward_p50_ms
    from hwprof.rundir.reader import RunData

    data = RunData.load(run_dir)
    a = analyse(data)
    info = data.run.get("runtime", {})
    timing = forward_p50_ms(data.markers("timing"))
    profiled = forward_p50_ms(data.markers("layers")) if "layers" in data.pass_names else None
    clock = info.get("profiled_passes", {}).get("layers", {}).get("clock", {})
    return {
        "run": str(run_dir),
        "runtime": info.get("name"),
        "precision": info.get("precision"),
        "executed_precision": info.get("executed_precision"),
        "forward_p50_ms": timing,
        "profiled_forward_p50_ms": profiled,
        "profiler_cost": profiled / timing if profiled and timing else None,
        "clock_error_bound_us": clock.get("error_bound_us"),
        "clock": clock,
        "output_diff": info.get("output_diff", {}),
        "layers": {layer.name: layer.time_ms for layer in a.layers.top_level if layer.time_ms},
        "types": {layer.name: layer.type for layer in a.layers.top_level},
        "kernels": {k: v.top_kernel for k, v in (a.runtime.layers.items() if a.runtime else [])},
    }


def layer_changes(base: dict[str, Any], other: dict[str, Any]) -> list[tuple[str, float, float, float]]:
    """(layer, base ms, other ms, speed-up) sorted from the largest speed-up to the largest slow-down."""
    rows = []
    for name, ms in base["layers"].items():
        got = other["layers"].get(name)
        if got:
            rows.append((name, ms, got, ms / got))
    return sorted(rows, key=lambda r: -r[3])


def render(results: dict[str, list[dict[str, Any]]], console: Console) -> None:
    for model, rows in results.items():
        table = Table(title=f"{model}: forward per runtime and precision", title_justify="left")
        for col in (
            "runtime",
            "asked",
            "ran",
            "fwd p50 ms",
            "vs torch fp32",
            "profiled p50",
            "profiler cost",
            "clock error µs",
            "max |Δ| head",
            "detections",
        ):
            table.add_column(col, justify="left" if col in ("runtime", "asked", "ran") else "right")
        base = next((r for r in rows if r["runtime"] == "torch" and r["precision"] == "fp32"), None)
        for r in rows:
            diff = r["output_diff"]
            speed = base["forward_p50_ms"] / r["forward_p50_ms"] if base and r["forward_p50_ms"] else None
            table.add_row(
                r["runtime"],
                r["precision"],
                str(r["executed_precision"]),
                f"{r['forward_p50_ms']:.1f}",
                f"{speed:.2f}x" if speed else "-",
                f"{r['profiled_forward_p50_ms']:.1f}" if r["profiled_forward_p50_ms"] else "-",
                f"{r['profiler_cost']:.3f}" if r["profiler_cost"] else "-",
                f"{r['clock_error_bound_us']:.0f}" if r["clock_error_bound_us"] is not None else "-",
                f"{diff.get('max_abs_head', 0):.3g}",
                f"{diff.get('detections', '-')} vs {diff.get('detections_reference', '-')}"
                if "detections" in diff
                else "ref",
            )
        console.print(table)
        if base is None:
            continue
        for r in rows:
            if r is base:
                continue
            changes = layer_changes(base, r)
            picked = changes[:TOP_LAYERS] + [c for c in changes[-TOP_LAYERS:] if c not in changes[:TOP_LAYERS]]
            t = Table(
                title=f"{model} {r['runtime']} {r['precision']}: layers sped up / slowed down most vs torch fp32",
                title_justify="left",
            )
            for col in ("layer", "type", "torch ms", "ms", "speed-up", "kernel"):
                t.add_column(col, justify="left" if col in ("layer", "type", "kernel") else "right")
            for name, b, o, s in picked:
                t.add_row(
                    name, r["types"].get(name, ""), f"{b:.2f}", f"{o:.2f}", f"{s:.2f}x", r["kernels"].get(name, "")
                )
            console.print(t)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="yolov7,yolov8n")
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("results/bench-runtimes"))
    args = parser.parse_args()
    console = Console()
    results: dict[str, list[dict[str, Any]]] = {}
    for model in [m for m in args.models.split(",") if m]:
        for runtime, precisions in RUNTIME_PRECISIONS.items():
            for precision in precisions:
                out = args.out / f"{model}-{runtime}-{precision}-{args.imgsz}"
                console.print(f"[dim]{out.name}[/dim]")
                if collect(model, runtime, precision, args, out):
                    results.setdefault(model, []).append(summarize(out))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_runtimes.json").write_text(json.dumps(results, indent=1, default=str))
    render(results, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
