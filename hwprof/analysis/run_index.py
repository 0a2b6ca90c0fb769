"""The runs kept on one machine (`hwprof runs [DIR]`): every run directory under a folder, a row each, read from
its run.json alone (no MLflow, no analysis), newest first. A folder whose run.json cannot be read is skipped with
its one-line reason, never the whole listing.

A run's health is its timing pass's (hwprof.analysis.neighbours.timing_health: other work on the host during
it, or its forward far slower than the paired passes' clean iterations): "clean", "disturbed", or "-" where no
timing pass ran.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hwprof.analysis.neighbours import timing_health
from hwprof.analysis.workload import workload_view
from hwprof.rundir.names import RUN_JSON
from hwprof.rundir.reader import RunData

SKIP_FOLDERS = frozenset({"passes", "model", "__pycache__", ".git"})
"""Folders inside a run directory (or a repository) that hold no other run."""


@dataclass(frozen=True)
class RunRow:
    """One run directory, as the index lists it."""

    id: str
    created: str
    model: str
    imgsz: int | None
    batch: int | None
    threads: int | None
    runtime: str
    precision: str
    device: str
    status: str
    forward_p50_ms: float | None
    fps: float | None
    health: str
    """clean, disturbed, or - (no timing pass)."""
    path: str
    disturbed: str = ""
    """Why the timing pass is not clean, where it is not."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunIndex:
    rows: list[RunRow] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """`PATH: reason` for each folder with a run.json that could not be read."""


def run_folders(root: Path) -> Iterator[Path]:
    """Every folder under `root` (itself included) that holds a run.json; a run's own folders are not searched."""
    for folder, subfolders, files in os.walk(root):
        if RUN_JSON in files:
            yield Path(folder)
            subfolders[:] = [s for s in subfolders if s not in SKIP_FOLDERS]
        subfolders[:] = sorted(s for s in subfolders if s not in SKIP_FOLDERS and not s.startswith("."))


def run_row(folder: Path) -> RunRow:
    """The row of one run directory; RunDirError (a ValueError) or OSError where its run.json cannot be read."""
    data = RunData.load(folder)
    doc = data.doc
    config = doc.config
    forward = doc.stages.get("forward")
    health, disturbed = timing_health(doc)
    return RunRow(
        id=doc.run_id or folder.name,
        created=doc.created or "",
        model=doc.model.name or config.model or workload_view(doc).unnamed_model,
        imgsz=config.imgsz,
        batch=config.batch,
        threads=config.threads,
        runtime=config.runtime or "torch",
        precision=config.precision or "fp32",
        device=config.device or "cpu",
        status=data.shown_status,
        forward_p50_ms=forward.p50_ms if forward is not None and forward.n else None,
        fps=doc.fps,
        health=health or "-",
        path=str(folder),
        disturbed=disturbed,
    )


def run_index(root: Path, model: str | None = None, status: str | None = None) -> RunIndex:
    """The runs under `root`, newest first; only those of `model` and in `status` where given."""
    if not root.is_dir():
        raise ValueError(f"{root}: no such folder (hwprof collect writes its runs to results/)")
    index = RunIndex()
    for folder in run_folders(root):
        try:
            row = run_row(folder)
        except (ValueError, OSError) as exc:
            index.skipped.append(f"{folder}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            continue
        if (model is None or row.model == model) and (status is None or row.status == status):
            index.rows.append(row)
    index.rows.sort(key=lambda r: r.created, reverse=True)
    return index
