"""`--track [URI]` on collect, sweep and advise, and `hwprof track RUN...`: runs logged to MLflow
(hwprof.tracking). What was logged, where, and the command that opens the UI are said; a store that cannot take
them is one line saying the runs are kept and how to log them later (TrackingError), never a lost run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from hwprof.tracking.advice_figures import advice_figures
from hwprof.tracking.mlflow_store import Logged, Store, tracking_uri, ui_command
from hwprof.tracking.run_figures import run_figures

Say = Callable[[str], None]


def later_command(run_dirs: Sequence[Path], uri: str | None) -> str:
    where = f" --uri {uri}" if uri else ""
    return f"the runs are kept: `hwprof track {' '.join(str(r) for r in run_dirs)}{where}` logs them later"


def track_runs(
    run_dirs: Sequence[Path], uri: str | None, results: Path, say: Say, with_trace: bool = False
) -> list[Logged]:
    """Each run directory as one MLflow run (its advise rows as its children); TrackingError where the store
    cannot take them (the runs are untouched)."""
    store = Store(tracking_uri(uri, results), later_command(run_dirs, uri))
    logged = []
    for run_dir in run_dirs:
        done = store.log(run_figures(run_dir, with_trace))
        _said(say, run_dir, done)
        logged.append(done)
        for row in advice_figures(run_dir):
            store.log(row, parent=done.mlflow_run_id)
    say(f"MLflow UI: {ui_command(store.shown)}")
    return logged


def track_sweep(sweep_dir: Path, run_dirs: Sequence[Path], uri: str | None, params: dict[str, str], say: Say) -> str:
    """A sweep as a parent run with a child per point's run; the parent's MLflow run id."""
    store = Store(tracking_uri(uri, sweep_dir.parent), later_command([sweep_dir], uri))
    key = f"sweep:{sweep_dir.resolve()}"
    parent = store.parent(key, f"sweep {sweep_dir.name}", params, {"hwprof.sweep_dir": str(sweep_dir.resolve())})
    for run_dir in run_dirs:
        _said(say, run_dir, store.log(run_figures(run_dir), parent=parent))
    store.finish(parent)
    say(f"sweep {sweep_dir} logged as MLflow run {parent} with {len(run_dirs)} child runs in {store.shown}")
    say(f"MLflow UI: {ui_command(store.shown)}")
    return parent


def _said(say: Say, run_dir: Path, done: Logged) -> None:
    if done.new:
        say(f"logged {run_dir} as MLflow run {done.mlflow_run_id} in {done.uri} ({done.seconds:.1f} s)")
    else:
        say(f"{run_dir} was logged before, as MLflow run {done.mlflow_run_id} in {done.uri}: nothing logged again")
