"""hwprof.Run: one run directory, read through the one reader (RunData), analysed once, and shown as the report's
tables (polars DataFrames), its plots (matplotlib figures) and the report itself.

Loading reads and analyses the run at once, so a damaged file is one RunError at `hwprof.load`, with the line
`hwprof report` prints for it; the tables are made when first asked for.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from hwprof.analysis.run_analysis import Analysis, analyse
from hwprof.api import reasons, report_frames
from hwprof.api.errors import RunError
from hwprof.rundir.reader import RunData, abandoned_or_running

if TYPE_CHECKING:
    import pandas
    from matplotlib.figure import Figure
    from rich.console import Console

    from hwprof.analysis.roofline import Roof
    from hwprof.schema.host import HostDoc
    from hwprof.schema.run import ModelDoc, RunConfigDoc, RunDoc, RuntimeDoc


@dataclass(frozen=True)
class NotMeasured:
    """A collector that did not run fully (run.json's collectors), as the report's header lists it."""

    collector: str
    status: str
    """unavailable, failed, partial, skipped (not requested), interrupted."""
    reason: str
    fix: str
    """What to run or install so that it can (empty where there is nothing to do)."""


def load(path: str | os.PathLike[str]) -> Run:
    """Read and analyse the run directory at `path`. RunError, with the command line's one line, for a folder that
    is not a run directory, a damaged file in it, or a run a collect is still writing."""
    from hwprof.core.uservalue import exception_line

    try:
        data = RunData.load(Path(path))
        if data.doc.status == "running":
            abandoned, why = abandoned_or_running(data.root)
            if not abandoned:
                raise RunError(why)
        analysis = analyse(data)
    except (ValueError, OSError) as exc:
        raise RunError(exception_line(exc)) from exc
    return Run(data.root, analysis)


class Run:
    """One run: the typed header of run.json, the report's tables, its plots and the report.

    Tables (polars DataFrames, made when first asked for, then kept): stages, layers, types, kernels,
    model_kernels, aten_kernels, roofline, pass_costs, findings, and advice (None when the run was not advised).
    A figure that was not measured is null; `why(column)` or `why(table)` gives the reason and the fix."""

    path: Path
    """The run directory."""

    def __init__(self, path: Path, analysis: Analysis) -> None:
        self.path = path
        self._analysis = analysis

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r}: {self.model.name or '?'}, {self.status})"

    @property
    def analysis(self) -> Analysis:
        """The run analysed once (hwprof.analysis.run_analysis.Analysis): what every table here is made from, and
        what compare() hands to the analyses that read several runs."""
        return self._analysis

    # --- the header (run.json, typed: hwprof.schema.run) ---

    @property
    def doc(self) -> RunDoc:
        """The whole of run.json, typed and checked."""
        return self._analysis.doc

    @property
    def run_id(self) -> str:
        return str(self.doc.run_id or self.path.name)

    @property
    def status(self) -> str:
        """complete, partial, interrupted, failed; a run whose collect was killed says so."""
        return self._analysis.shown_status or self.doc.status

    @property
    def model(self) -> ModelDoc:
        """name, family, weights, params, params_fused, layers, input_shape, flops, gflops."""
        return self.doc.model

    @property
    def host(self) -> HostDoc:
        """cpu_model, logical_cpus, isa_flags, torch (version, num_threads, cpu_capability ...), packages."""
        return self.doc.host

    @property
    def config(self) -> RunConfigDoc:
        """Every collect option the run was made with (model, imgsz, batch, threads, iters ...)."""
        return self.doc.config

    @property
    def runtime(self) -> RuntimeDoc | None:
        """What executed the forward (name, version, precision asked and executed); None for a plain torch run."""
        return self.doc.runtime

    @property
    def peaks(self) -> Roof | None:
        """This run's roof: peak_gflops (the measured peak, or the run's best layer rate where a layer beat it:
        measured_gflops, raised_by), peak_gbps, ridge (FLOP/B), how they were measured, and the paper peak;
        None where the run has none (`why("roofline")`)."""
        return self._analysis.layers.roof.roof

    @property
    def unavailable(self) -> list[NotMeasured]:
        """Every collector that did not run fully, with why and the fix."""
        return [NotMeasured(name, e["status"], e["reason"], e["fix"]) for name, e in self._analysis.unavailable.items()]

    @property
    def warnings(self) -> list[str]:
        """What to know before trusting a figure: passes whose figures are unavailable, damage read past."""
        return list(self._analysis.warnings)

    # --- the tables ---

    @cached_property
    def stages(self) -> pl.DataFrame:
        return report_frames.stages(self._analysis)

    @cached_property
    def layers(self) -> pl.DataFrame:
        return report_frames.layers(self._analysis)

    @cached_property
    def types(self) -> pl.DataFrame:
        return report_frames.types(self._analysis)

    @cached_property
    def kernels(self) -> pl.DataFrame:
        return report_frames.kernels(self._analysis)

    @cached_property
    def model_kernels(self) -> pl.DataFrame:
        return report_frames.model_kernels(self._analysis)

    @cached_property
    def aten_kernels(self) -> pl.DataFrame:
        return report_frames.aten_kernels(self._analysis)

    @cached_property
    def roofline(self) -> pl.DataFrame:
        return report_frames.roofline(self._analysis)

    @cached_property
    def pass_costs(self) -> pl.DataFrame:
        return report_frames.pass_costs(self._analysis)

    @cached_property
    def findings(self) -> pl.DataFrame:
        return report_frames.findings(self._analysis)

    @cached_property
    def detections(self) -> pl.DataFrame:
        return report_frames.detections(self._analysis)

    @cached_property
    def memory(self) -> pl.DataFrame:
        return report_frames.memory(self._analysis)

    @cached_property
    def advice(self) -> pl.DataFrame | None:
        return report_frames.advice(self._analysis)

    def table(self, name: str) -> pl.DataFrame:
        """A table by name (TABLE_NAMES); ValueError for another name, and for advice on a run not advised."""
        if name not in TABLE_NAMES:
            raise ValueError(f"no table {name!r}: the tables are {', '.join(TABLE_NAMES)}")
        frame: pl.DataFrame | None = getattr(self, name)
        if frame is None:
            raise ValueError(f"{name}: {self.why(name)}")
        return frame

    def to_pandas(self, name: str) -> pandas.DataFrame:
        """A table as a pandas DataFrame (pandas and pyarrow must be installed: polars converts through Arrow)."""
        try:
            import pandas  # noqa: F401
            import pyarrow  # noqa: F401
        except ImportError as exc:
            raise ImportError(f"to_pandas needs pandas and pyarrow ({exc}): pip install pandas pyarrow") from None
        return self.table(name).to_pandas()

    def why(self, name: str, table: str = "layers") -> str | None:
        """Why a table (by its name) or a column of `table` is empty or null: the collector's reason and the
        fix, as the report writes it under its table; None where nothing is missing."""
        if name in TABLE_NAMES:
            found = reasons.table_reason(self._analysis, name)
        else:
            found = reasons.column_reason(self._analysis, table, name)
        return found.text() if found is not None else None

    @staticmethod
    def unit(column: str) -> str:
        """The unit of a column of the tables ("ms", "FLOP/B", "fraction", "%" ...; "" for names and labels)."""
        return reasons.unit(column)

    # --- plots (the PNGs of the run directory are these figures saved) ---

    def plot_roofline(self) -> Figure | None:
        """The roofline: measured roofs, each top-level layer (area ~ its share of forward, colour = bound) and the
        whole forward; None without layers that have FLOPs and a time."""
        from hwprof.render.plots import roofline_figure

        return _inline(roofline_figure(self._analysis))

    def plot_layers(self) -> Figure | None:
        """Per-layer time in model order, coloured by bound; None without layer times."""
        from hwprof.render.plots import layer_times_figure

        return _inline(layer_times_figure(self._analysis))

    def plot_stages(self) -> Figure | None:
        """p50 per pipeline stage with its share of the iteration; None without stage timings."""
        from hwprof.render.plots import stages_figure

        return _inline(stages_figure(self._analysis))

    def plot_kernels(self) -> Figure | None:
        """Per-layer time split by what its threads ran (perf samples by kind); None without the kernels pass."""
        from hwprof.render.plots import kernels_figure

        return _inline(kernels_figure(self._analysis))

    def plot_memory(self) -> Figure | None:
        """RSS through a pass with its stages, torch's live bytes through one forward with its layers (memory.png);
        None without either series."""
        from hwprof.render.memory_plot import memory_figure

        return _inline(memory_figure(self._analysis))

    # --- the report ---

    def report(self, top: int = 15, format: str = "rich", console: Console | None = None) -> None:
        """Print the report as `hwprof report` does (format rich, markdown, json or csv); Rich renders in Jupyter."""
        from rich.console import Console

        from hwprof.render.report import report

        report(self._analysis, console or Console(), top, format)


TABLE_NAMES = (*report_frames.TABLES, "advice")


def _inline(fig: Figure | None) -> Figure | None:
    """The figure; inside IPython (Jupyter) its PNG formatter is registered for figures when none is, so that a
    figure made without pyplot shows inline."""
    shell_module = sys.modules.get("IPython")
    shell = shell_module.get_ipython() if shell_module is not None else None
    if fig is None or shell is None:
        return fig
    from matplotlib.figure import Figure

    from hwprof.render.figures import png_bytes

    png = shell.display_formatter.formatters["image/png"]
    try:
        png.lookup_by_type(Figure)
    except KeyError:
        png.for_type(Figure, png_bytes)
    return fig
