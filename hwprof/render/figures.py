"""A figure to draw on (matplotlib's Agg canvas, no pyplot state) and its PNG: what every plot of hwprof's is made
with (hwprof.render.plots, memory_plot, sweep_plot)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 110
"""Margins are set by hand: tight_layout draws each figure twice, a third of the plotting time."""


def import_matplotlib() -> None:
    """What new_figure imports, with the C extensions matplotlib initialises (_image, ft2font, _path): for a
    caller to import them where no stop signal may cut them (hwprof.session.finish.write_report)."""
    import matplotlib.backends.backend_agg
    import matplotlib.figure  # noqa: F401


def new_figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Figure) -> bytes:
    """The figure as a PNG (the run directory's writer puts it in place, atomically)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def png_or_none(fig: Figure | None) -> bytes | None:
    """The PNG of a figure, None where there was no data to draw one."""
    return None if fig is None else png_bytes(fig)
