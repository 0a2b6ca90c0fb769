"""`hwprof attach PID`: a running service's model measured over windows of its own calls (hwprof.agent), into an
ordinary run directory. The attach's session is a connection to the service's agent held open for the whole
attach (a second attach is refused while it is); each pass is a collect's pass whose process is a relay to the
window in the service (hwprof.agent.relay), so that the run directory, the report and the trace are a collect's."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from hwprof.api.requests import CollectRequest
from hwprof.core.config import RunConfig
from hwprof.core.program_spec import ProgramSpec
from hwprof.session.stopping import StopSignals

DEFAULT_CALLS = 20


def add_attach_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`hwprof attach`'s parser among the commands."""
    from hwprof.cli import help_text as h

    line = "profile a running service's model, per layer, under its traffic"
    add_attach_args(sub.add_parser("attach", **h.described(line, h.ATTACH, h.ATTACH_EXAMPLES)))


def add_attach_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("pid", type=int, metavar="PID", help="the service's process ID (it started hwprof's agent)")
    window = p.add_mutually_exclusive_group()
    window.add_argument("--calls", type=int, default=None, help=f"measured calls per window (default {DEFAULT_CALLS})")
    window.add_argument("--seconds", type=float, default=None, help="each window measures for this long instead")
    p.add_argument("--program-model", metavar="NAME", help="the model as the service's code names it (model.detector)")
    p.add_argument("--warmup", type=int, default=2, help="calls before each window measures (default 2)")
    p.add_argument(
        "--only",
        type=lambda text: [n for n in text.split(",") if n],
        default=None,
        help="collectors to run, as collect's --only (default: every one that can join a running process)",
    )
    p.add_argument("--out", type=Path, help="the run directory to write (default: results/<service>-<time>)")
    p.add_argument("--results", type=Path, default=Path("results"), help="where run directories go (default results/)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds a window may take (default 600)")
    p.add_argument("--no-report", action="store_true", help="write the run directory only")
    p.add_argument(
        "--no-agent",
        action="store_true",
        help="a process without the agent: its kernels (perf record -p) and Python stacks (py-spy) sampled from "
        "outside for --seconds (10), whole-process, no layer named",
    )


def cmd_attach(args: argparse.Namespace, console: Console) -> int:
    from hwprof.agent.client import connect, first_reply, outside_facts
    from hwprof.agent.relay import TOKEN_ENV
    from hwprof.api.collecting import run_collect

    check_args(args)
    stop: StopSignals | None = getattr(args, "stop", None)
    if args.no_agent:
        return run_collect(attach_request(args, outside_facts(args.pid)), console, stop).exit_code
    channel = connect(args.pid)
    try:
        channel.send(op="hello")
        reply = first_reply(channel, args.pid)
        request = attach_request(args, reply.get("facts") or {})
        os.environ[TOKEN_ENV] = str(reply.get("token") or "")
        return run_collect(request, console, stop).exit_code
    finally:
        channel.close()


def check_args(args: argparse.Namespace) -> None:
    """ValueError (one line) for options no window can run with."""
    if args.calls is not None and args.calls < 1:
        raise ValueError(f"--calls must be at least 1 (got {args.calls})")
    if args.seconds is not None and not args.seconds > 0:
        raise ValueError(f"--seconds must be above 0 (got {args.seconds:g})")
    if args.no_agent and args.calls is not None:
        raise ValueError("--calls counts the calls of a model the agent finds: with --no-agent, give --seconds")
    if args.warmup < 1:
        raise ValueError(f"--warmup must be at least 1 (got {args.warmup}): the first call after the choice sets up")


def attach_request(args: argparse.Namespace, facts: dict[str, Any]) -> CollectRequest:
    """The attach as a collect's request: the service's command as the program, each window a pass."""
    argv = [str(a) for a in facts.get("argv") or ["service"]]
    spec = ProgramSpec(
        argv=argv,
        cwd=str(facts.get("cwd") or os.getcwd()),
        model_path=args.program_model,
        end="run",
        attached=args.pid,
    )
    if args.no_agent:
        spec.outside = True
        return outside_request(args, spec)
    calls = args.calls if args.calls is not None else DEFAULT_CALLS
    if args.seconds is not None:
        calls = 100_000  # --seconds ends the window; its count is only a bound
    config = RunConfig(
        threads=int(facts.get("torch_threads") or 1),
        warmup=args.warmup,
        iters=calls,
        only=list(args.only or []),
        pass_timeout_s=args.timeout,
        extra={"paired": True},
        program=spec,
    )
    if args.seconds is not None:
        config.extra["attach_seconds"] = args.seconds
    return _request(args, config)


def _request(args: argparse.Namespace, config: RunConfig) -> CollectRequest:
    """The attach's config, checked, with attach's output options as a collect's request."""
    config.validate()
    return CollectRequest(
        config=config, out=args.out, results=args.results, report=not args.no_report, command_line=tuple(sys.argv)
    )


OUTSIDE_COLLECTORS = ("perf_sampling", "pyspy")
"""What samples a process from outside, with no agent in it."""
OUTSIDE_RATE = 100
"""py-spy's rate (Hz) from outside: its module classes' shares rest on the samples that fall in a forward, a small
part of an idle-between-requests service's time (25 Hz, collect's default, gave 91 ms of forwards in 4 s of a
service at 6 requests per second: too few to see its Detect head)."""


def outside_request(args: argparse.Namespace, spec: ProgramSpec) -> CollectRequest:
    """--no-agent: the process sampled from outside for --seconds, whole-process (hwprof.agent.outside)."""
    from hwprof.agent.outside import DEFAULT_SECONDS

    only = [name for name in (args.only or OUTSIDE_COLLECTORS) if name in OUTSIDE_COLLECTORS]
    if not only:
        raise ValueError(f"--no-agent samples with {' and '.join(OUTSIDE_COLLECTORS)} alone: --only names neither")
    config = RunConfig(
        threads=1, warmup=1, iters=1, only=only, pass_timeout_s=args.timeout, program=spec, pyspy_rate=OUTSIDE_RATE
    )
    config.extra["attach_seconds"] = args.seconds if args.seconds is not None else DEFAULT_SECONDS
    return _request(args, config)
