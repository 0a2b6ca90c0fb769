"""`hwprof sweep-job status|logs|stop|fetch DIR`: a sweep submitted as a Ray Job (`hwprof sweep ... --ray ADDRESS
--submit`, hwprof.api.sweeping), followed from here (hwprof/sweep/ray_job.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

ACTIONS = ("status", "logs", "stop", "fetch")


def add_sweep_job_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=ACTIONS, help="what to do with the submitted sweep")
    p.add_argument("dir", type=Path, metavar="DIR", help="the --out of `hwprof sweep ... --submit`")
    p.add_argument("--follow", action="store_true", help="with logs: keep printing until the job ends")


def cmd_sweep_job(args: argparse.Namespace, console: Console) -> int:
    from hwprof.sweep.ray_job import ENDED, fetch, logs, status, stop

    local: Path = args.dir
    if args.action == "status":
        state, line = status(local)
        console.print(line, highlight=False, markup=False, soft_wrap=True)
        return 1 if state == "FAILED" else 0
    if args.action == "logs":
        logs(local, args.follow, lambda text: (sys.stdout.write(text), sys.stdout.flush()))
        return 0
    if args.action == "stop":
        state = stop(local, lambda line: console.print(line, highlight=False, markup=False))
        console.print(f"job {state}; `hwprof sweep-job fetch {local}` brings its runs back", highlight=False)
        return 0
    got, state = fetch(local)
    size = sum(map(len, got.runs.values()))
    line = f"fetched {len(got.runs)} new runs ({size / 1e6:.2f} MB) and {len(got.files)} files into {local}"
    if state not in ENDED:
        line += f"; job {state}: fetch again for more"
    else:
        line += f"; job {state}"
    console.print(line, highlight=False, markup=False, soft_wrap=True)
    return 0
