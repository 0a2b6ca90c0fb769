"""`--track [URI]` on collect, sweep and advise, and `hwprof track RUN...`: runs logged to MLflow
(hwprof.tracking). What was logged, where, and the command that opens the UI are said; a store that cannot take
them is one line saying the runs are kept and how to log them later (TrackingError), never a lost run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hwprof.tracking.mlflow_store import Logged, Store, TrackingError, tracking_uri, ui_command
from hwprof.tracking.run_figures import RunFigures, run_figures

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


def advice_figures(run_dir: Path) -> list[RunFigures]:
    """advice.json's rows as the baseline's child runs: each candidate's change and what it measured."""
    path = run_dir / "advice.json"
    if not path.is_file():
        return []
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise TrackingError(f"{path}: not readable ({exc}); the run itself can be logged without it") from None
    base = f"{run_dir.resolve().name}/advise/{doc.get('started_ns', 0)}"
    return [_advice_row(base, row) for row in doc.get("rows") or [] if isinstance(row, dict)]


def _advice_row(base: str, row: dict[str, Any]) -> RunFigures:
    key = str(row.get("key"))
    figures = RunFigures(run_id=f"{base}/{key}", name=f"advise {key}")
    figures.params = {k: str(row[k])[:500] for k in ("key", "change", "how", "finding") if row.get(k)}
    for part in ("forward", "end_to_end"):
        figure = row.get(part) or {}
        for name in ("ratio", "q1", "q3", "before_ms", "after_ms"):
            value = figure.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                figures.metrics[f"{part}.{name}"] = float(value)
    for name, pair in (("minor_faults", row.get("minor_faults")), ("rss_bytes", row.get("rss_bytes"))):
        if isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, int | float) for v in pair):
            figures.metrics[f"{name}.baseline"], figures.metrics[f"{name}.variant"] = float(pair[0]), float(pair[1])
    figures.tags = {
        "hwprof.run_id": figures.run_id,
        "status": str(row.get("status", "")),
        "resolved": str(bool(row.get("resolved"))).lower(),
        "ranked": str(bool(row.get("ranked"))).lower(),
    }
    if row.get("reason"):
        figures.tags["reason"] = str(row["reason"])[:5000]
    return figures
