"""A first run's memory: `hwprof collect` as on a fresh machine (an empty XDG_CACHE_HOME: the peak probe and every
other cache done anew), its process tree's resident memory, process by process.

Printed: each process's largest resident set seen (psutil, every --interval s), named by the pass whose process it
was (run.json's passes[].pid) or its command line; the largest of them; and the kernel's own figure, the largest
resident set of any process of the tree that ended (getrusage RUSAGE_CHILDREN ru_maxrss: exact, not sampled), held
against --bound.

    python scripts/bench_first_run.py --model yolov7 --imgsz 640
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

MB = 1024 * 1024


def watch(proc: subprocess.Popen[bytes], interval: float) -> dict[int, tuple[int, str]]:
    """pid -> (largest RSS seen in bytes, command line) for the process and its descendants, until it exits."""
    seen: dict[int, tuple[int, str]] = {}
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        for p in tree:
            try:
                rss = p.memory_info().rss
                line = " ".join(p.cmdline())[:100]
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            if rss > seen.get(p.pid, (0, ""))[0]:
                seen[p.pid] = (rss, line)
        time.sleep(interval)
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="yolov7")
    parser.add_argument("--imgsz", default="640")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between two looks at the tree")
    parser.add_argument("--bound", type=float, default=1.5, help="GB (10^9 bytes) asked of the largest process")
    parser.add_argument("collect_args", nargs="*", help="after --: more collect options")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hwprof-first-run-"))
    cache = work / "cache"
    cache.mkdir()
    out = work / "run"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "COLUMNS": "200"}
    command = [sys.executable, "-m", "hwprof", "collect", "--model", args.model, "--imgsz", args.imgsz]
    command += [*args.collect_args, "--no-report", "--out", str(out)]
    started = time.monotonic()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen = watch(proc, args.interval)
    _, stderr = proc.communicate()
    wall = time.monotonic() - started
    kernel_max = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    print(f"collect exit {proc.returncode} after {wall:.1f} s (an empty XDG_CACHE_HOME); run in {out}")
    if proc.returncode not in (0, 1):
        print(stderr.decode(errors="replace")[-1500:])
    passes = {}
    if (out / "run.json").is_file():
        passes = {p.get("pid"): name for name, p in json.loads((out / "run.json").read_text())["passes"].items()}
    print(f"\n{'pid':>8} {'largest RSS':>12}  process")
    for pid, (rss, line) in sorted(seen.items(), key=lambda kv: -kv[1][0]):
        what = f"the {passes[pid]} pass" if pid in passes else line
        print(f"{pid:>8} {rss / MB:9.0f} MiB  {what}")
    largest = max(rss for rss, _ in seen.values()) if seen else 0
    print(f"\nlargest seen every {args.interval:g} s: {largest / 1e9:.3f} GB; the kernel's maximum of the tree's")
    verdict = "under" if kernel_max < args.bound * 1e9 else "OVER"
    print(f"processes (ru_maxrss): {kernel_max / 1e9:.3f} GB, {verdict} the {args.bound:g} GB asked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
