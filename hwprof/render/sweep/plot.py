"""sweep.png beside sweep.json: the forward latency of every point, grouped by the kind of machine that ran it.

One horizontal bar per point, in the table's order (hwprof.render.compare.views.by_host), one colour per kind of
machine with the kind in the legend, so that the same point on two CPUs reads side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hwprof.analysis.sweep.rows import SweepRow
from hwprof.render.figures import new_figure, png_or_none

if TYPE_CHECKING:
    from matplotlib.figure import Figure

NO_HOST = "host not recorded"
KIND_COLOURS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666")


def _label(row: SweepRow) -> str:
    runtime = "" if row.is_reference else f" {row.runtime} {row.precision}"
    return f"{row.model}{runtime} t{row.threads} b{row.batch}"


def plot_sweep(rows: Sequence[SweepRow]) -> bytes | None:
    """The PNG of the rows with a latency (None when no row has one)."""
    return png_or_none(sweep_figure(rows))


def sweep_figure(rows: Sequence[SweepRow]) -> Figure | None:
    timed = [r for r in rows if r.latency_ms is not None]
    if not timed:
        return None
    kinds = list(dict.fromkeys(r.host_kind or NO_HOST for r in timed))
    colour = {k: KIND_COLOURS[i % len(KIND_COLOURS)] for i, k in enumerate(kinds)}
    legend_h = 0.2 * len(kinds)
    height = 1.5 + 0.28 * len(timed) + legend_h
    fig = new_figure(7.5, height)
    ax = fig.add_subplot(1, 1, 1)
    ys = list(range(len(timed)))
    values = [r.latency_ms or 0.0 for r in timed]
    for kind in kinds:
        mine = [(y, v) for y, v, r in zip(ys, values, timed, strict=True) if (r.host_kind or NO_HOST) == kind]
        ax.barh([y for y, _ in mine], [v for _, v in mine], color=colour[kind], label=kind)
    ax.set_yticks(ys)
    ax.set_yticklabels([_label(r) for r in timed], fontsize=7)
    ax.invert_yaxis()
    for y, v in zip(ys, values, strict=True):
        ax.annotate(f"{v:.3g} ms", (v, y), textcoords="offset points", xytext=(3, -3), fontsize=7)
    ax.set_xlim(0, max(values) * 1.25)
    ax.set_xlabel("forward p50 per image, ms (clean timing pass)")
    ax.set_title("sweep: latency per point, by kind of machine", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.55 / (height - 1.2 - legend_h)), frameon=False)
    fig.subplots_adjust(left=0.3, right=0.97, bottom=(0.75 + legend_h) / height, top=1 - 0.3 / height)
    return fig
