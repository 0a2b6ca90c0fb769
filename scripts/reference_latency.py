"""The forward latency of a run's model measured by the runtimes' own tools, to hold hwprof's advice table against.

For a finished run (its config, images and saved init scales: the same model to the bit) this measures, on the
run's threads and its first letterboxed batch:
- torch with `torch.utils.benchmark.Timer.blocked_autorange` (its own statistics, `num_threads` set): fp32 NCHW,
  fp32 channels_last, bf16 autocast NCHW and channels_last, bf16 weights with channels_last;
- OpenVINO with its own `benchmark_app` on the run's ONNX file (exported here the way hwprof exports it):
  f32 and bf16 inference precision, one stream, synchronous, the run's threads, `-hint none`.

bf16 rows are measured whatever the host; the host line says which units it has (a bf16 row on a host without
AVX512-BF16 or AMX is emulated, and slow). Prints one table with each row's speed-up over torch fp32 NCHW.

    python scripts/reference_latency.py --run runs/tiny320 --seconds 10
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from hwprof.core.config import RunConfig

PLAIN = "with torch.inference_mode():\n    m(x)"
AUTOCAST = "with torch.inference_mode(), torch.autocast('cpu', dtype=torch.bfloat16):\n    m(x)"
MEDIAN = re.compile(r"Median:\s+([0-9.]+)\s*ms")


@dataclass
class Row:
    what: str
    tool: str
    median_ms: float | None
    note: str = ""


def torch_rows(
    config: RunConfig, images: list[Path], run_dir: Path, seconds: float
) -> tuple[list[Row], tuple[torch.nn.Module, torch.Tensor]]:
    """Each torch row timed by torch.utils.benchmark; the fp32 module and its input, for the export."""
    import torch
    import torch.utils.benchmark as benchmark

    from hwprof.workload.init_scale import build_for_run, calibration_batch

    torch.set_num_threads(config.threads)
    built = build_for_run(config, images, run_dir)
    sample, _ = calibration_batch(config, images, built)
    sample = sample.repeat(config.batch, 1, 1, 1)
    module = built.module.eval()
    cl_module = _copy(module).to(memory_format=torch.channels_last)
    cl_sample = sample.contiguous(memory_format=torch.channels_last)
    bf16_module = _copy(module).to(torch.bfloat16).to(memory_format=torch.channels_last)
    bf16_sample = cl_sample.to(torch.bfloat16)
    cases = [
        ("torch fp32 NCHW", PLAIN, module, sample),
        ("torch fp32 channels_last", PLAIN, cl_module, cl_sample),
        ("torch autocast bf16 NCHW", AUTOCAST, module, sample),
        ("torch autocast bf16 channels_last", AUTOCAST, cl_module, cl_sample),
        ("torch bf16 weights channels_last", PLAIN, bf16_module, bf16_sample),
    ]
    rows = []
    for what, stmt, m, x in cases:
        timer = benchmark.Timer(stmt=stmt, globals={"m": m, "x": x, "torch": torch}, num_threads=config.threads)
        timer.timeit(3)  # oneDNN's primitives made before the timing
        measured = timer.blocked_autorange(min_run_time=seconds)
        rows.append(Row(what, "torch.utils.benchmark", measured.median * 1e3, f"{len(measured.times)} blocks"))
    return rows, (module, sample)


def _copy(module: torch.nn.Module) -> torch.nn.Module:
    import copy

    return copy.deepcopy(module)


def openvino_rows(
    model_and_sample: tuple[torch.nn.Module, torch.Tensor], config: RunConfig, seconds: float
) -> list[Row]:
    """benchmark_app's median latency on the model exported as hwprof exports it, f32 and bf16."""
    from hwprof.workload.onnx_export import export_onnx

    module, sample = model_and_sample
    tool = Path(sys.executable).with_name("benchmark_app")
    rows = []
    with tempfile.TemporaryDirectory(prefix="hwprof-reference-") as tmp:
        exported = export_onnx(module, sample, Path(tmp), config.model)
        onnx = Path(tmp) / exported.path
        for precision in ("f32", "bf16"):
            command = [str(tool), "-m", str(onnx), "-d", "CPU", "-api", "sync", "-nstreams", "1", "-hint", "none"]
            command += ["-nthreads", str(config.threads), "-infer_precision", precision, "-t", str(int(seconds))]
            proc = subprocess.run(command, capture_output=True, text=True)
            found = MEDIAN.findall(proc.stdout)
            if proc.returncode != 0 or not found:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                rows.append(Row(f"OpenVINO {precision}", "benchmark_app", None, f"failed: {tail[0]}"))
                continue
            rows.append(Row(f"OpenVINO {precision}", "benchmark_app", float(found[-1]), "sync, 1 stream"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="a finished run directory")
    parser.add_argument("--seconds", type=float, default=10.0, help="time per row")
    args = parser.parse_args()

    from hwprof.core.host import cpu_flags, cpu_model
    from hwprof.core.isa_units import units_text
    from hwprof.rundir.worker_files import read_config, read_image_paths

    config = read_config(args.run)
    images = read_image_paths(args.run)
    print(f"host: {cpu_model()}; {units_text(sorted(cpu_flags()))}")
    print(f"model {config.model} at {config.imgsz}, batch {config.batch}, {config.threads} threads")
    rows, model_and_sample = torch_rows(config, images, args.run, args.seconds)
    rows += openvino_rows(model_and_sample, config, args.seconds)
    base = rows[0].median_ms
    print(f"{'what':<36} {'tool':<22} {'median ms':>10} {'vs fp32':>8}  note")
    for row in rows:
        ms = f"{row.median_ms:10.2f}" if row.median_ms is not None else f"{'-':>10}"
        ratio = f"{base / row.median_ms:7.2f}x" if base and row.median_ms else f"{'-':>8}"
        print(f"{row.what:<36} {row.tool:<22} {ms} {ratio}  {row.note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
