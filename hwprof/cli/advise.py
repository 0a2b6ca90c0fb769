"""`hwprof advise RUN` and `collect --advise`: run the candidates with a progress bar each, then the table."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from hwprof.analysis.advice import Advice
from hwprof.cli.progress import PassProgress
from hwprof.session.stopping import StopSignals


def advise(
    run_dir: Path,
    console: Console,
    stop: StopSignals,
    blocks: int,
    layers: bool = True,
    locked: bool = False,
    only: tuple[str, ...] = (),
    prefix: str = "",
) -> Advice:
    """Run the candidates of the run in run_dir and write its advice.json; `locked`: the caller holds the
    run directory's lock (collect --advise); `only`: just these candidates (--only); `prefix`: of the options
    a refusal names (collect's "advise-")."""
    from hwprof.advisor.runner import AdviseRun, plan_advice
    from hwprof.rundir.lock import RunDirBusy, RunDirLock
    from hwprof.rundir.reader import RunDirError

    if blocks < 1:
        raise ValueError(f"--blocks must be at least 1 (got {blocks})")
    if not (run_dir / "run.json").is_file():
        raise RunDirError(f"{run_dir} is not a run directory (no run.json)")
    lock = None
    if not locked:
        try:
            lock = RunDirLock(run_dir, command="advise", fix="").acquire()
        except RunDirBusy as exc:
            raise RunDirError(str(exc)) from None
    try:
        recorded = _recorded(run_dir)
        if recorded is not None:
            return recorded
        plan = plan_advice(run_dir, blocks, layers, only, prefix)
        if plan.config.device != "cpu":
            from hwprof.hardware.gpu_device import require_cuda

            require_cuda(plan.config.device)
        names = ", ".join(c.key for c in plan.runnable) or "none"
        console.print(
            f"advising [bold]{run_dir}[/]: {len(plan.runnable)} candidate(s) to run ({names}), "
            f"{len(plan.candidates) - len(plan.runnable)} not run",
            highlight=False,
        )
        if plan.calls_line():
            console.print(plan.calls_line(), highlight=False)
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        ) as progress:
            return AdviseRun(plan, stop, PassProgress(progress, "advise")).run()
    finally:
        if lock is not None:
            lock.release()


def _recorded(run_dir: Path) -> Advice | None:
    """An imported GPU run (hwprof gpu-import) has no pipeline to run here: its advice is the recorded
    experiments' (written anew, so a changed rule applies to it)."""
    from hwprof.gpu.rundir import write_recorded_advice
    from hwprof.rundir.reader import RunData

    return write_recorded_advice(run_dir) if RunData.load(run_dir).doc.imported is not None else None


def cmd_advise(args: argparse.Namespace, console: Console) -> int:
    """Run the candidates, print the table, then rewrite summary.json, advice.csv and the trace with it."""
    from hwprof.analysis.run_analysis import analyse
    from hwprof.render.advice_table import advice_renderables
    from hwprof.rundir.reader import RunData
    from hwprof.session.finish import write_report, write_trace

    stop: StopSignals = args.stop
    result = advise(args.run_dir, console, stop, args.blocks, layers=not args.no_layers, only=only_keys(args))
    for renderable in advice_renderables(result, console):
        console.print(renderable)
    data = RunData.load(args.run_dir)
    write_report(analyse(data), data, console)
    write_trace(args.run_dir, console)
    console.print(f"advice.json written in {args.run_dir}", highlight=False)
    return stop.exit_code if stop.requested else 0


def only_keys(args: argparse.Namespace) -> tuple[str, ...]:
    """--only's candidate keys (collect: --advise-only)."""
    return tuple(k.strip() for k in (getattr(args, "advise_only", "") or "").split(",") if k.strip())


def add_advise_args(p: argparse.ArgumentParser, prefix: str = "") -> None:
    from hwprof.advisor.runner import DEFAULT_BLOCKS

    p.add_argument(
        f"--{prefix}blocks",
        dest="blocks",
        type=int,
        default=DEFAULT_BLOCKS,
        help="ABBA blocks per candidate (4 iterations each)",
    )
    p.add_argument(
        f"--{prefix}no-layers",
        dest="no_layers",
        action="store_true",
        help="skip the layers collect of each variant (no per-layer deltas)",
    )
    p.add_argument(
        f"--{prefix}only",
        dest="advise_only",
        default="",
        metavar="KEYS",
        help="run only these candidates (comma list of keys, e.g. malloc-keep,jemalloc), each even where no "
        "finding of the run points to it; advice.json then holds only their rows",
    )
