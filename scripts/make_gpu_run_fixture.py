"""Regenerate tests/fixtures/gpu_run_yolov8n: the run directory `hwprof gpu-import --out` makes from the H100
recordings of yolov8n fp32 640 (recordings/h100-2026-11-22, as subset in tests/fixtures/gpu: the Kineto trace
cut to its first two forwards, both Nsight Compute CSVs, the peaks and benchmark windows of gpu_results.json,
the NVML samples, gpu_experiments.json and gpu_compile.json, from which advice.json). The trace.pftrace is
left out (`hwprof trace` rebuilds it in a second).

Run from the repository root: .venv/bin/python scripts/make_gpu_run_fixture.py
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from hwprof.cli.main import main

GPU = Path("tests/fixtures/gpu")
OUT = Path("tests/fixtures/gpu_run_yolov8n")
ARGS = [
    "gpu-import",
    "--kineto",
    str(GPU / "kineto_yolov8n_640_fp32.2fwd.json.gz"),
    "--ncu",
    str(GPU / "ncu_yolov8n_640_fp32.csv.gz"),
    "--ncu-app-range",
    str(GPU / "ncu_app-range_yolov8n_640_fp32.csv.gz"),
    "--peaks",
    str(GPU / "gpu_results.subset.json"),
    "--nvml",
    str(GPU / "nvml_samples.json.gz"),
    "--bench",
    str(GPU / "gpu_results.subset.json"),
    "--experiments",
    str(GPU / "gpu_experiments.json"),
    "--compile-experiments",
    str(GPU / "gpu_compile.json"),
    "--model",
    "yolov8n",
]


def make(out: Path) -> int:
    """Write the fixture run into `out` (replaced), without its trace.pftrace."""
    if out.exists():
        shutil.rmtree(out)
    code = main([*ARGS, "--out", str(out)])
    (out / "trace.pftrace").unlink(missing_ok=True)
    return code


if __name__ == "__main__":
    sys.exit(make(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT))
