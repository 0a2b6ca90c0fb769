"""The processes `hwprof advise` starts: a paired worker per candidate, and a layers collect per variant.

Each runs in a session of its own with a time-out (hwprof.session.child), its JSON progress lines relayed, and
the first stop signal forwarded to it (hwprof.session.stopping), as a pass's worker is; a paired worker with the
advise's own environment is forked by advise's zygote (hwprof.session.zygote), its imports done.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hwprof.core.config import RunConfig
from hwprof.rundir.advise_files import write_advise_spec
from hwprof.rundir.logs import child_log
from hwprof.schema.advise_result import AdviseSpec
from hwprof.session import child, zygote
from hwprof.session.stopping import StopSignals
from hwprof.session.worker_io import ProgressEvent, progress_from_json
from hwprof.session.zygote import Zygote

LAYERS_COLLECTORS = "timing,flops"
"""A layers pass with no counter collector: per-layer times (layer hooks), scaled to a clean timing pass."""
OnProgress = Callable[[ProgressEvent], None]


@dataclass
class ChildOutcome:
    returncode: int | None
    """None: timed out (killed)."""
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run_child(
    command: list[str],
    log: Path,
    timeout_s: float,
    stop: StopSignals,
    on_progress: OnProgress,
    env: dict[str, str] | None = None,
    forks: Zygote | None = None,
) -> ChildOutcome:
    """Run `command` to its end (or its time-out, or a stop signal), stderr to `log`; forked by `forks` where
    it may be."""

    def on_line(line: str) -> None:
        event = progress_from_json(line)
        if event is not None:
            on_progress(event)

    full_env = {**child_env(), **(env or {})}
    with child_log(log) as err:
        proc = zygote.start(forks, command, os.getcwd(), full_env, err)
        with stop.child(proc.pid):
            try:
                exited_at = child.follow(proc, timeout_s, lambda line, _at: on_line(line), lambda: stop.first_at)
            except KeyboardInterrupt:
                child.stop(proc, grace_s=0.0)
                child.stop_session(proc.pid, 0.0)
                proc.wait()
                raise
            if exited_at is None:
                child.stop(proc, grace_s=0.0 if stop.requested else child.TERM_GRACE_S)
        child.stop_session(proc.pid, exited_at or 0.0)
        returncode = proc.wait()
    if exited_at is None:
        return ChildOutcome(None, f"ran past its {timeout_s:.0f} s time-out (killed)")
    if returncode != 0:
        return ChildOutcome(returncode, child.exit_reason(returncode, log))
    return ChildOutcome(0)


PAIRED_WORKER = "hwprof.advisor.paired_worker"


def child_env() -> dict[str, str]:
    """The environment of a child with no variable of its own (a zygote's for those children)."""
    return {**os.environ, **child.CHILD_ENV}


def paired_command(spec: AdviseSpec, spec_path: Path) -> list[str]:
    write_advise_spec(spec_path, spec)
    return [sys.executable, "-P", "-m", PAIRED_WORKER, str(spec_path)]


def collect_options(config: RunConfig) -> list[str]:
    """The `hwprof collect` options that give this configuration's pipeline (what differs from the defaults)."""
    d = RunConfig()
    out = ["--model", config.model]
    for name in ("runtime", "precision", "device", "imgsz", "batch", "threads", "conf", "iou", "seed"):
        value = getattr(config, name)
        if name == "threads" or value != getattr(d, name):
            out += [f"--{name}", str(value)]
    if config.channels_last:
        out.append("--channels-last")
    if config.extra.get("rect"):
        out.append("--rect")
    for name in ("weights", "images"):
        if getattr(config, name):
            out += [f"--{name}", str(getattr(config, name))]
    return out


def layers_command(config: RunConfig, out_dir: Path, iters: int, warmup: int) -> list[str]:
    """A real `hwprof collect` of the configuration: a timing pass and a layers pass with the FLOP counter."""
    return [
        sys.executable,
        "-m",
        "hwprof",
        "collect",
        *collect_options(config),
        "--only",
        LAYERS_COLLECTORS,
        "--iters",
        str(iters),
        "--warmup",
        str(warmup),
        "--no-report",
        "--out",
        str(out_dir),
    ]
