"""The attributing passes' paired costs, old and new method (issue 29's target table).

For each model (name@imgsz), thread count and method, one `hwprof collect` with the timing, layers
and trace passes only (the default collectors of those passes), run in this process through the
session as `hwprof collect` runs them. From each run's run.json it prints the layers and trace
passes' figures as the report states them: the ratio with its quartiles (IQR) and the number of ABBA
blocks, the method (paired or pass-level), and what the paired figure covers or leaves on.

Methods:
  old   --counter-reads every (a read at every layer marker in every measured iteration) and py-spy
        left running in the clean iterations (extra.pyspy_switch false): the figures before issue 29
  new   the defaults: rotated layer reads (hwprof.perf.layer_reads) and py-spy stopped in the clean
        iterations (collectors/pyspy/switch.py)
  no-memory  the defaults without torch_memory (the allocator's events per layer, issue 59): run beside `new`
        in alternate rounds (--rounds), it gives what memory per layer adds to the layers pass

--agreement adds, per model and thread count, one layers pass that reads every layer in the even
measured iterations and one layer in 4 in the odd ones (extra.counter_reads_compare), and prints how
each layer's task-clock agrees between the two methods on that same run.

    python scripts/bench_attributing_passes.py                      # the issue's table (long: a quiet host)
    python scripts/bench_attributing_passes.py --models yolov8n@96 --threads 2 --iters 4 --warmup 1
    python scripts/bench_attributing_passes.py --models yolov7@640 --threads 16 --device cuda   # a GPU host
    python scripts/bench_attributing_passes.py --passes timing,layers --threads 2 --methods new,no-memory --rounds 3

A stand-in for the GPU run where none is lent: the most fine-grained CPU forward at hand (yolov7 at 32: 106 layers
in 18-20 ms here, against 6-9 ms of host time on the H100 machine), with the GPU run's defaults (the model
thread's counters, each layer read in 1 of 16 iterations):

    python scripts/bench_attributing_passes.py --models yolov7@32 --threads 2 --methods new \\
        --counter-threads model --every 16
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from hwprof.core.config import RunConfig
from hwprof.perf import readings as readings_io
from hwprof.perf.counting import attribute
from hwprof.session.collection import Session
from hwprof.session.plan import plan_passes
from hwprof.workload.images import discover

PASSES = ("timing", "layers", "trace")
METHODS: dict[str, dict[str, Any]] = {
    "old": {"counter_reads": "every", "extra": {"pyspy_switch": False}},
    "new": {"counter_reads": "rotate", "extra": {}},
    "no-memory": {"counter_reads": "rotate", "extra": {}, "skip": ["torch_memory"]},
}
TARGETS = {("yolov7-tiny", 320): {"layers": 1.05, "trace": 1.10}, ("yolov7", 640): {"layers": 1.02, "trace": 1.05}}


def collect(root: Path, name: str, config: RunConfig, passes: tuple[str, ...]) -> dict[str, Any]:
    """One collect of `passes` into root/name; run.json as a dict."""
    plan = plan_passes(config)
    plan.passes = [p for p in plan.passes if p.name in passes]
    run_dir = root / name
    run_dir.mkdir(parents=True)
    Session(config, run_dir, discover(config.images)).collect(plan, [sys.argv[0], name])
    return dict(json.loads((run_dir / "run.json").read_text()))


def figure_text(figure: dict[str, Any] | None) -> str:
    if not figure:
        return "no figure"
    q1, q3 = figure.get("q1"), figure.get("q3")
    iqr = f" (IQR {q1:.3f}-{q3:.3f})" if q1 is not None and q3 is not None else ""
    blocks = f", {figure.get('blocks', 0)} blocks" if figure.get("method") == "paired" else ""
    left = f"; left on: {', '.join(figure['always_on'])}" if figure.get("always_on") else ""
    return f"{figure['ratio']:.3f}x{iqr}{blocks}, {figure.get('method')}{left}"


def row(run: dict[str, Any]) -> dict[str, Any]:
    passes = run.get("passes", {})
    collectors = run.get("collectors", {})
    perf = (collectors.get("perf_events") or {}).get("summary") or {}
    pyspy = (collectors.get("pyspy") or {}).get("summary") or {}
    return {
        "layers": (passes.get("layers") or {}).get("overhead"),
        "trace": (passes.get("trace") or {}).get("overhead"),
        "layer_reads": perf.get("layer_reads"),
        "read_p50_us": (perf.get("read_cost") or {}).get("p50_us"),
        "pyspy_switches": pyspy.get("paused_switches"),
    }


def agreement(run_dir: Path) -> list[tuple[str, float, float, float, int, int]]:
    """Per layer: (name, every-layer mean, rotated mean, standard error of the difference, n every, n rotated)."""
    spans = attribute(readings_io.load(run_dir / "passes" / "layers" / "perf_events.readings.jsonl").readings)
    every: dict[str, list[float]] = {}
    rotated: dict[str, list[float]] = {}
    for s in spans:
        if s.kind == "layer" and "task-clock" in s.self:
            (rotated if s.iteration % 2 else every).setdefault(s.name, []).append(s.self["task-clock"])
    out = []
    for name, values in every.items():
        rot = rotated.get(name, [])
        if len(values) < 2 or len(rot) < 2:
            continue
        se = (statistics.variance(values) / len(values) + statistics.variance(rot) / len(rot)) ** 0.5
        out.append((name, statistics.mean(values), statistics.mean(rot), se, len(values), len(rot)))
    return out


def print_agreement(rows: list[tuple[str, float, float, float, int, int]]) -> None:
    print(f"    {'layer':10s} {'every us':>10s} {'rotated us':>11s} {'diff %':>7s} {'diff/SE':>8s} {'n':>7s}")
    for name, e, r, se, n_e, n_r in rows:
        ratio = (r - e) / se if se else float("nan")
        cells = f"{e / 1e3:10.1f} {r / 1e3:11.1f} {100 * (r - e) / e:7.1f} {ratio:8.1f}"
        print(f"    {name:10s} {cells} {n_e:>3d}/{n_r:<3d}")
    within = sum(1 for _, e, r, se, *_ in rows if abs(r - e) <= 3 * se)
    total_e = sum(e for _, e, *_ in rows)
    total_r = sum(r for _, _, r, *_ in rows)
    print(f"    within 3 SE: {within}/{len(rows)} layers; sum of layers rotated/every: {total_r / total_e:.4f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="yolov7-tiny@320,yolov7@640", help="name@imgsz, comma-separated")
    parser.add_argument("--threads", default="2,1", help="comma-separated thread counts")
    parser.add_argument("--methods", default="old,new")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda: the GPU run's layers pass (rotation 1 in 16)")
    parser.add_argument(
        "--counter-threads", default="auto", help="auto, all or model (--counter-threads; model: a GPU run's default)"
    )
    parser.add_argument("--pyspy-rate", type=int, default=RunConfig().pyspy_rate, help="py-spy samples per second")
    parser.add_argument("--extra", type=json.loads, default={}, help="extra options as JSON, for both methods")
    parser.add_argument("--skip", default="", help="collectors to leave out (comma-separated), e.g. pyspy")
    parser.add_argument("--every", type=int, help="new method: read each layer in 1 of this many iterations (fixed)")
    parser.add_argument("--agreement", action="store_true", help="also compare the per-layer counts on one run")
    parser.add_argument("--keep", type=Path, help="keep the run directories here")
    parser.add_argument("--passes", default=",".join(PASSES), help="the passes to run (comma-separated)")
    parser.add_argument("--rounds", type=int, default=1, help="each method this many times, methods alternating")
    args = parser.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="hwprof-attributing-", dir=args.keep))
    results: dict[tuple[str, int, int, str, int], dict[str, Any]] = {}
    passes = tuple(args.passes.split(","))
    for spec in args.models.split(","):
        model, _, size = spec.partition("@")
        imgsz = int(size or 640)
        for threads in (int(t) for t in args.threads.split(",")):
            for method, round_ in [(m, r) for r in range(args.rounds) for m in args.methods.split(",")]:
                options = METHODS[method]
                extra = {**options["extra"], **args.extra}
                if args.every and method == "new":
                    extra["counter_reads_every"] = args.every
                config = RunConfig(
                    model=model,
                    imgsz=imgsz,
                    threads=threads,
                    device=args.device,
                    iters=args.iters,
                    warmup=args.warmup,
                    counter_reads=options["counter_reads"],
                    counter_threads=args.counter_threads,
                    pyspy_rate=args.pyspy_rate,
                    skip=[c for c in args.skip.split(",") if c] + options.get("skip", []),
                    extra=extra,
                )
                name = f"{model}-{imgsz}-t{threads}-{method}-r{round_}"
                print(f"collecting {name} ...", flush=True)
                results[(model, imgsz, threads, method, round_)] = row(collect(root, name, config, passes))
            if args.agreement:
                config = RunConfig(
                    model=model,
                    imgsz=imgsz,
                    threads=threads,
                    device=args.device,
                    iters=max(args.iters, 32),
                    warmup=args.warmup,
                    extra={"counter_reads_compare": True, "counter_reads_every": 4},
                )
                name = f"{model}-{imgsz}-t{threads}-agreement"
                print(f"collecting {name} ...", flush=True)
                collect(root, name, config, ("layers",))
                print(f"  per-layer task-clock, every layer (even iterations) vs 1 in 4 (odd), {name}:")
                print_agreement(agreement(root / name))
    print(f"\nruns in {root}\n")
    for (model, imgsz, threads, method, round_), r in results.items():
        target = TARGETS.get((model, imgsz), {})
        plan = r["layer_reads"] or {}
        print(f"{model} at {imgsz}, --threads {threads}, {method}, round {round_ + 1}:")
        for pass_name in [p for p in ("layers", "trace") if p in passes]:
            goal = f" [target <= {target[pass_name]:.2f}x]" if pass_name in target else ""
            print(f"  {pass_name:6s} {figure_text(r[pass_name])}{goal}")
        print(
            f"  layer reads: {plan.get('method')}, 1 in {plan.get('every')} "
            f"(visits {plan.get('visits_min')}-{plan.get('visits_max')} of {plan.get('iterations')}); "
            f"read p50 {r['read_p50_us'] or float('nan'):.1f} us; py-spy stopped {r['pyspy_switches'] or 0} times"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
