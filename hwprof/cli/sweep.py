"""`hwprof sweep`: its options as the library's SweepRequest, run by the library (hwprof.api.sweeping)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from hwprof.api.sweeping import SweepRequest
from hwprof.session.stopping import StopSignals


def cmd_sweep(args: argparse.Namespace, console: Console) -> int:
    from hwprof.api.sweeping import run_sweep_request

    request = sweep_request(args)
    if request.submit:
        return _submit(request, console)
    stop: StopSignals = args.stop
    result = run_sweep_request(request, console, stop)
    if stop.requested:
        return stop.exit_code
    code = 0 if all(r.status in ("complete", "reused") for r in result.rows) else 1
    if getattr(args, "track", None) is None:
        return code
    return _track(args, request, [Path(r.run_dir) for r in result.rows if r.run_dir], console, code)


def _track(args: argparse.Namespace, request: SweepRequest, runs: list[Path], console: Console, code: int) -> int:
    """The sweep as a parent MLflow run, its points' runs as children (hwprof.api.tracking)."""
    from hwprof.api.tracking import track_sweep
    from hwprof.cli.track import say_to, tracked

    kept = [r for r in runs if (r / "run.json").is_file()]
    params = {
        "models": ",".join(request.models), "runtimes": ",".join(request.runtimes),
        "precisions": ",".join(request.precisions), "threads": ",".join(map(str, request.threads)),
        "batch": ",".join(map(str, request.batch)), "imgsz": str(request.imgsz), "device": request.device,
    }  # fmt: skip
    return tracked(console, code, lambda: track_sweep(request.out, kept, args.track or None, params, say_to(console)))


def sweep_request(args: argparse.Namespace) -> SweepRequest:
    """sweep's options (argparse has converted each and checked its choices) as the request."""
    return SweepRequest(
        models=tuple(args.models),
        runtimes=tuple(args.runtimes),
        precisions=tuple(args.precisions),
        threads=tuple(args.threads),
        batch=tuple(args.batch),
        device=args.device,
        imgsz=args.imgsz,
        iters=args.iters,
        warmup=args.warmup,
        timeout=args.timeout,
        out=args.out,
        advise=args.advise,
        collect_args=tuple(args.collect_args),
        format=args.format,
        ray=args.ray,
        per_host=args.per_host,
        hosts=tuple(args.hosts),
        resume=args.resume,
        local=args.local,
        submit=args.submit,
    )


def _submit(request: SweepRequest, console: Console) -> int:
    """--submit: the sweep handed to the cluster as a Ray Job, and how to follow it."""
    from hwprof.api.sweeping import submit_sweep_request
    from hwprof.cli.sweep_job import ACTIONS

    record, points = submit_sweep_request(request)
    say = console.print
    say(f"submitted job {record.submission_id}: {points} points, writing to {record.head_dir} on the head")
    for action in ACTIONS:
        say(f"  hwprof sweep-job {action} {request.out}", highlight=False, markup=False)
    return 0
