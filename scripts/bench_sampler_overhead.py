"""Overhead of the sysstat (and, where the host has RAPL, rapl) samplers on the forward stage,
and the cost of one RAPL read per marker.

1. Paired, in one process (the figure to trust on a busy machine; hwprof.session.paired): the layers
   pass's set-up, the samplers switched on and off by iteration in ABBA blocks (off, on, on,
   off). Ratio per block = forward time with samplers / without; the median over blocks.
2. Passes, as the real worker child processes, interleaved per repeat:
     timing           the clean pass: no hooks, no collectors
     layers           layer markers, no collectors
     layers+samplers  layer markers, sysstat (+ rapl when available)
   Forward p50 of each (markers.jsonl), and ratios per repeat (median over repeats): the
   samplers' cost (layers+samplers / layers) and the layers pass's cost over the timing pass.
3. RAPL read cost per marker (every domain read once) on a fake powercap tree with two packages
   with core and dram (6 files, a two-socket server's layout) and on this host's tree if readable.

    python scripts/bench_sampler_overhead.py                     # yolov7 at 640 (yolov8n if missing)
    python scripts/bench_sampler_overhead.py --model yolov8n --pairs 10 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hwprof.collectors.base import Collector
from hwprof.collectors.rapl import collector as rapl
from hwprof.collectors.rapl import sources
from hwprof.collectors.sysstat import collector as sysstat

from hwprof.core.config import RunConfig
from hwprof.core.markers import read_markers
from hwprof.core.spans import forward_ms_by_iteration
from hwprof.session.paired import abba_forward
from hwprof.workload.images import discover


def default_model() -> str:
    try:
        import hwprof.workload.yolov7  # noqa: F401
    except ImportError:
        return "yolov8n"
    return "yolov7"


def samplers(config: RunConfig) -> list[Collector]:
    chosen: list[Collector] = [sysstat.SysstatCollector(config)]
    if rapl.RaplCollector.probe(config).available:
        chosen.append(rapl.RaplCollector(config))
    return chosen


def run_pass(run_dir: Path, pass_name: str, collectors: list[str], timeout_s: float) -> None:
    cmd = [sys.executable, "-P", "-m", "hwprof.session.worker", str(run_dir), pass_name, ",".join(collectors)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:]
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {tail}")


def passes(config: RunConfig, repeats: int, timeout_s: float) -> dict[str, Any]:
    names = [c.name for c in samplers(config)]
    variants = {"timing": ("timing", []), "layers": ("layers", []), "layers+samplers": ("layers", names)}
    p50: dict[str, list[float]] = {v: [] for v in variants}
    costs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hwprof-bench-") as tmp:
        for r in range(repeats):
            for variant, (pass_name, collectors) in variants.items():
                run_dir = Path(tmp) / f"{variant}-{r}"
                run_dir.mkdir()
                config.save(run_dir / "config.json")
                (run_dir / "images.json").write_text(json.dumps({"paths": [str(p) for p in discover(None).paths]}))
                run_pass(run_dir, pass_name, collectors, timeout_s)
                fwd = forward_ms_by_iteration(read_markers(run_dir / "passes" / pass_name / "markers.jsonl"))
                p50[variant].append(statistics.median(fwd.values()))
                print(f"  pass repeat {r} {variant:16s} forward p50 {p50[variant][-1]:10.2f} ms", flush=True)
                result = json.loads((run_dir / "passes" / pass_name / "result.json").read_text())
                summary = result["collectors"].get("sysstat", {}).get("summary")
                if summary:
                    costs.append(
                        {
                            "sampler_cpu_us_per_sample": summary["sampler"]["cpu_us_per_sample"],
                            "sampler_cpu_share_of_process": summary["sampler"]["cpu_s"] / summary["cpu"]["process_s"],
                            "stage_marker_us": summary.get("marker_cost_us"),
                        }
                    )

    def ratio(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(p50[a], p50[b], strict=True))

    return {
        "samplers": names,
        "forward_p50_ms": p50,
        "samplers_ratio": ratio("layers+samplers", "layers"),
        "layers_samplers_vs_timing": ratio("layers+samplers", "timing"),
        "layers_vs_timing": ratio("layers", "timing"),
        "sysstat_costs": costs,
    }


def fake_tree(root: Path) -> Path:
    for pkg in range(2):
        top = root / f"intel-rapl:{pkg}"
        zones = (
            (top, f"package-{pkg}"),
            (top / f"intel-rapl:{pkg}:0", "core"),
            (top / f"intel-rapl:{pkg}:1", "dram"),
        )
        for zone, name in zones:
            zone.mkdir(parents=True)
            (zone / "name").write_text(name + "\n")
            (zone / "energy_uj").write_text("123456789\n")
            (zone / "max_energy_range_uj").write_text("262143328850\n")
    return root


def read_cost(root: Path, reads: int) -> dict[str, Any]:
    source = sources.open_powercap(root)
    try:
        for _ in range(100):
            source.read()
        t0 = time.perf_counter_ns()
        for _ in range(reads):
            source.read()
        per_read = (time.perf_counter_ns() - t0) / reads / 1e3
    finally:
        source.close()
    return {
        "us_per_marker": per_read,
        "domains": len(source.domains),
        "us_per_domain": per_read / len(source.domains),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="sampler overhead on the forward stage; RAPL read cost")
    parser.add_argument("--model", default=None, help="default: yolov7, or yolov8n when YOLOv7 is missing")
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=8, help="paired mode: on/off pairs (2 per ABBA block)")
    parser.add_argument("--iters", type=int, default=10, help="passes mode: measured iterations per pass")
    parser.add_argument("--repeats", type=int, default=1, help="passes mode: repeats (0 skips it)")
    parser.add_argument("--interval-ms", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: every allowed CPU)")
    parser.add_argument("--reads", type=int, default=20000, help="RAPL reads timed per tree")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per pass")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.pairs < 2:
        parser.error("--pairs must be at least 2 (one ABBA block)")
    config = RunConfig(
        model=args.model or default_model(),
        imgsz=args.imgsz,
        warmup=args.warmup,
        iters=args.iters,
        interval_ms=args.interval_ms,
    )
    if args.threads:
        config.threads = args.threads
    config.validate()
    figures: dict[str, Any] = {
        "model": config.model,
        "imgsz": config.imgsz,
        "interval_ms": config.interval_ms,
        "threads": config.threads,
        "load_before": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="hwprof-bench-") as tmp:
        figures["rapl_read_fake_tree"] = read_cost(fake_tree(Path(tmp) / "powercap"), args.reads)
    try:
        figures["rapl_read_this_host"] = read_cost(sources.powercap_root(RunConfig()), args.reads)
    except sources.SourceUnavailable as exc:
        figures["rapl_read_this_host"] = {"unavailable": exc.reason, "fix": exc.fix}
    figures["rapl_collector"] = rapl.RaplCollector.probe(config).sentence()
    print(
        f"{config.model} at {config.imgsz}, {config.threads} threads, interval {config.interval_ms} ms",
        flush=True,
    )
    figures["paired"] = abba_forward(config, samplers, args.pairs).to_dict()
    if args.repeats > 0:
        figures["passes"] = passes(config, args.repeats, args.timeout)
    figures["load_after"] = os.getloadavg()

    p = figures["paired"]
    print(
        f"\n{config.model} at {config.imgsz}; samplers: {', '.join(p['collectors'])}; "
        f"load average {figures['load_before'][0]:.1f} before, {figures['load_after'][0]:.1f} after"
    )
    blocks = ", ".join(f"{r:.3f}" for r in p["ratio_blocks"])
    print(
        f"  paired  forward p50 with {p['forward_p50_on_ms']:.2f} ms, "
        f"without {p['forward_p50_off_ms']:.2f} ms: "
        f"ratio {p['ratio_p50']:.4f}; median ABBA-block ratio {p['ratio_median_block']:.4f} "
        f"({len(p['ratio_blocks'])} blocks: {blocks})"
    )
    if "passes" in figures:
        q = figures["passes"]
        for variant, values in q["forward_p50_ms"].items():
            print(f"  passes  forward p50 {variant:16s} {statistics.median(values):10.2f} ms")
        print(f"  passes  ratio layers+samplers / layers  {q['samplers_ratio']:.4f}")
        print(f"  passes  ratio layers+samplers / timing  {q['layers_samplers_vs_timing']:.4f}")
        print(f"  passes  ratio layers / timing           {q['layers_vs_timing']:.4f}")
        for c in q["sysstat_costs"]:
            print(
                f"  sysstat sampler {c['sampler_cpu_us_per_sample']:.1f} us CPU per sample "
                f"({c['sampler_cpu_share_of_process']:.2%} of the process's CPU), "
                f"{c['stage_marker_us']:.1f} us per stage marker"
            )
    fake = figures["rapl_read_fake_tree"]
    print(
        f"  RAPL read per marker, fake tree: {fake['us_per_marker']:.2f} us for {fake['domains']} domains "
        f"({fake['us_per_domain']:.2f} us per domain)"
    )
    host = figures["rapl_read_this_host"]
    if "unavailable" in host:
        print(f"  RAPL read per marker, this host: unavailable: {host['unavailable']}")
    else:
        print(f"  RAPL read per marker, this host: {host['us_per_marker']:.2f} us for {host['domains']} domains")
    print(f"  rapl collector: {figures['rapl_collector']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
