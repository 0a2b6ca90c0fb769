#!/usr/bin/env python
"""A traced model's per-layer times (from torch.profiler's module hierarchy) against the same program untraced,
and the profiler's cost in the iterations that give them.

    python scripts/traced_layers_compare.py --imgsz 128 --iters 20 --out /tmp/traced_cmp

Writes a program (yolov8n built from its YAML with a fixed seed, one random image, called in a loop; traced
with torch.jit.trace unless given --no-trace) and collects it twice:
  traced   hwprof collect --only timing,torch_profiler -- python prog.py
           the layers come from the trace pass: spans made from each op's module hierarchy
  plain    hwprof collect --only timing,perf_events,torch_profiler -- python prog.py --no-trace
           the layers come from the layers pass's markers (as `hwprof collect --model yolov8n`), and the trace
           pass has them too (live ranges under the same profiler)
Per top-level layer it prints its share of the forward (mean over the measured iterations of the layer's self
time over that iteration's forward, from each pass's markers) in the traced trace pass, the plain layers pass
and the plain trace pass, the ratios traced/plain, their medians, and each run's layers.csv time_ms.

The profiler's cost, measured twice: the traced run's trace pass paired cost (ABBA blocks of iterations with the
profiler collecting and not, in one process: hwprof.session.paired), and here, in this process, the traced
forward in ABBA blocks, bare against under torch.profiler (started once, collection toggled as the collector
does), with and without with_modules (the collector records the hierarchies in the warm-up forward alone and
its measured forwards run without: torch_profiler/module_layers.py): the median of the blocks' ratios, in wall
time and in the calling thread's CPU time (the whole forward's with --threads 1, and blind to other processes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hwprof.analysis.layers.stats import iteration_times
from hwprof.core.markers import read_markers
from hwprof.core.spans import measured_spans

PROGRAM = """
import sys
import torch
from ultralytics.nn.tasks import DetectionModel

size, calls = int(sys.argv[1]), int(sys.argv[2])
torch.manual_seed(0)
model = DetectionModel("yolov8n.yaml", verbose=False).eval()
model.model[-1].export = True  # one tensor out, as ultralytics' TorchScript export makes it
image = torch.rand(1, 3, size, size)
with torch.no_grad():
    if "--no-trace" not in sys.argv:
        model = torch.jit.trace(model, image, check_trace=False)
    for _ in range(calls):
        model(image)
"""


def collect(out: Path, name: str, only: str, args: argparse.Namespace, extra: list[str]) -> Path:
    run = out / name
    calls = 2 + args.warmup + 3 * args.iters  # found, warm-up, measured and clean (and room for added blocks)
    command = [sys.executable, "-m", "hwprof", "collect", "--only", only, "--iters", str(args.iters)]
    command += ["--warmup", str(args.warmup), "--threads", str(args.threads), "--out", str(run), "--no-report"]
    command += ["--", "python", str(out / "prog.py"), str(args.imgsz), str(calls), *extra]
    started = time.monotonic()
    done = subprocess.run(command, cwd=out, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{name}: hwprof collect failed ({done.returncode}): {done.stderr[-2000:]}")
    print(f"{name}: {' '.join(command[2:])} ({time.monotonic() - started:.0f} s)")
    return run


def shares(run: Path, pass_name: str, average: Any = statistics.fmean) -> dict[str, float]:
    """Top-level layer -> its share of forward (self time / that iteration's forward) averaged over the pass's
    measured iterations: the mean, as the report does, or the median (`average`), which an iteration slowed by
    another process moves less."""
    times = iteration_times(measured_spans(read_markers(run / "passes" / pass_name / "markers.jsonl")))
    its = times.iterations
    names = {n for i in its for n in times.self_ns[i] if n.count(".") == 1}
    return {n: average([times.self_ns[i].get(n, 0) / times.forward_ns[i] for i in its]) for n in names}


def csv_times(run: Path) -> dict[str, float]:
    lines = [line.split(",") for line in (run / "layers.csv").read_text().splitlines()]
    header = lines[0]
    name, time_ms = header.index("name"), header.index("time_ms")
    return {row[name]: float(row[time_ms]) for row in lines[1:] if row[time_ms]}


def layer_table(traced: list[Path], plain: list[Path]) -> None:
    """Per layer: its share of the forward in each run (median over the run's iterations, or mean as the report
    takes it), the median over the rounds, and the ratios traced / plain."""
    for label, average in (("median", statistics.median), ("mean", statistics.fmean)):
        t = _across([shares(r, "trace", average) for r in traced])
        pl = _across([shares(r, "layers", average) for r in plain])
        pt = _across([shares(r, "trace", average) for r in plain])
        names = sorted(t.keys() & pl.keys(), key=lambda n: int(n.split(".")[1]))
        ratios = [t[n] / pl[n] for n in names if pl[n] > 0]
        ratios_trace = [t[n] / pt[n] for n in names if pt.get(n, 0) > 0]
        if label == "median":
            print(
                f"\nshare of the forward, median over {len(traced)} round(s) of each run's median over its iterations"
            )
            print(f"{'layer':>9} {'traced %':>9} {'plain %':>8} {'plain tr %':>10} {'t/p':>6} {'t/p tr':>7}")
            for n in names:
                rt = t[n] / pt[n] if pt.get(n, 0) > 0 else float("nan")
                r = t[n] / pl[n] if pl[n] > 0 else float("nan")
                print(f"{n:>9} {100 * t[n]:9.2f} {100 * pl[n]:8.2f} {100 * pt.get(n, 0):10.2f} {r:6.2f} {rt:7.2f}")
        print(f"{label} shares: sums traced {100 * sum(t.values()):.1f}%, plain layers pass "
              f"{100 * sum(pl.values()):.1f}%, "
              f"plain trace pass {100 * sum(pt.values()):.1f}%; per-layer ratio traced/plain layers pass: median "
              f"{statistics.median(ratios):.3f} (quartiles {_quartiles(ratios)}) over {len(ratios)} layers; "
              f"traced/plain trace pass (the same profiler): median {statistics.median(ratios_trace):.3f} "
              f"(quartiles {_quartiles(ratios_trace)})")  # fmt: skip
    ms = [statistics.median(_ms_ratios(a, b)) for a, b in zip(traced, plain, strict=True)]
    print(f"layers.csv time_ms ratio traced/plain, median over layers, by round (each run scaled to its own timing "
          f"pass, so the host's load between the two runs is in it): {', '.join(f'{r:.3f}' for r in ms)}")  # fmt: skip
    for runs in (traced, plain):
        for run in runs:
            summary = json.loads((run / "summary.json").read_text())
            forward = next(r["p50_ms"] for r in summary["stages"]["rows"] if r["name"] == "forward")
            others = {p["name"]: (p.get("neighbours") or {}).get("share") for p in summary["overheads"]["passes"]}
            busy = ", ".join(f"{k} {v:.0%}" for k, v in others.items() if v is not None)
            print(f"{run.name}: timing pass forward p50 {forward:.2f} ms; layers from the "
                  f"{summary['layers']['time_pass']} pass; other processes' share of these CPUs: {busy}")  # fmt: skip


def _across(per_run: list[dict[str, float]]) -> dict[str, float]:
    """Each layer's median over the runs."""
    names = set().union(*per_run)
    return {n: statistics.median(s.get(n, 0.0) for s in per_run) for n in names}


def _ms_ratios(traced: Path, plain: Path) -> list[float]:
    a, b = csv_times(traced), csv_times(plain)
    return [a[n] / b[n] for n in a if b.get(n)]


def _quartiles(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"{q[0]:.3f}-{q[2]:.3f}"


def paired_cost_of(run: Path) -> None:
    summary = json.loads((run / "summary.json").read_text())
    entry = next(p for p in summary["overheads"]["passes"] if p["name"] == "trace")
    cost = entry.get("cost") or {}
    ratio = cost.get("ratio") or cost.get("ratio_unresolved")
    blocks = [round(r, 3) for r in cost.get("block_ratios", [])]
    print(f"{run.name}: trace pass paired cost (profiler with_modules on / off, ABBA in one process): "
          f"{ratio:.3f} over {cost.get('blocks')} blocks, block ratios {blocks}, forward on "
          f"{cost.get('forward_on_ms', 0):.2f} ms / off {cost.get('forward_off_ms', 0):.2f} ms; "
          f"{cost.get('text', '')}")  # fmt: skip


def in_process(args: argparse.Namespace) -> None:
    """The traced forward bare against under torch.profiler, collection toggled per forward as the collector does
    (hwprof.collectors.torch_profiler: a clean iteration toggles it off), with and without with_modules."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from ultralytics.nn.tasks import DetectionModel

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = DetectionModel("yolov8n.yaml", verbose=False).eval()
    layers: Any = model.model
    head = layers[-1]
    head.export = True
    image = torch.rand(1, 3, args.imgsz, args.imgsz)
    with torch.no_grad():
        traced = torch.jit.trace(model, image, check_trace=False)
        for _ in range(5):
            traced(image)
        for with_modules in (True, False):
            prof = profile(activities=[ProfilerActivity.CPU], with_modules=with_modules)
            prof.start()
            wall: list[float] = []
            cpu: list[float] = []
            on_ms: list[float] = []
            off_ms: list[float] = []
            for _ in range(args.blocks):
                a1, b1, b2, a2 = (_timed(prof, on, traced, image) for on in (False, True, True, False))
                wall.append((b1[0] + b2[0]) / (a1[0] + a2[0]))
                cpu.append((b1[1] + b2[1]) / (a1[1] + a2[1]))
                on_ms += [b1[0], b2[0]]
                off_ms += [a1[0], a2[0]]
            prof.stop()
            ops = sum(1 for e in prof.events() if e.name.startswith("aten::")) / (2 * args.blocks)
            partial = "" if args.threads == 1 else "; not the whole forward: --threads > 1"
            how = "recorded in every forward (the fallback)" if with_modules else "none (the default: from warm-up)"
            print(f"in process, module hierarchy {how}: profiled / bare forward, wall "
                  f"{statistics.median(wall):.3f} (quartiles {_quartiles(wall)}), the calling thread's CPU time "
                  f"{statistics.median(cpu):.3f} (quartiles {_quartiles(cpu)}{partial})"
                  f", {args.blocks} ABBA blocks; wall p50 {statistics.median(on_ms):.2f} / "
                  f"{statistics.median(off_ms):.2f} ms, min {min(on_ms):.2f} / {min(off_ms):.2f} ms; "
                  f"{ops:.0f} aten ops per forward")  # fmt: skip


def _timed(prof: Any, on: bool, traced: Any, image: Any) -> tuple[float, float]:
    """One traced forward with the profiler collecting (on) or not: (wall ms, the calling thread's CPU ms), the
    second the whole forward's CPU time with one torch thread, and blind to the time other processes take."""
    from torch.profiler import ProfilerActivity

    prof.toggle_collection_dynamic(on, [ProfilerActivity.CPU])
    t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
    traced(image)
    return (time.perf_counter_ns() - t0) / 1e6, (time.thread_time_ns() - c0) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--imgsz", type=int, default=128)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--blocks", type=int, default=30, help="ABBA blocks of the in-process cost")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3, help="traced and plain collects, alternated")
    parser.add_argument("--cost-only", action="store_true", help="only the in-process cost (no collect)")
    args = parser.parse_args()
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # Kineto warns at every toggle of the in-process part
    if args.cost_only:
        in_process(args)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "prog.py").write_text(PROGRAM)
    os.environ.setdefault("YOLO_OFFLINE", "1")
    traced: list[Path] = []
    plain: list[Path] = []
    for r in range(args.rounds):  # alternated, so that a busy spell of the host falls on both
        traced.append(collect(args.out, f"traced{r}", "timing,torch_profiler", args, []))
        plain.append(collect(args.out, f"plain{r}", "timing,perf_events,torch_profiler", args, ["--no-trace"]))
    layer_table(traced, plain)
    for run in traced:
        paired_cost_of(run)
    in_process(args)


if __name__ == "__main__":
    main()
