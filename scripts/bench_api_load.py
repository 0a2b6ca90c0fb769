#!/usr/bin/env python3
"""Time hwprof as a library on a run directory: `import hwprof`, `hwprof.load` (read and analyse), and each of the
report's tables as a polars DataFrame (issue 40's target: a default yolov7 run into DataFrames well under a second).

    python scripts/bench_api_load.py RUN_DIR        # an existing run (a default one: hwprof collect --model yolov7)
    python scripts/bench_api_load.py                # collect a small one first (yolov8n at 160, 3 iterations)
    python scripts/bench_api_load.py RUN_DIR --repeat 5

Each figure is measured in a fresh process (the imports are part of what a notebook pays once), --repeat times;
the best and the median are printed, with the host's load average beside them (timings on a shared host are
noisy). The first load of a process also imports polars and the analysis: "load+tables" is what
`hwprof.load(path).layers ...` costs in a new notebook, "again" a second run loaded in the same process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MEASURE = r"""
import json, sys, time
t0 = time.perf_counter()
import hwprof
t1 = time.perf_counter()
run = hwprof.load(sys.argv[1])
t2 = time.perf_counter()
sizes = {}
for name in ("stages", "layers", "types", "kernels", "model_kernels", "aten_kernels", "roofline", "pass_costs",
             "findings", "advice"):
    frame = getattr(run, name)
    sizes[name] = None if frame is None else list(frame.shape)
t3 = time.perf_counter()
again = hwprof.load(sys.argv[1])
for name in sizes:
    getattr(again, name)
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "tables": t3 - t2, "load_tables": t3 - t1,
                  "again": t4 - t3, "sizes": sizes, "model": run.model.name, "layers": run.layers.height}))
"""

FIGURES = ("import", "load", "tables", "load_tables", "again")


def small_run(folder: Path) -> Path:
    out = folder / "bench-yolov8n"
    cmd = [sys.executable, "-m", "hwprof", "collect", "--model", "yolov8n", "--imgsz", "160", "--iters", "3"]
    cmd += ["--warmup", "1", "--out", str(out), "--no-report"]
    print("collecting:", " ".join(cmd[2:]), flush=True)
    subprocess.run(cmd, check=True)
    return out


def measure(run_dir: Path) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", MEASURE, str(run_dir)], capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", nargs="?", type=Path, help="a run directory (default: collect a small one)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-api-") as tmp:
        run_dir = args.run_dir or small_run(Path(tmp))
        results = [measure(run_dir) for _ in range(args.repeat)]
    first = results[0]
    print(f"run {run_dir}: {first['model']}, {first['layers']} layers; table shapes {first['sizes']}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.repeat} fresh processes")
    for name in FIGURES:
        values = [float(r[name]) for r in results]  # type: ignore[arg-type]
        print(f"  {name:12s} best {min(values) * 1e3:8.1f} ms   median {statistics.median(values) * 1e3:8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
