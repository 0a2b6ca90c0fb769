"""Everything the session, analysis and render side writes into a run directory (or a sweep's folder).

Renderers return content (text, PNG bytes); this module decides where it goes and writes it, each file
atomically (hwprof.core.atomic: a temporary name renamed into place, so a reader never sees half a file
and a full disk raises DiskFullError with the path). RunData (reader.py) is the only reader; this is the
only writer of the report's side. The collectors' own files are written by the passes (hwprof.schema.records).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from hwprof.core.atomic import atomic_path, atomic_write_bytes, atomic_write_text
from hwprof.rundir.names import (
    ADVICE_CSV,
    LAYERS_CSV,
    REPORT_HTML,
    RUN_JSON,
    SUMMARY_JSON,
    SWEEP_ADVICE_CSV,
    SWEEP_CSV,
    SWEEP_JSON,
    TRACE_NAME,
)
from hwprof.schema.run import RunDoc


def write_run_json(run_dir: Path, run: RunDoc) -> None:
    """Atomically replace run.json, so a reader never sees half a file."""
    atomic_write_text(run_dir / RUN_JSON, json.dumps(run.to_json(), indent=1, default=str))


@dataclass
class ReportFiles:
    """The files a report leaves in its run directory, as content: a renderer fills it, write_report_files
    writes it. None: the file is not written (no layer table, no advice)."""

    summary_json: str
    layers_csv: str | None = None
    advice_csv: str | None = None


def write_report_files(run_dir: Path, files: ReportFiles) -> list[Path]:
    """summary.json, layers.csv, advice.csv and the plots that have content; the paths written, in order."""
    written = [_text(run_dir / SUMMARY_JSON, files.summary_json)]
    if files.layers_csv is not None:
        written.append(_text(run_dir / LAYERS_CSV, files.layers_csv))
    if files.advice_csv is not None:
        written.append(_text(run_dir / ADVICE_CSV, files.advice_csv))
    return written


def write_plot_files(run_dir: Path, plots: dict[str, bytes]) -> list[Path]:
    """File name -> PNG bytes (hwprof.render.plots.render_plots), each written in turn; the paths written."""
    return [write_png(run_dir / name, png) for name, png in plots.items()]


def write_report_html(folder: Path, html: str, name: str = REPORT_HTML) -> Path:
    """report.html (hwprof.render.html.render_html), or a sweep's sweep.html."""
    return _text(folder / name, html)


@dataclass
class SweepFiles:
    """A sweep's table as content (hwprof.analysis.sweep.rows.sweep_files makes it)."""

    sweep_json: str
    sweep_csv: str
    advice_csv: str | None = None


def write_sweep_files(out_root: Path, files: SweepFiles) -> list[Path]:
    """sweep.json, sweep.csv and, for an advised sweep, sweep_advice.csv; the paths written."""
    written = [_text(out_root / SWEEP_JSON, files.sweep_json), _text(out_root / SWEEP_CSV, files.sweep_csv)]
    if files.advice_csv is not None:
        written.append(_text(out_root / SWEEP_ADVICE_CSV, files.advice_csv))
    return written


def write_text_files(files: dict[Path, str]) -> list[Path]:
    """Files a command was asked for outside any run directory (compare's --gate-report, --junit,
    --gate-json), each written atomically; the paths written."""
    return [_text(path, text) for path, text in files.items()]


def write_png(path: Path, png: bytes) -> Path:
    """One plot beside its table (sweep.png)."""
    atomic_write_bytes(path, png)
    return path


@contextmanager
def trace_file(run_dir: Path, out: Path | None = None) -> Iterator[tuple[Path, BinaryIO]]:
    """The run's trace.pftrace (or `out`), opened for a streaming writer: written under a temporary name and
    renamed into place when the block ends without an error (a trace is hundreds of MB: never held whole)."""
    path = out if out is not None else run_dir / TRACE_NAME
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        yield path, handle


def _text(path: Path, text: str) -> Path:
    atomic_write_text(path, text)
    return path
