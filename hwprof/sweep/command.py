"""`hwprof sweep`: collect every point with a progress bar, then print the table."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from hwprof.analysis.sweep.rows import SweepResult
from hwprof.render.compare.views import by_host, render_sweep, sweep_markdown, sweep_specs
from hwprof.sweep.points import ProgressFn, SweepEvent, SweepPlan, run_sweep


def sweep(
    plan: SweepPlan,
    console: Console | None = None,
    runner: Callable[[SweepPlan, ProgressFn], SweepResult] = run_sweep,
    format: str = "rich",
) -> SweepResult:
    """`hwprof sweep --models ... [--runtimes ...] [--precisions ...] [--threads ...] [--batch ...]`: collect
    every point, print the table (rich or markdown; html: only where the page is), write sweep.png and
    sweep.html."""
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
    if format == "markdown":
        (console.file or sys.stdout).write(sweep_markdown(result) + "\n")
    elif format != "html":
        render_sweep(result, console)
    from hwprof.render.html import render_tables_page
    from hwprof.render.sweep.plot import plot_sweep
    from hwprof.rundir.names import SWEEP_HTML, SWEEP_PNG
    from hwprof.rundir.writer import write_png, write_report_html

    png = plot_sweep(by_host(result.rows))
    if png is not None:
        plot = write_png(Path(result.out_root) / SWEEP_PNG, png)
        console.print(f"plot: {plot} (latency per point, by kind of machine)", highlight=False)
    title = f"hwprof sweep: {len(result.rows)} points in {result.out_root}"
    page = render_tables_page(title, sweep_specs(result), plots={SWEEP_PNG: png} if png is not None else None)
    console.print(
        f"page: {write_report_html(Path(result.out_root), page, SWEEP_HTML)}", highlight=False, soft_wrap=True
    )
    if result.resume:  # last, where a stopped sweep's user looks
        console.print(f"to run the points that did not finish: {result.resume}", highlight=False, markup=False)
    return result
