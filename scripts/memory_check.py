#!/usr/bin/env python
"""hwprof's memory per forward against torch.profiler's own figures on the same model, run separately.

A run directory's trace pass gives the forward's bytes allocated and freed and its peak of live tensor bytes
(collectors/torch_profiler/memory.py, from the allocator's events inside the forward's range). This script builds
the run's model (its config: model, imgsz, batch, threads), profiles N forwards in its own process with
torch.profiler(profile_memory=True) inside a `forward` record_function, and prints, per forward, what torch's
own figures say: the range's CPU memory usage (torch's net allocated bytes inside it, from key_averages), and
from its own chrome trace the bytes its "[memory]" events allocated inside the range and their highest "Total
Allocated", beside the run's figures (the model's output lives past the range in hwprof's pipeline, not here).

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
    nets, allocs, peaks = [], [], []
    with torch.inference_mode():
        model(x)
        for k in range(forwards):
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof, record_function("forward"):
                out = model(x)
            (fwd,) = [e for e in prof.key_averages() if e.key == "forward"]
            nets.append(float(fwd.cpu_memory_usage))
            path = work / f"forward{k}.json"
            prof.export_chrome_trace(str(path))
            allocated, peak = _inside_forward(json.loads(path.read_text())["traceEvents"])
            allocs.append(allocated)
            peaks.append(peak)
            del out
    return {
        "net_bytes": statistics.median(nets),
        "alloc_bytes": statistics.median(allocs),
        "peak_bytes": statistics.median(peaks),
    }


def _inside_forward(events: list[dict]) -> tuple[float, float]:  # type: ignore[type-arg]
    """Bytes allocated and the highest live bytes of torch's own "[memory]" events inside the forward's range."""
    (rng,) = [e for e in events if e.get("name") == "forward" and e.get("ph") == "X"]
    start, end = rng["ts"], rng["ts"] + rng["dur"]
    inside = [e["args"] for e in events if e.get("name") == "[memory]" and start <= e["ts"] <= end]
    allocated = sum(a["Bytes"] for a in inside if a["Bytes"] > 0)
    return float(allocated), float(max((a["Total Allocated"] for a in inside), default=0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--forwards", type=int, default=5)
    args = parser.parse_args(argv)
    metrics = json.loads((args.run_dir / "passes" / "trace" / "torch_profiler.metrics.json").read_text())
    forward = metrics["stages"].get("forward", {})
    if "mem_alloc_bytes" not in forward:
        print(f"{args.run_dir}: its trace pass has no allocator figures (collected without profile_memory)")
        return 1
    ours_net = forward["mem_alloc_bytes"] - forward.get("mem_freed_bytes", 0.0)
    with tempfile.TemporaryDirectory() as work:
        theirs = torch_figures(args.run_dir, args.forwards, Path(work))
    print(
        f"hwprof (trace pass): allocated {forward['mem_alloc_bytes'] / 1e6:.2f} MB, freed "
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
