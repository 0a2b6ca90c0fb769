"""One sweep over yolov5nu..yolov5xu on this host, printed as a table (and as Markdown with --markdown).

    python scripts/sweep_yolov5.py --imgsz 640 --iters 5 --warmup 1 --out results/sweep-yolov5

Equivalent to `hwprof sweep --models yolov5nu,yolov5su,yolov5mu,yolov5lu,yolov5xu ...`, plus the
Markdown table and the sweep's wall time. Like the CLI, each point runs `--only timing,flops,rapl`
unless --only says otherwise (see hwprof.sweep.points). Points already complete in --out are reused, so
an interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console

from hwprof.core.config import default_threads
from hwprof.render.compare import sweep_markdown
from hwprof.sweep.command import sweep
from hwprof.sweep.points import DEFAULT_COLLECTORS, SweepPlan

MODELS = ("yolov5nu", "yolov5su", "yolov5mu", "yolov5lu", "yolov5xu")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--threads", default=str(default_threads()), help="comma list")
    p.add_argument("--batch", default="1", help="comma list")
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--only", default=DEFAULT_COLLECTORS, help="collectors per point")
    p.add_argument("--timeout", type=float, default=None, help="seconds per point")
    p.add_argument("--out", type=Path, default=Path("results/sweep-yolov5"))
    p.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    args = p.parse_args()
    console = Console()
    plan = SweepPlan(
        [m for m in args.models.split(",") if m],
        [int(t) for t in args.threads.split(",")],
        [int(b) for b in args.batch.split(",")],
        args.out,
        imgsz=args.imgsz,
        iters=args.iters,
        warmup=args.warmup,
        extra_args=["--only", args.only],
        timeout_s=args.timeout,
    )
    started = time.monotonic()
    result = sweep(plan, console)
    if args.markdown:
        print(sweep_markdown(result))
    console.print(f"sweep took {time.monotonic() - started:.0f} s; table in {args.out}/sweep.json and sweep.csv")
    return 0 if all(r.status in ("complete", "reused") for r in result.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
