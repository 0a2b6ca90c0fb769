#!/usr/bin/env python
"""Overhead of the trace and Scalene passes over the clean timing pass, and their clock alignment.

    python scripts/bench_trace_overhead.py --model yolov7 --imgsz 640 --iters 10

Runs, as the session does (one child process per pass; py-spy attached from here, Scalene wrapping
the worker), with the same model, images and iterations:
  timing            the clean pass: stage markers only, no collector
  layer-markers     the trace pass with no collector: the cost of the layer hooks alone
  torch_profiler    the trace pass with torch.profiler (+ oneDNN verbose) only
  pyspy             the trace pass with py-spy attached only
  trace             torch.profiler + py-spy: the real trace pass
  scalene           the Scalene pass
and, only when named in --only, torch.profiler with its options off one at a time (the rest as
the collector's default: oneDNN verbose, record_shapes, with_flops, a record_function per marker):
  tp-no-onednn      no oneDNN verbose lines       tp-no-flops    no with_flops
  tp-no-shapes      neither shapes nor flops      tp-bare        none of the three
  tp-no-ranges      tp-bare without the per-marker record_function ranges (no layer attribution)
and the trace pass as it was before its cheaper defaults, for comparison on the same host:
  tp-onednn-all     oneDNN verbose in every measured iteration (the default: the first only)
  tp-slow-ranges    ranges through the record_function ops (the default: _RecordFunctionFast)
  tp-before         both;  pyspy-native: py-spy --native;  trace-before: tp-before + pyspy-native
and prints each pass's forward p50 (from its markers.jsonl: stage "forward" B/E pairs of the
measured iterations) over the timing pass's (and min over min, the figure least inflated when the
host is busy with other work), and each foreign clock's alignment error as the
collectors measured it. With --repeat N the passes are interleaved N times and the p50 is taken
over all measured iterations of a kind. Each pass with layer hooks or switchable collectors also
states its own cost, paired in the pass (hwprof.session.paired: clean iterations interleaved in ABBA
blocks): "paired" is the median of its blocks' ratios over all rounds (py-spy, attached
throughout, is in both sides of it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hwprof.collectors.base import CollectorResult, PassContext

from hwprof.analysis.paired_cost import paired_cost
from hwprof.core.config import RunConfig
from hwprof.core.markers import MarkerBus, read_markers
from hwprof.core.spans import clean_forward_ms_by_iteration, forward_ms_by_iteration
from hwprof.session.registry import by_name
from hwprof.workload.images import discover


@dataclass(frozen=True)
class Variant:
    label: str
    pass_name: str
    collectors: tuple[str, ...]
    extra: tuple[tuple[str, Any], ...] = ()
    """RunConfig.extra entries for this variant only (torch_profiler's options)."""
    default: bool = True
    """Run without --only; the torch.profiler option variants run only when named."""
    fields: tuple[tuple[str, Any], ...] = ()
    """RunConfig fields for this variant only."""


TP_OFF = (("onednn_verbose", False), ("profiler_flops", False), ("profiler_shapes", False))
ONEDNN_ALL = (("onednn_iterations", 1 << 30),)
SLOW_RANGES = (("profiler_fast_ranges", False),)
FLOPS_ON = (("profiler_flops", True),)
PYSPY_NATIVE = (("pyspy_native", True),)
VARIANTS = (
    Variant("timing", "timing", ()),
    Variant("layer-markers", "trace", ()),
    Variant("torch_profiler", "trace", ("torch_profiler",)),
    Variant("pyspy", "trace", ("pyspy",)),
    Variant("trace", "trace", ("torch_profiler", "pyspy")),
    Variant("scalene", "scalene", ("scalene",)),
    # torch.profiler with one option off at a time, then all off, then without the per-marker ranges
    Variant("tp-no-onednn", "trace", ("torch_profiler",), TP_OFF[:1], False),
    Variant("tp-no-flops", "trace", ("torch_profiler",), TP_OFF[1:2], False),
    Variant("tp-no-shapes", "trace", ("torch_profiler",), TP_OFF[1:], False),
    Variant("tp-bare", "trace", ("torch_profiler",), TP_OFF, False),
    Variant("tp-no-ranges", "trace", ("torch_profiler",), (*TP_OFF, ("profiler_ranges", False)), False),
    Variant("tp-flops", "trace", ("torch_profiler",), FLOPS_ON, False),
    # the trace pass as it was before the cheaper defaults: oneDNN verbose in every measured
    # iteration, ranges through the record_function ops, with_flops, py-spy --native
    Variant("tp-onednn-all", "trace", ("torch_profiler",), ONEDNN_ALL, False),
    Variant("tp-slow-ranges", "trace", ("torch_profiler",), SLOW_RANGES, False),
    Variant("tp-before", "trace", ("torch_profiler",), (*ONEDNN_ALL, *SLOW_RANGES, *FLOPS_ON), False),
    Variant("pyspy-native", "trace", ("pyspy",), (), False, PYSPY_NATIVE),
    Variant(
        "trace-before",
        "trace",
        ("torch_profiler", "pyspy"),
        (*ONEDNN_ALL, *SLOW_RANGES, *FLOPS_ON),
        False,
        PYSPY_NATIVE,
    ),
)


@dataclass
class Outcome:
    forward_ms: list[float] = field(default_factory=list)
    block_ratios: list[float] = field(default_factory=list)
    """The pass's own paired figure: its ABBA blocks of clean and measured iterations (hwprof.session.paired)."""
    results: list[dict[str, CollectorResult]] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)


def run_variant(base: Path, variant: Variant, config: RunConfig, images: list[str], k: int) -> tuple[Path, dict]:
    run_dir = base / f"{variant.label}-{k}"
    run_dir.mkdir(parents=True)
    config = replace(config, **dict(variant.fields), extra={**config.extra, **dict(variant.extra)})
    config.save(run_dir / "config.json")
    (run_dir / "images.json").write_text(json.dumps({"paths": images}))
    ctx = PassContext(config, run_dir, variant.pass_name, MarkerBus())
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    classes = by_name()
    collectors = [classes[name](config) for name in variant.collectors]
    for collector in collectors:
        capability = collector.probe(config)
        if not capability.available:
            raise SystemExit(f"{collector.name} is {capability.sentence()}")
    command = [
        sys.executable,
        "-P",
        "-m",
        "hwprof.session.worker",
        str(run_dir),
        variant.pass_name,
        ",".join(variant.collectors),
    ]
    for collector in collectors:
        command = collector.wrap_command(command, ctx)
    env = {**os.environ, "OMP_NUM_THREADS": str(config.threads), "MKL_NUM_THREADS": str(config.threads)}
    started = time.monotonic()
    with open(ctx.out_dir / "worker.log", "w") as log:
        worker = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=env, cwd=run_dir)
        tools = {c.name: c.attach(worker.pid, ctx) for c in collectors}
        code = worker.wait()
    results: dict[str, CollectorResult] = {}
    result_file = ctx.out_dir / "result.json"
    if result_file.exists():
        for name, data in json.loads(result_file.read_text())["collectors"].items():
            results[name] = CollectorResult(**data)
    for name, tool in tools.items():
        if tool is not None:
            results[name] = tool.finish(code)
    if code != 0:
        raise SystemExit(f"{variant.label}: the worker exited with status {code}; see {ctx.out_dir / 'worker.log'}")
    return ctx.out_dir, {"results": results, "wall_s": time.monotonic() - started}


def alignment(results: dict[str, CollectorResult]) -> list[str]:
    nan = float("nan")
    lines = []
    tp = results.get("torch_profiler")
    if tp is not None and tp.status == "ok":
        clock = tp.summary["clock"]
        layer = clock["alignment"].get("layer", {})
        lines.append(
            f"torch.profiler (Kineto wall clock): sync window +/-{clock['sync_uncertainty_ns'] / 1000:.1f} "
            f"us, drift {clock['drift_ns'] / 1000:.1f} us over the pass; layer range edge vs marker: "
            f"median {layer.get('median_abs_us', nan):.1f} us, p95 {layer.get('p95_abs_us', nan):.1f} us, "
            f"max {layer.get('max_abs_us', nan):.1f} us ({layer.get('edges', 0)} edges)"
        )
        onednn = tp.summary.get("onednn", {})
        if onednn.get("primitives"):
            lines.append(
                f"oneDNN verbose (wall-clock ms): {onednn['matched']}/{onednn['primitives']} primitives "
                "inside an aten op after conversion"
            )
    ps = results.get("pyspy")
    if ps is not None and ps.status in ("ok", "partial") and "clock" in ps.summary:
        clock = ps.summary["clock"]
        lines.append(
            f"py-spy (us since its start): {clock['mode']} offset from {clock['transitions']} stage "
            f"transitions, bound median {clock['bound_median_us']:.0f} us, max {clock['bound_max_us']:.0f} "
            f"us, offset range {clock['offset_range_us']:.0f} us, "
            f"launch lag {clock.get('launch_lag_ms', nan):.1f} ms"
        )
    sc = results.get("scalene")
    if sc is not None and sc.status == "ok":
        clock = sc.summary["clock"]
        lines.append(
            f"Scalene (perf_counter = CLOCK_MONOTONIC): {clock.get('outside_window', 0)} of "
            f"{clock.get('window_samples', 0)} sample times outside the profiling window "
            f"(max {clock.get('outside_window_max_us', 0):.0f} us); {clock['samples_checked']} Pipeline.<stage> "
            f"line samples, {100 * clock.get('outside_share', 0):.1f}% outside their stage "
            f"(max {clock.get('outside_max_us', 0):.0f} us)"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="yolov7")
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--pyspy-rate", type=int, default=None, help="py-spy samples per second (config default 50)")
    parser.add_argument(
        "--pyspy-native", action="store_true", help="py-spy --native (blocking: pauses every thread per sample)"
    )
    parser.add_argument("--only", default="", help="comma-separated variant labels (timing always runs)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--keep", type=Path, help="keep the run folders here instead of a temp folder")
    args = parser.parse_args(argv)

    config = RunConfig(model=args.model, imgsz=args.imgsz, iters=args.iters, warmup=args.warmup)
    if args.threads:
        config.threads = args.threads
    if args.pyspy_rate:
        config.pyspy_rate = args.pyspy_rate
    config.pyspy_native = args.pyspy_native
    try:
        config.validate()
    except ValueError as exc:
        parser.error(str(exc))
    wanted = {v for v in args.only.split(",") if v}
    unknown = wanted - {v.label for v in VARIANTS}
    if unknown:
        parser.error(f"unknown variant {', '.join(sorted(unknown))}; known: {', '.join(v.label for v in VARIANTS)}")
    variants = [v for v in VARIANTS if (v.default and not wanted) or v.label in wanted or v.label == "timing"]
    images = [str(p) for p in discover(None).paths]
    base = args.keep or Path(tempfile.mkdtemp(prefix="hwprof-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    outcomes = {v.label: Outcome() for v in variants}
    print(
        f"{args.model} at {args.imgsz}, {args.warmup} warm-up + {args.iters} iterations, "
        f"{config.threads} threads, {args.repeat} round(s), py-spy at {config.pyspy_rate} Hz"
        f"{' --native' if config.pyspy_native else ' nonblocking'}; runs in {base}",
        flush=True,
    )
    try:
        for k in range(args.repeat):
            for variant in variants:
                out_dir, info = run_variant(base, variant, config, images, k)
                markers = read_markers(out_dir / "markers.jsonl")
                times = list(forward_ms_by_iteration(markers).values())
                paired = paired_cost(forward_ms_by_iteration(markers), clean_forward_ms_by_iteration(markers))
                outcomes[variant.label].forward_ms += times
                outcomes[variant.label].block_ratios += paired.block_ratios if paired else []
                outcomes[variant.label].results.append(info["results"])
                outcomes[variant.label].wall_s.append(info["wall_s"])
                p50 = statistics.median(times)
                if variant.label == "timing":  # first in every round
                    round_reference = p50
                print(
                    f"  round {k + 1} {variant.label:15s} forward p50 {p50:9.1f} ms ({info['wall_s']:.0f} s), "
                    f"{p50 / round_reference:.2f}x this round's timing pass",
                    flush=True,
                )
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)

    reference = statistics.median(outcomes["timing"].forward_ms)
    reference_min = min(outcomes["timing"].forward_ms)
    report: dict[str, Any] = {
        "model": args.model,
        "imgsz": args.imgsz,
        "iters": args.iters,
        "threads": config.threads,
        "repeat": args.repeat,
        "passes": {},
    }
    # min/min is printed beside p50/p50: on a host shared with other work the minimum is the
    # figure least inflated by waiting for a CPU.
    # paired = the pass's own figure (median of its ABBA blocks' ratios, over all rounds): py-spy,
    # attached throughout, is in both sides of it; the pass-level ratios hold it.
    print(
        f"\n{'pass':15s} {'forward p50 ms':>15s} {'min ms':>9s} {'max ms':>9s} {'p50 ratio':>10s} {'min ratio':>10s}"
        f" {'paired':>8s} {'blocks':>6s} {'range':>13s}"
    )
    for variant in variants:
        times = outcomes[variant.label].forward_ms
        blocks = outcomes[variant.label].block_ratios
        p50 = statistics.median(times)
        paired_text = ""
        if blocks:
            paired_text = f" {statistics.median(blocks):8.3f} {len(blocks):6d} {min(blocks):6.3f}-{max(blocks):6.3f}"
        print(
            f"{variant.label:15s} {p50:15.1f} {min(times):9.1f} {max(times):9.1f} "
            f"{p50 / reference:10.2f} {min(times) / reference_min:10.2f}{paired_text}"
        )
        report["passes"][variant.label] = {
            "forward_p50_ms": p50,
            "forward_min_ms": min(times),
            "forward_max_ms": max(times),
            "overhead_ratio": p50 / reference,
            "min_ratio": min(times) / reference_min,
            "paired_ratio": statistics.median(blocks) if blocks else None,
            "paired_block_ratios": blocks,
            "iterations": len(times),
            "summaries": [
                {n: r.summary.get("clock") for n, r in res.items() if r.summary.get("clock")}
                for res in outcomes[variant.label].results
            ],
        }
    print("\nclock alignment (last round):")
    for variant in variants:
        results = outcomes[variant.label].results[-1]
        for line in alignment(results):
            print(f"  [{variant.label}] {line}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
