"""`hwprof sweep`: collect every point with a progress bar, then print the table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from hwprof.analysis.sweep_rows import SweepResult
from hwprof.render.compare import by_host, render_sweep
from hwprof.sweep.run import ProgressFn, SweepEvent, SweepPlan, run_sweep


def sweep(
    plan: SweepPlan,
    console: Console | None = None,
    runner: Callable[[SweepPlan, ProgressFn], SweepResult] = run_sweep,
) -> SweepResult:
    """`hwprof sweep --models ... [--runtimes ...] [--precisions ...] [--threads ...] [--batch ...]`: collect
    every point, print the table."""
    console = console or Console()
    plan.validate()
    for line in plan.skipped():
        console.print(line, highlight=False, markup=False)
    with Progress(
        TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as progress:
        task = progress.add_task("sweep", total=len(plan.points()))

        def show(event: SweepEvent) -> None:
            progress.console.print(str(event), highlight=False, markup=False)
            if event.done:
                progress.advance(task)

        result = runner(plan, show)
    render_sweep(result, console)
    from hwprof.render.sweep_plot import plot_sweep
    from hwprof.rundir.names import SWEEP_PNG
    from hwprof.rundir.writer import write_png

    png = plot_sweep(by_host(result.rows))
    if png is not None:
        plot = write_png(Path(result.out_root) / SWEEP_PNG, png)
        console.print(f"plot: {plot} (latency per point, by kind of machine)", highlight=False)
    if result.resume:  # last, where a stopped sweep's user looks
        console.print(f"to run the points that did not finish: {result.resume}", highlight=False, markup=False)
    return result
