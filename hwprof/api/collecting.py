"""Running a collect (`hwprof collect`, hwprof.collect): the checks before any pass (hwprof.api.collect_checks),
the passes with a progress line each, the report, the trace, and the exit status, from one CollectRequest whichever
door it came through."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from hwprof.analysis.run_status import lingering_lines, run_problems
from hwprof.api.collect_checks import checked_request
from hwprof.api.progress import PassProgress, progress_bars
from hwprof.api.requests import AdviseRequest, CollectRequest
from hwprof.core.config import RunConfig
from hwprof.rundir.names import RUN_JSON
from hwprof.session.finish import write_trace
from hwprof.session.stopping import StopSignals
from hwprof.session.zygote import Zygote

if TYPE_CHECKING:
    from hwprof.analysis.run_analysis import Analysis
    from hwprof.core.atomic import SpaceReserve
    from hwprof.rundir.reader import RunData
    from hwprof.schema.run import RunDoc
    from hwprof.session.collection import Session
    from hwprof.session.disk_estimate import SizeEstimate
    from hwprof.session.plan import Plan
    from hwprof.workload.images import ImageSet


@dataclass(frozen=True)
class Collected:
    """What a collect ended with: its exit status (0, 1 where passes or collectors failed, 128 + a stop signal),
    and its run directory (a collect refused before it made one raises instead)."""

    exit_code: int
    run_dir: Path


def run_collect(request: CollectRequest, console: Console, stop: StopSignals | None = None) -> Collected:
    """Check the request (ValueError, one line, before anything is made), claim its run directory, run the
    passes, then the advice where asked, the report and the trace."""
    from hwprof.session.pass_inputs import start_zygote

    config = dataclasses.replace(request.config)  # the request's config is the caller's: paths resolved in a copy
    images = checked_request(config, console)
    stop = stop or StopSignals()
    # its imports (3-4 s) beside the probes and the run's set-up, which the first pass waited for after them
    zygote = start_zygote(config)
    try:
        if zygote is not None:
            _preload_report(stop)
        return _checked_collect(request, config, images, console, stop, zygote)
    finally:
        if zygote is not None:
            zygote.close()


def _preload_report(stop: StopSignals) -> None:
    """matplotlib, which the report's plots import after the passes (0.55 s on the 2-vCPU Xeon), imported while the
    zygote imports torch on the other CPU: the first pass waited 2.1 s for the zygote in a one-pass collect of
    yolov8n at 64. Its C extensions initialise where no stop signal cuts them (write_report's reason)."""
    from hwprof.render.figures import import_matplotlib

    with stop.deferred():
        import_matplotlib()


def _checked_collect(
    request: CollectRequest,
    config: RunConfig,
    images: ImageSet,
    console: Console,
    stop: StopSignals,
    zygote: Zygote | None,
) -> Collected:
    from hwprof.core.folders import check_folder
    from hwprof.session.disk_estimate import check_free, estimate
    from hwprof.session.plan import claim_out_dir, new_run_dir, plan_passes
    from hwprof.session.rlimits import check_limits

    check_folder(*((request.out, "--out") if request.out else (request.results, "--results")))  # before the probes
    plan = plan_passes(config)
    if not plan.passes:
        raise ValueError("no collector can run on this host with these options (see `hwprof doctor`)")
    check_limits(config)
    size = estimate(plan, config)
    check_free(request.out if request.out else request.results, size)
    made = request.out is None or not request.out.exists()
    run_dir, lock = claim_out_dir(request.out) if request.out else new_run_dir(request.results, config.model)
    try:
        if lock.took_over:
            console.print(
                f"[yellow]note:[/] took over the lock of {run_dir} left by {lock.took_over.describe()}, "
                "which is no longer running",
                highlight=False,
            )
        code = _collect_into(run_dir, config, images, plan, stop, request, console, size, zygote)
        return Collected(code, run_dir)
    finally:
        lock.release()
        if made and not (run_dir / RUN_JSON).exists():  # stopped before the run began: no empty folder left
            with contextlib.suppress(OSError):
                run_dir.rmdir()


def _collect_into(
    run_dir: Path,
    config: RunConfig,
    images: ImageSet,
    plan: Plan,
    stop: StopSignals,
    request: CollectRequest,
    console: Console,
    disk_estimate: SizeEstimate,
    zygote: Zygote | None,
) -> int:
    """The passes, then the report of what was collected; holds the run directory's lock (the caller's)."""
    from hwprof.rundir.reader import RunData

    exit_code, session = _run_passes(run_dir, config, images, plan, stop, console, disk_estimate, request, zygote)
    if exit_code is not None:
        return exit_code
    if config.attached is not None:
        _yield_to_the_service()
    if stop.escalated:
        console.print(
            f"[red]interrupted[/] by {stop.name} twice: every process of the pass was killed; run.json, "
            f"summary.json and layers.csv of what was kept are in {run_dir} (the trace and plots were skipped: "
            f"`hwprof report {run_dir}` and `hwprof trace {run_dir}` build them)",
            highlight=False,
            soft_wrap=True,
        )
        return stop.exit_code
    analysis = session.analysis
    if request.advise is not None and not stop.requested:
        _advise_after(run_dir, request.advise, console, stop)
        analysis = None  # advice.json is new: the report's analysis reads it
    if stop.requested:
        console.print(
            f"[red]interrupted[/] by {stop.name}: the passes that ran are kept in {run_dir}; "
            "writing the report of what was kept (a second signal skips it)",
            highlight=False,
            soft_wrap=True,
        )
    data = session.data if session.data is not None else RunData.load(run_dir)
    exit_code = _render_collected(run_dir, data, analysis, request.report, console, stop)
    if exit_code is not None:
        return exit_code
    console.print(f"run directory: {run_dir}")
    return _final_status(data.doc, console, stop)


ATTACHED_NICE = 10
"""The niceness of hwprof's own work after an attach's last window (its report and trace): the service it shares
the CPUs with is not measured any more, and its requests came back to 1.17x and 0.99x of their time before the
attach in that phase at nice 10, against 1.88x and 2.03x at 0 (bench_attach, 2 runs each, 2026-11-29)."""


def _yield_to_the_service() -> None:
    """After an attach's windows: hwprof's report and trace (the trace's child too) yield the CPUs to the service."""
    with contextlib.suppress(OSError):
        os.nice(ATTACHED_NICE)


def _run_passes(
    run_dir: Path,
    config: RunConfig,
    images: ImageSet,
    plan: Plan,
    stop: StopSignals,
    console: Console,
    disk_estimate: SizeEstimate,
    request: CollectRequest,
    zygote: Zygote | None,
) -> tuple[int | None, Session]:
    """The passes under a progress bar each; the exit status where they were cut short (None: go on), and
    the session (its finished run and analysis). A collect that cannot go on (the workload failed) raises
    CollectError with its line and where the partial results are. `request`: run.json's command and config
    file; `zygote`: the passes' (hwprof.session.zygote), started before the run directory was set up."""
    from hwprof.session.collection import Session
    from hwprof.session.plan import CollectError

    console.print(
        f"collecting into [bold]{run_dir}[/]: passes "
        + ", ".join(f"{p.name} ({', '.join(c.name for c in p.collectors)})" for p in plan.passes)
    )
    with progress_bars(console) as progress:
        session = Session(config, run_dir, images, PassProgress(progress), stop)
        session.disk_estimate = disk_estimate
        session.config_file = request.config_file
        session.zygote = zygote
        try:
            session.collect(plan, list(request.command_line))
        except KeyboardInterrupt:  # a third signal cut the exports (run.json is final)
            progress.stop()
            console.print(
                f"[red]interrupted[/] ({stop.name or 'SIGINT'}, {stop.count} times): run.json is final in {run_dir}"
            )
            return stop.exit_code, session
        except CollectError as exc:
            raise CollectError(f"{exc} (partial results in {run_dir})") from exc
    return None, session


def _render_collected(
    run_dir: Path,
    data: RunData,
    analysis: Analysis | None,
    report: bool,
    console: Console,
    stop: StopSignals,
) -> int | None:
    """The report (or, with --no-report or after a stop, only its files) and the trace, from the finished run
    and its analysis (made here when the exports did not make it); the exit status where they could not be
    written (None: go on). A full disk is recorded in run.json and raised."""
    from hwprof.analysis.run_analysis import analyse
    from hwprof.core.atomic import DiskFullError
    from hwprof.core.gc_pause import gc_paused
    from hwprof.session.finish import (
        record_render_error,
        refresh_report_page,
        report_after_collect,
        write_report,
    )
    from hwprof.trace.forked import TraceChild

    what = "report"
    reserve = _render_reserve(run_dir)
    try:
        analysis = analysis if analysis is not None else analyse(data)
        with TraceChild(run_dir, data) as child, gc_paused():  # the trace built beside the report, on the other CPU
            if not report or stop.requested:
                write_report(analysis, data, console)
            else:
                report_after_collect(analysis, data, console)
            what = "trace"
            if write_trace(run_dir, console, data, beside=child):
                refresh_report_page(analysis, data, console)  # it said "not built yet" of the trace just built
    except KeyboardInterrupt:
        console.print(
            f"[red]interrupted[/] while writing the report: the run is kept in {run_dir}; "
            f"`hwprof report {run_dir}` and `hwprof trace {run_dir}` build it again",
            highlight=False,
            soft_wrap=True,
        )
        return stop.exit_code
    except DiskFullError as exc:  # the collection is complete; its rendering is not: exit 1 with the path
        if reserve is not None:
            reserve.release()  # (release is idempotent)
        record_render_error(run_dir, data.doc, what, exc)
        raise
    except Exception as exc:  # the collection is on disk; only its rendering failed (e.g. Ctrl-C inside an import)
        console.print(
            f"[red]hwprof: error:[/] the report could not be written ({type(exc).__name__}: {exc}); the run is kept "
            f"in {run_dir}: `hwprof report {run_dir}` and `hwprof trace {run_dir}` build it again",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    finally:
        if reserve is not None:
            reserve.release()
    return None


def _final_status(run: RunDoc, console: Console, stop: StopSignals) -> int:
    """Warnings of processes left running, then the exit status: a stop's, 1 where the run has problems."""
    for line in lingering_lines(run):
        console.print(f"[yellow]warning:[/] {line}", highlight=False)
    if stop.requested:
        return stop.exit_code
    problems = run_problems(run)
    for problem in problems:
        console.print(f"[red]hwprof: error:[/] {problem}", highlight=False, soft_wrap=True)
    return 1 if problems else 0


def _advise_after(run_dir: Path, request: AdviseRequest, console: Console, stop: StopSignals) -> None:
    """collect --advise: the candidates run once the passes are done; a failure of the advice keeps the run
    and its report (the report says what advice.json holds, or nothing when none was written)."""
    from hwprof.api.advising import run_advise

    try:
        run_advise(run_dir, request, console, stop, locked=True, prefix="advise-")
    except (ValueError, OSError) as exc:
        console.print(
            f"[red]hwprof: error:[/] the advice could not be run ({exc}); the run is kept in {run_dir}: "
            f"`hwprof advise {run_dir}` runs it again",
            highlight=False,
            soft_wrap=True,
        )


def _render_reserve(run_dir: Path) -> SpaceReserve | None:
    """Room for run.json's render_errors entry should the disk fill up while the report, plots and trace are
    written (twice run.json's size: the new one is written beside the old). Best effort: on a disk already
    too full for it, the rendering goes on without one."""
    from hwprof.core.atomic import DiskFullError, SpaceReserve

    try:
        return SpaceReserve(run_dir, 2 * (run_dir / "run.json").stat().st_size + 8192)
    except (DiskFullError, OSError):
        return None
