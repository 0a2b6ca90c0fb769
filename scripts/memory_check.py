#!/usr/bin/env python
"""hwprof's memory per forward against torch.profiler's own figures on the same model, run separately.

A run directory's layers pass gives the forward's bytes allocated and freed and its peak of live tensor bytes
(collectors/torch_profiler/memory_collector.py, from the allocator's events inside the forward's range, with no
op recorded). This script builds the run's model (its config: model, imgsz, batch, threads), profiles N forwards
in its own process in one torch.profiler(profile_memory=True) session with its ops recorded (a profiler started
anew for each forward reads a higher peak, 30.2 MB against 21.6 on yolov7-tiny at 320; the layers pass starts one
for each stretch of measured iterations between its clean ones), each in a record_function range, and prints
the median per forward of what torch's own figures say: the range's CPU memory usage (torch's net allocated
bytes inside it, from key_averages), and from its own chrome trace the bytes its "[memory]" events allocated
inside the range and their highest "Total Allocated" above the one before it, beside the run's figures.

    python scripts/memory_check.py RUN_DIR [--forwards 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path


def torch_figures(run_dir: Path, forwards: int, work: Path) -> dict[str, float]:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from hwprof.core.config import RunConfig
    from hwprof.workload.zoo import build_model

    config = RunConfig.from_dict(json.loads((run_dir / "config.json").read_text()))
    torch.set_num_threads(config.threads)
    model = build_model(config.model, weights=config.weights, seed=config.seed).module.eval()
    x = torch.rand(config.batch, 3, config.imgsz, config.imgsz)
    with torch.inference_mode():
        model(x)
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            for k in range(forwards):
                with record_function(f"forward{k}"):
                    out = model(x)
                del out
    nets = [float(e.cpu_memory_usage) for e in prof.key_averages() if e.key.startswith("forward")]
    path = work / "forwards.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    figures = [_inside(events, f"forward{k}") for k in range(forwards)]
    return {
        "net_bytes": statistics.median(nets),
        "alloc_bytes": statistics.median(a for a, _ in figures),
        "peak_bytes": statistics.median(p for _, p in figures),
    }


def _inside(events: list[dict], name: str) -> tuple[float, float]:  # type: ignore[type-arg]
    """Bytes allocated by torch's own "[memory]" events inside the range `name`, and their highest "Total
    Allocated" above the one before the range began."""
    memory = [e for e in events if e.get("name") == "[memory]"]
    (rng,) = [e for e in events if e.get("name") == name and e.get("ph") == "X"]
    start, end = rng["ts"], rng["ts"] + rng["dur"]
    before = [e["args"]["Total Allocated"] for e in memory if e["ts"] < start]
    inside = [e["args"] for e in memory if start <= e["ts"] <= end]
    allocated = sum(a["Bytes"] for a in inside if a["Bytes"] > 0)
    base = before[-1] if before else 0
    return float(allocated), float(max((a["Total Allocated"] for a in inside), default=base) - base)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--forwards", type=int, default=5)
    args = parser.parse_args(argv)
    path = args.run_dir / "passes" / "layers" / "torch_memory.metrics.json"
    forward = json.loads(path.read_text())["stages"].get("forward", {}) if path.is_file() else {}
    if "mem_alloc_bytes" not in forward:
        print(f"{args.run_dir}: no allocator figures in its layers pass (torch_memory did not run)")
        return 1
    ours_net = forward["mem_alloc_bytes"] - forward.get("mem_freed_bytes", 0.0)
    with tempfile.TemporaryDirectory() as work:
        theirs = torch_figures(args.run_dir, args.forwards, Path(work))
    print(
        f"hwprof (layers pass): allocated {forward['mem_alloc_bytes'] / 1e6:.2f} MB, freed "
        f"{forward.get('mem_freed_bytes', 0.0) / 1e6:.2f} MB, net {ours_net / 1e6:.3f} MB, peak "
        f"{forward.get('mem_peak_bytes', 0.0) / 1e6:.2f} MB per forward"
    )
    print(
        f"torch.profiler alone ({args.forwards} forwards, median): allocated {theirs['alloc_bytes'] / 1e6:.2f} MB, "
        f"peak {theirs['peak_bytes'] / 1e6:.2f} MB, net (the range's CPU Mem) {theirs['net_bytes'] / 1e6:.3f} MB"
    )
    ratio = forward["mem_alloc_bytes"] / theirs["alloc_bytes"] if theirs["alloc_bytes"] else float("nan")
    peak = forward.get("mem_peak_bytes", 0.0) / theirs["peak_bytes"] if theirs["peak_bytes"] else float("nan")
    print(f"hwprof / torch.profiler: allocated {ratio:.3f}, peak {peak:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
