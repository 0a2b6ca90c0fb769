"""Overhead of the per-layer counters pass, and the cost of one counter read.

1. Pass overhead. The real worker child processes, interleaved (A B C A B C ...) so that drift and
   other work on the machine hit every variant alike:
     timing             the clean pass: no hooks, no collectors
     layers             layer markers only (forward hooks, marker bus)
     layers+perf        layer markers and perf_events (the counters pass) with the chosen events
     layers+perf@1s     the same with the interval sampler at 1 s instead of --interval-ms: what
                        the sampler thread (reads every 10 ms, IPIs to the counted CPUs) costs
   Forward p50 per pass from its markers.jsonl (stage "forward", B/E, measured iterations).
   Printed: layers+perf / timing (the counters pass's overhead, target <= 1.05) and
   layers+perf / layers (the counter reads' own share), medians over the repeats of the
   per-repeat ratios, with their range: on a shared VM two identical passes differ by 10%+.

2. Paired, in one process (hwprof.session.paired), by iteration in ABBA blocks (off, on, on, off), so
   the drift of a shared machine is cancelled; the median block ratio is printed:
     counters      layer hooks throughout; perf_events (reads at every marker, the interval
                   sampler) in the "on" iterations only: the collector's own cost
     whole pass    layer hooks and perf_events together in the "on" iterations, none in the
                   "off" ones: the counters pass over the clean timing pass

3. Read cost. One child process per thread count opens groups of 1, 2, 4 and 8 software events
   (inherit=1) before importing torch, starts torch's pool with T threads, then times reads of
   each group: with the pool idle, and while a background thread keeps the pool busy (a running
   inherited child event costs an IPI to read), and ("between") right after a small parallel convolution,
   while the OpenMP workers still spin, as at a layer marker. Also N separate single-event fds read one by one,
   and a group of 4 opened for the reading thread alone (inherit=0, --counter-threads model): a local read.

    python scripts/bench_counters_overhead.py                       # yolov7 at 640, default events
    python scripts/bench_counters_overhead.py --model yolov7-tiny --imgsz 320 --iters 10 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from hwprof.core.config import RunConfig, default_threads
from hwprof.core.markers import read_markers
from hwprof.core.spans import forward_ms_by_iteration
from hwprof.session.paired import abba_forward
from hwprof.session.registry import by_name
from hwprof.workload.images import discover

VARIANTS: dict[str, tuple[str, list[str], dict[str, Any]]] = {
    "timing": ("timing", [], {}),
    "layers": ("layers", [], {}),
    "layers+perf": ("layers", ["perf_events"], {}),
    "layers+perf@1s": ("layers", ["perf_events"], {"interval_ms": 1000.0}),
}
RATIOS = {
    "perf_vs_timing": ("layers+perf", "timing"),
    "perf_vs_layers": ("layers+perf", "layers"),
    "layers_vs_timing": ("layers", "timing"),
    "perf1s_vs_timing": ("layers+perf@1s", "timing"),
    "perf_vs_perf1s": ("layers+perf", "layers+perf@1s"),
}


def default_model() -> str:
    try:
        import hwprof.workload.yolov7  # noqa: F401
    except ImportError:
        return "yolov8n"
    return "yolov7"


def run_pass(run_dir: Path, pass_name: str, collectors: list[str], timeout: float) -> Path:
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "hwprof.session.worker", str(run_dir), pass_name, ",".join(collectors)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise SystemExit(f"worker {pass_name} {collectors} failed:\n{proc.stderr[-3000:]}")
    return run_dir / "passes" / pass_name


def overhead(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    images = [str(p) for p in discover(None).paths]
    p50s: dict[str, list[float]] = {v: [] for v in VARIANTS}
    perf_summary: dict[str, Any] = {}
    for rep in range(args.repeats):
        for variant, (pass_name, collectors, overrides) in VARIANTS.items():
            run_dir = root / f"{variant}-{rep}"
            run_dir.mkdir(parents=True)
            config = RunConfig(
                model=args.model,
                imgsz=args.imgsz,
                threads=args.threads,
                warmup=args.warmup,
                iters=args.iters,
                events=args.events,
                **overrides,
            )
            config.save(run_dir / "config.json")
            (run_dir / "images.json").write_text(json.dumps({"paths": images}))
            pass_dir = run_pass(run_dir, pass_name, collectors, args.timeout)
            durations = list(forward_ms_by_iteration(read_markers(pass_dir / "markers.jsonl")).values())
            p50s[variant].append(statistics.median(durations))
            print(f"  repeat {rep} {variant:12s} forward p50 {p50s[variant][-1]:9.2f} ms", flush=True)
            if variant == "layers+perf":
                result = json.loads((pass_dir / "result.json").read_text())
                perf_summary = result["collectors"]["perf_events"]
    per_repeat = {
        name: [a / b for a, b in zip(p50s[top], p50s[bottom], strict=True)] for name, (top, bottom) in RATIOS.items()
    }
    ratios = {name: statistics.median(values) for name, values in per_repeat.items()}
    return {"p50_ms": p50s, "ratios": ratios, "per_repeat": per_repeat, "perf": perf_summary}


READ_COST_CHILD = textwrap.dedent(
    """
    import json, sys, threading, time
    from hwprof.perf.events import EventResolver, SOFTWARE
    from hwprof.perf.syscall import CounterGroup
    threads, reads = int(sys.argv[1]), int(sys.argv[2])
    r = EventResolver()
    names = list(SOFTWARE)[:8]
    groups = {n: CounterGroup.open([r.resolve(e) for e in names[:n]], disabled=False) for n in (1, 2, 4, 8)}
    singles = [CounterGroup.open([r.resolve(e)], disabled=False) for e in names[:8]]
    # --counter-threads model: the same group of 4 counting this thread alone (inherit=0)
    groups["4, model thread"] = CounterGroup.open([r.resolve(e) for e in names[:4]], disabled=False, inherit=False)
    import torch
    torch.set_num_threads(threads)
    a = torch.rand(512, 512)
    for _ in range(20):
        a @ a
    def timed(fn):
        # median over batches of 50 reads: robust to preemption on a shared machine
        fn()
        batches = []
        for _ in range(max(1, reads // 50)):
            t = time.perf_counter_ns()
            for _ in range(50):
                fn()
            batches.append((time.perf_counter_ns() - t) / 50 / 1e3)
        return sorted(batches)[len(batches) // 2]
    def measure():
        out = {f"group of {n}": timed(g.read_raw) for n, g in groups.items()}
        out["8 single fds"] = timed(lambda: [g.read_raw() for g in singles])
        return out
    time.sleep(0.5)
    idle = measure()
    stop = threading.Event()
    def busy():
        b = torch.rand(384, 384)
        while not stop.is_set():
            b @ b
    worker = threading.Thread(target=busy)
    worker.start()
    time.sleep(0.2)
    loaded = measure()
    stop.set()
    worker.join()
    # as in a forward: a read right after a parallel region, while the OpenMP workers still spin
    x, w = torch.rand(1, 32, 40, 40), torch.rand(32, 32, 3, 3)
    between = {}
    for n, g in groups.items():
        times = []
        for _ in range(reads // 4):
            torch.nn.functional.conv2d(x, w, padding=1)
            t = time.perf_counter_ns()
            g.read_raw()
            times.append((time.perf_counter_ns() - t) / 1e3)
        between[f"group of {n}"] = sorted(times)[len(times) // 2]
    between["8 single fds"] = float("nan")
    live = len(__import__("os").listdir("/proc/self/task"))
    print(json.dumps({"threads": threads, "os_threads": live, "idle": idle, "busy": loaded, "between": between}))
    """
)


def read_cost(thread_counts: list[int], reads: int) -> list[dict[str, Any]]:
    rows = []
    for threads in thread_counts:
        proc = subprocess.run(
            [sys.executable, "-P", "-c", READ_COST_CHILD, str(threads), str(reads)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "OMP_NUM_THREADS": str(threads)},
        )
        if proc.returncode != 0:
            raise SystemExit(f"read-cost child failed:\n{proc.stderr[-2000:]}")
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=default_model())
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--events",
        type=lambda s: [e for e in s.split(",") if e],
        default=[],
        help="comma-separated events (default: the collector's default set)",
    )
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--read-threads", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4, 8])
    parser.add_argument("--reads", type=int, default=5000)
    parser.add_argument("--pairs", type=int, default=8, help="paired mode: on/off pairs (0 skips it)")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-read-cost", action="store_true")
    parser.add_argument("--keep", type=Path, help="keep the run directories here")
    args = parser.parse_args()

    if not args.skip_overhead:
        print(
            f"counters pass overhead: {args.model} at {args.imgsz}, {args.threads} threads, {args.iters} "
            f"iterations, {args.repeats} repeats, events: {','.join(args.events) or 'default set'}"
        )
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            result = overhead(args, Path(tempfile.mkdtemp(dir=args.keep)))
        else:
            with tempfile.TemporaryDirectory() as tmp:
                result = overhead(args, Path(tmp))
        for variant, values in result["p50_ms"].items():
            print(f"{variant:14s} forward p50 (median of repeats): {statistics.median(values):9.2f} ms")
        r, spread = result["ratios"], result["per_repeat"]

        def line(label: str, key: str, what: str) -> None:
            low, high = min(spread[key]), max(spread[key])
            print(f"{label:42s} {r[key]:.4f}  (repeats {low:.3f}..{high:.3f}; {what})")

        verdict = "meets" if r["perf_vs_timing"] <= 1.05 else "misses"
        line("counters pass / timing pass forward p50:", "perf_vs_timing", f"{verdict} the 1.05 target")
        line("counters pass / layers-only pass:", "perf_vs_layers", "the counters' own cost")
        line("layers-only pass / timing pass:", "layers_vs_timing", "hooks and marker bus")
        line("counters, sampler at 1 s / timing pass:", "perf1s_vs_timing", "without the 10 ms sampler")
        line("counters, sampler 10 ms / at 1 s:", "perf_vs_perf1s", "the interval sampler's cost")
        summary = result["perf"].get("summary", {})
        if summary:
            rc = summary["read_cost"]
            print(
                f"in-run read cost per marker: p50 {rc.get('p50_us', float('nan')):.2f} us, "
                f"mean {rc.get('mean_us', float('nan')):.2f} us, {rc['reads']} reads, "
                f"{rc['groups_per_read']:.1f} groups per read"
            )
            if "on_marker_share" in rc:
                print(
                    f"perf_events' own time on the model thread (on_marker): "
                    f"{100 * rc['on_marker_share']:.3f}% of the measured iterations' wall time"
                )
            print(
                f"events opened: {', '.join(summary['events_opened'])}; unavailable: "
                f"{', '.join(summary['unavailable']) or 'none'}"
            )
            print("checks:", json.dumps(summary["checks"]))
    if args.pairs > 0:
        config = RunConfig(
            model=args.model, imgsz=args.imgsz, threads=args.threads, warmup=args.warmup, events=args.events
        )
        print(f"\npaired in one process ({args.pairs} on/off pairs per mode)")
        for label, toggle_hooks in (("counters", False), ("whole pass", True)):
            p = abba_forward(config, lambda c: [by_name()["perf_events"](c)], args.pairs, toggle_hooks).to_dict()
            blocks = ", ".join(f"{r:.3f}" for r in p["ratio_blocks"])
            print(
                f"  {label:10s} (perf_events {p['statuses']['perf_events']}, hooks {p['hooks']}): forward p50 on "
                f"{p['forward_p50_on_ms']:.2f} ms, off {p['forward_p50_off_ms']:.2f} ms, ratio {p['ratio_p50']:.4f}; "
                f"median ABBA-block ratio {p['ratio_median_block']:.4f} ({blocks})",
                flush=True,
            )
    if not args.skip_read_cost:
        print(f"\ncost of one read(2) of a counter group, us (median over batches of 50, {args.reads} reads)")
        rows = read_cost(args.read_threads, args.reads)
        keys = list(rows[0]["idle"])
        widths = [max(12, len(k)) for k in keys]
        print(
            f"{'torch threads':>13s} {'state':>5s} " + " ".join(f"{k:>{w}s}" for k, w in zip(keys, widths, strict=True))
        )
        for row in rows:
            for state in ("idle", "busy", "between"):
                cells = " ".join(f"{row[state][k]:{w}.2f}" for k, w in zip(keys, widths, strict=True))
                print(f"{row['threads']:13d} {state:>5s} {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
