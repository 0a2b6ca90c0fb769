"""What the collect's zygote saves (hwprof.session.zygote): the same collect with its passes forked from the zygote
and with every pass started as a fresh `python -P -m hwprof.session.worker` (the zygote switched off in that
collect's process), in ABBA order, `--repeats` times, on one host in one run.

Each collect is a child `hwprof collect ... --no-report`; its wall time is taken from outside, its passes' from
run.json (wall_s: launch to exit, the worker's start-up included). Printed: per variant, the median collect and
pass walls with their range, and the ratio zygote/fresh of the medians. A ratio from a loaded host is printed
with the load average before and after: compare only figures of one run.

    python scripts/bench_startup.py --repeats 3
    python scripts/bench_startup.py -- --model yolov7 --only timing,layers,trace   # the options after -- go to collect
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

DEFAULT = [
    "--model",
    "yolov8n",
    "--imgsz",
    "64",
    "--iters",
    "3",
    "--warmup",
    "1",
    "--only",
    "timing,flops,torch_profiler",
]
CHILD = """
import sys
from unittest import mock
if sys.argv[1] == "fresh":
    import hwprof.session.zygote as zygote
    mock.patch.object(zygote.Zygote, "start", return_value=None).start()
from hwprof.cli.entry import main
sys.exit(main(sys.argv[2:]))
"""


def one(variant: str, options: list[str], folder: Path) -> dict[str, float]:
    out = folder / f"{variant}-{time.monotonic_ns()}"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-P", "-c", CHILD, variant, "collect", *options, "--no-report", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"bench_startup.py: the {variant} collect exited {done.returncode}: {done.stderr.strip()[-500:]}")
    passes = json.loads((out / "run.json").read_text())["passes"]
    return {"collect": wall, **{name: float(p["wall_s"]) for name, p in passes.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="ABBA blocks (default 3)")
    parser.add_argument("collect", nargs="*", help="collect's options after -- (default: %(default)s)")
    args = parser.parse_args()
    options = args.collect or DEFAULT
    figures: dict[str, list[dict[str, float]]] = {"zygote": [], "fresh": []}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="hwprof-bench-startup-") as scratch:
        for block in range(args.repeats):
            for variant in ("zygote", "fresh", "fresh", "zygote"):
                figures[variant].append(one(variant, options, Path(scratch)))
            print(f"block {block + 1}/{args.repeats} done", file=sys.stderr, flush=True)
    print(
        f"collect {' '.join(options)}; {args.repeats} ABBA blocks; load {load_before:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    names = list(figures["zygote"][0])
    print(f"{'wall (s)':<12} {'zygote median [range]':>26} {'fresh median [range]':>26} {'ratio':>7}")
    for name in names:
        med = {}
        for variant in ("zygote", "fresh"):
            values = [f[name] for f in figures[variant]]
            med[variant] = (statistics.median(values), min(values), max(values))
        z, f = med["zygote"], med["fresh"]
        print(
            f"{name:<12} {z[0]:>9.2f} [{z[1]:.2f}, {z[2]:.2f}]{'':>5} {f[0]:>9.2f} [{f[1]:.2f}, {f[2]:.2f}]{'':>5}"
            f" {z[0] / f[0]:>7.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
