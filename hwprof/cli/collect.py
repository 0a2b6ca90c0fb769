"""`hwprof collect`: its options as the library's CollectRequest, run by the library (hwprof.api.collecting)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from hwprof.api.requests import CollectRequest, program_of
from hwprof.cli.advise import advise_request
from hwprof.core.config import RunConfig, until_resolved
from hwprof.session.stopping import StopSignals


def cmd_collect(args: argparse.Namespace, console: Console) -> int:
    from hwprof.api.collecting import run_collect

    request = collect_request(args)
    if getattr(args, "dump_config", False):
        from hwprof.cli.args import build_parser, command_parser
        from hwprof.cli.config_file import dump_toml

        sys.stdout.write(dump_toml(args, command_parser(build_parser(), "collect"), "collect"))
        return 0
    stop: StopSignals | None = getattr(args, "stop", None)
    done = run_collect(request, console, stop)
    if getattr(args, "track", None) is None or (stop is not None and stop.requested):
        return done.exit_code
    from hwprof.cli.track import track_after

    return track_after(console, done.exit_code, [done.run_dir], args.track, request.results)


def collect_request(args: argparse.Namespace) -> CollectRequest:
    """collect's options (argparse has converted each and checked its choices) as the request."""
    return CollectRequest(
        config=config_from(args),
        out=Path(args.out) if args.out else None,
        results=Path(args.results),
        report=not args.no_report,
        advise=advise_request(args) if args.advise else None,
        command_line=tuple(getattr(args, "command_line", None) or sys.argv),
        config_file=args.config_file.to_json() if getattr(args, "config_file", None) is not None else None,
    )


def config_from(args: argparse.Namespace) -> RunConfig:
    config = RunConfig(
        model=args.model,
        runtime=args.runtime,
        precision=args.precision,
        device=args.device,
        channels_last=args.channels_last,
        weights=args.weights,
        images=args.images,
        annotate=args.annotate,
        imgsz=args.imgsz,
        batch=args.batch,
        threads=args.threads,
        warmup=RunConfig.warmup if args.warmup is None else args.warmup,
        iters=RunConfig.iters if args.iters is None else args.iters,
        depth=args.depth,
        conf=args.conf,
        iou=args.iou,
        seed=args.seed,
        only=args.only,
        skip=args.skip,
        events=args.events,
        counters=args.counters,
        counter_reads=args.counter_reads,
        counter_threads=args.counter_threads,
        interval_ms=args.interval_ms,
        pyspy_rate=args.pyspy_rate,
        pyspy_native=args.pyspy_native,
        perf_rate=args.perf_rate,
        scalene_memory=args.scalene_memory,
        profiler_stack=args.profiler_stack,
        pass_timeout_s=args.timeout,
        budget_s=args.budget,
        extra={"rect": args.rect, **until_resolved(args.iters, args.warmup)},
        program=program_of(
            getattr(args, "program", None), args.program_model, args.program_end, args.stage, args.program_stdin
        ),
    )
    config.validate()
    return config
