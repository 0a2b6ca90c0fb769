"""The report's plots: matplotlib figures (Agg canvas, no pyplot state), and the PNGs of them that go next to the
report in the run directory. `hwprof.Run.plot_*` returns the figures themselves (a notebook shows them inline);
the PNG writers are the same figures saved, so the two never differ.

- roofline.png: measured roofs, each top-level layer as a point (area ~ its share of forward,
  colour = bound), and the whole forward as a star.
- layer_times.png: per-layer scaled self time in model order, bars coloured by bound.
- stages.png: p50 per pipeline stage with its share of the iteration.
- kernels.png: per-layer time split by what its threads ran (perf samples by kind: oneDNN JIT,
  MKL, aten, OpenMP runtime = waiting, kernel space ...), in model order; kernel space split by
  cause (page faults, syscalls, IPIs ...: hatched in the kernel's colour).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwprof.analysis.roofline import COMPUTE, MEMORY
from hwprof.analysis.run_analysis import Analysis
from hwprof.core.kernel_causes import CAUSES
from hwprof.core.kernels import (
    KIND_ATEN,
    KIND_BLAS,
    KIND_JIT,
    KIND_KERNEL,
    KIND_ONEDNN,
    KIND_OPENMP,
    KIND_OTHER,
    KIND_PYTHON,
)
from hwprof.render.figures import new_figure, png_or_none
from hwprof.render.memory_plot import plot_memory
from hwprof.rundir.names import PLOT_FILES

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from hwprof.analysis.layers.stats import LayerStat
    from hwprof.analysis.roofline import Roof

COLOURS = {MEMORY: "#d95f02", COMPUTE: "#1b9e77", None: "#7570b3"}
LABELS = {MEMORY: "memory-bound", COMPUTE: "compute-bound", None: "no roofline"}


def _layer_axes(rows: list[LayerStat], height: float) -> tuple[Figure, Axes, list[int]]:
    """A figure with one x position per layer, in model order (sorts rows), labelled by layer index."""
    rows.sort(key=lambda r: r.index)
    fig = new_figure(max(7.0, 0.12 * len(rows) + 2), height)
    ax = fig.add_subplot(1, 1, 1)
    xs = list(range(len(rows)))
    step = -(-len(rows) // 40)  # at most 40 labels (78 layers: every other one; len // 40 labelled all 78)
    ax.set_xticks(xs[::step])
    ax.set_xticklabels([str(r.index) for r in rows][::step], fontsize=7)
    ax.set_xlabel("layer index")
    return fig, ax, xs


BAR_WIDTH = 0.85


def _bars(
    ax: Axes,
    xs: list[int],
    heights: list[float],
    bottoms: list[float] | None = None,
    colours: str | list[str] = COLOURS[None],
    label: str = "",
    hatch: str = "",
    edgecolor: str = "",
) -> None:
    """Vertical bars as one collection of rectangles (Axes.bar adds a patch per bar: 0.5 s of the kernels plot's
    1.1 s for 673 bars at yolov7-tiny 320), from y = 0; the edges the bars' colour where no `edgecolor`."""
    from matplotlib.collections import PolyCollection

    half = BAR_WIDTH / 2
    bottoms = bottoms or [0.0] * len(xs)
    boxes = [
        [(x - half, b), (x - half, b + h), (x + half, b + h), (x + half, b)]
        for x, h, b in zip(xs, heights, bottoms, strict=True)
    ]
    bars = PolyCollection(
        boxes, facecolors=colours, edgecolors=edgecolor or colours, linewidths=0.5, label=label, hatch=hatch or None
    )
    bars.sticky_edges.y.append(0.0)  # as Axes.bar's: no margin below the bars
    ax.add_collection(bars)
    ax.autoscale_view()


def plot_roofline(a: Analysis) -> bytes | None:
    return png_or_none(roofline_figure(a))


def roofline_figure(a: Analysis) -> Figure | None:
    """Roofs, each top-level layer as a point and the whole forward as a star; None without a layer that has
    both FLOPs and a time."""
    rows = [r for r in a.layers.top_level if r.intensity and r.gflops_s and r.share is not None]
    if not rows:
        return None
    fig = new_figure(7.5, 5.0)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = [r.intensity or 0.0 for r in rows]
    roof = a.layers.roof.roof
    lo, hi = min(xs) / 2, max(xs) * 2
    if roof is not None:
        lo, hi = min(lo, roof.ridge / 8), max(hi, roof.ridge * 8)
        _draw_roof(ax, roof, lo, hi)
    _draw_layers(ax, rows)
    s = a.roofline
    if s is not None and s.intensity and s.gflops_s:
        ax.scatter([s.intensity], [s.gflops_s], marker="*", s=220, c="black", label="whole forward")
    ax.set_xlim(lo, hi)
    _label_roofline(ax, a.doc.model.name or "", len(a.layers.top_level) - len(rows))
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.11, top=0.93)
    return fig


def _draw_roof(ax: Axes, roof: Roof, lo: float, hi: float) -> None:
    """The roof over [lo, hi] and its ridge point."""
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(
        grid,
        [roof.attainable_gflops(x) for x in grid],
        color="black",
        lw=1.5,
        label=f"roof: {roof.peak_gflops:.1f} GFLOP/s{' (run best)' if roof.raised else ''}, {roof.peak_gbps:.2f} GB/s",
    )
    if roof.raised:
        ax.axhline(roof.probe_gflops, color="grey", ls="--", lw=1, label=f"measured peak {roof.probe_gflops:.1f}")
    ax.axvline(roof.ridge, color="grey", ls=":", lw=1)
    ax.annotate(
        f"ridge {roof.ridge:.1f}",
        (roof.ridge, roof.peak_gflops),
        textcoords="offset points",
        xytext=(4, -12),
        fontsize=8,
        color="grey",
    )


def _draw_layers(ax: Axes, rows: list[LayerStat]) -> None:
    """One point per layer, coloured by its bound, its area its share of forward; the six largest named."""
    for bound in (MEMORY, COMPUTE, None):
        group = [r for r in rows if r.bound == bound]
        if group:
            ax.scatter(
                [r.intensity or 0.0 for r in group],
                [r.gflops_s or 0.0 for r in group],
                s=[20 + 2000 * (r.share or 0.0) for r in group],
                c=COLOURS[bound],
                alpha=0.7,
                edgecolors="black",
                linewidths=0.5,
                label=LABELS[bound],
            )
    for r in sorted(rows, key=lambda r: -(r.share or 0.0))[:6]:
        ax.annotate(
            f"{r.index} {r.type}",
            (r.intensity, r.gflops_s),
            textcoords="offset points",
            xytext=(5, 4),
            fontsize=7,
        )


def _label_roofline(ax: Axes, model: str, skipped: int) -> None:
    """Axis labels, title, legend, grid and plain tick labels."""
    ax.set_xlabel("arithmetic intensity (FLOP / minimum byte)")
    ax.set_ylabel("achieved GFLOP/s (scaled time)")
    note = f"; {skipped} layers without FLOPs or time not shown" if skipped else ""
    ax.set_title(f"roofline: {model}, point area = share of forward{note}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="both", alpha=0.2)
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.yaxis.set_major_formatter(plain)


def plot_layer_times(a: Analysis) -> bytes | None:
    return png_or_none(layer_times_figure(a))


def layer_times_figure(a: Analysis) -> Figure | None:
    """Per-layer scaled self time in model order, coloured by bound; None without layer times."""
    rows = [r for r in a.layers.top_level if r.time_ms is not None]
    if not rows:
        return None
    fig, ax, xs = _layer_axes(rows, 4.0)
    _bars(ax, xs, [r.time_ms or 0.0 for r in rows], colours=[COLOURS.get(r.bound, COLOURS[None]) for r in rows])
    ax.set_ylabel("ms per forward (scaled self time)")
    from matplotlib.patches import Patch

    present = sorted({r.bound for r in rows}, key=lambda b: str(b))
    ax.legend(handles=[Patch(color=COLOURS[b], label=LABELS[b]) for b in present], fontsize=7)
    ax.set_title(f"per-layer time: {a.doc.model.name or ''}", fontsize=9)
    fig.subplots_adjust(left=0.08, right=0.99, bottom=0.13, top=0.92)
    return fig


def plot_stages(a: Analysis) -> bytes | None:
    return png_or_none(stages_figure(a))


def stages_figure(a: Analysis) -> Figure | None:
    """p50 per pipeline stage with its share of the iteration; None without stage timings."""
    rows = [r for r in a.stages.rows if r.name != "iteration"]
    if not rows:
        return None
    fig = new_figure(6.5, 3.0)
    ax = fig.add_subplot(1, 1, 1)
    ys = list(range(len(rows)))
    ax.barh(ys, [r.p50_ms for r in rows], color="#7570b3")
    ax.set_yticks(ys)
    ax.set_yticklabels([r.name for r in rows])
    ax.invert_yaxis()
    for y, r in zip(ys, rows, strict=True):
        share = f" ({100 * r.share:.1f}%)" if r.share is not None else ""
        ax.annotate(f"{r.p50_ms:.2f} ms{share}", (r.p50_ms, y), textcoords="offset points", xytext=(3, -3), fontsize=8)
    ax.set_xlabel("p50 ms per iteration")
    ax.set_xlim(0, max(r.p50_ms for r in rows) * 1.35)
    ax.set_title(f"pipeline stages ({a.stages.source} pass)", fontsize=9)
    fig.subplots_adjust(left=0.17, right=0.97, bottom=0.17, top=0.88)
    return fig


KIND_COLOURS = {
    KIND_JIT: "#1b9e77",
    KIND_ONEDNN: "#66c2a5",
    KIND_BLAS: "#e6ab02",
    KIND_ATEN: "#7570b3",
    KIND_OPENMP: "#bdbdbd",
    KIND_KERNEL: "#d95f02",
    KIND_PYTHON: "#e7298a",
    KIND_OTHER: "#666666",
}


CAUSE_HATCHES = dict(zip(CAUSES, ("xxx", "///", "ooo", "...", ""), strict=True))


def _kind_parts(layer: LayerStat) -> list[tuple[str, str, str, float]]:
    """(label, colour, hatch, share of the layer) per kind of code, kernel space split by cause."""
    native = layer.native
    if native is None:
        return []
    parts = []
    for kind, colour in KIND_COLOURS.items():
        share = native.kinds.get(kind, 0.0)
        if kind == KIND_KERNEL and native.causes:
            for cause in CAUSES:
                parts.append((f"kernel: {cause}", colour, CAUSE_HATCHES[cause], native.cause_share(cause)))
        else:
            parts.append((kind, colour, "", share))
    return parts


def plot_kernels(a: Analysis) -> bytes | None:
    return png_or_none(kernels_figure(a))


def kernels_figure(a: Analysis) -> Figure | None:
    """Per-layer time split by what its threads ran (perf samples by kind); None without the kernels pass's
    samples or layer times."""
    rows = [r for r in a.layers.top_level if r.time_ms is not None and r.native is not None]
    if not rows:
        return None
    fig, ax, xs = _layer_axes(rows, 4.2)
    heights: dict[tuple[str, str, str], list[float]] = {}
    for i, r in enumerate(rows):
        for label, colour, hatch, share in _kind_parts(r):
            heights.setdefault((label, colour, hatch), [0.0] * len(rows))[i] = (r.time_ms or 0.0) * share
    bottom = [0.0] * len(rows)
    for (label, colour, hatch), bar in heights.items():
        drawn = [i for i, h in enumerate(bar) if h > 0]  # no empty bars: 858 patches of which most were (1 s of 2)
        if drawn:
            _bars(
                ax,
                [xs[i] for i in drawn],
                [bar[i] for i in drawn],
                [bottom[i] for i in drawn],
                colour,
                label=label,
                hatch=hatch,
                edgecolor="white" if hatch else colour,
            )
            bottom = [b + h for b, h in zip(bottom, bar, strict=True)]
    ax.set_ylabel("ms per forward, split by sampled kind")
    ax.legend(fontsize=7, ncol=4)
    title = f"what each layer's threads ran (perf, all threads): {a.doc.model.name or ''}"
    ax.set_title(title, fontsize=9)
    fig.subplots_adjust(left=0.08, right=0.99, bottom=0.13, top=0.92)
    return fig


def render_plots(a: Analysis) -> dict[str, bytes]:
    """File name (PLOT_FILES) -> PNG of each plot the run has data for, in PLOT_FILES' order."""
    out = {}
    plots = (plot_roofline, plot_layer_times, plot_stages, plot_kernels, plot_memory)
    for name, plot in zip(PLOT_FILES, plots, strict=True):
        png = plot(a)
        if png is not None:
            out[name] = png
    return out
