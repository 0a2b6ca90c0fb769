"""Running an advise (`hwprof advise RUN`, `collect --advise`, hwprof.advise): the candidates with a progress bar
each, written to the run's advice.json."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from hwprof.analysis.advice.table import Advice
from hwprof.api.progress import PassProgress, progress_bars
from hwprof.api.requests import AdviseRequest
from hwprof.session.stopping import StopSignals


def run_advise(
    run_dir: Path, request: AdviseRequest, console: Console, stop: StopSignals, locked: bool = False, prefix: str = ""
) -> Advice:
    """Run the candidates of the run in run_dir and write its advice.json; `locked`: the caller holds the
    run directory's lock (collect --advise); `prefix`: of the options a refusal names (collect's "advise-")."""
    from hwprof.advisor.runner import AdviseRun, plan_advice
    from hwprof.rundir.lock import RunDirBusy, RunDirLock
    from hwprof.rundir.reader import RunDirError

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
        plan = plan_advice(run_dir, request.blocks, request.layers, request.only, prefix)
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
        with progress_bars(console) as progress:
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


def advise_and_render(run_dir: Path, request: AdviseRequest, console: Console, stop: StopSignals) -> Advice:
    """`hwprof advise RUN`: run the candidates, print the table, then rewrite summary.json, advice.csv and the
    trace with it."""
    from hwprof.analysis.run_analysis import analyse
    from hwprof.render.advice.table import advice_renderables
    from hwprof.rundir.reader import RunData
    from hwprof.session.finish import write_report, write_trace

    result = run_advise(run_dir, request, console, stop)
    for renderable in advice_renderables(result, console):
        console.print(renderable)
    data = RunData.load(run_dir)
    write_report(analyse(data), data, console)
    write_trace(run_dir, console)
    console.print(f"advice.json written in {run_dir}", highlight=False)
    return result
