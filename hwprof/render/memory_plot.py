"""memory.png: the process's resident memory through a pass with its stages shaded (what `mprof plot` drew for
seed 001, with hwprof's stages on it), and torch's allocator's live bytes through one measured forward with its
top-level layers shaded and the busiest named, so that a spike is seen inside the layer that made it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwprof.analysis.memory_timeline import Band, Series
from hwprof.render.figures import new_figure, png_or_none

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from hwprof.analysis.run_analysis import Analysis

STAGE_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
LABELLED_LAYERS = 6
"""The layers named on the forward's panel: those whose live bytes grew the most inside them."""
LABEL_GAP = 0.07
"""The least distance between two labelled layers' centres, as a share of the forward."""


def plot_memory(a: Analysis) -> bytes | None:
    return png_or_none(memory_figure(a))


def memory_figure(a: Analysis) -> Figure | None:
    timeline = a.memory.timeline
    panels = [s for s in (timeline.rss, timeline.live) if s is not None and s.points]
    if not panels:
        return None
    fig = new_figure(10, 3.2 * len(panels))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    i = 0
    if timeline.rss is not None and timeline.rss.points:
        _rss_panel(axes[i], timeline.rss)
        i += 1
    if timeline.live is not None and timeline.live.points:
        _live_panel(axes[i], timeline.live)
    fig.tight_layout()
    return fig


def _rss_panel(ax: Axes, rss: Series) -> None:
    xs, ys = zip(*rss.points, strict=True)
    ax.plot(xs, [y / 1e6 for y in ys], color="black", linewidth=1.2, label="RSS")
    colours: dict[str, str] = {}
    for band in rss.bands:
        colour = colours.setdefault(band.name, STAGE_COLOURS[len(colours) % len(STAGE_COLOURS)])
        ax.axvspan(band.start_s, band.end_s, color=colour, alpha=0.25, linewidth=0)
    handles = [ax.get_lines()[0]] + [
        ax.fill_between([], [], color=colour, alpha=0.25, label=name) for name, colour in colours.items()
    ]
    ax.legend(handles=handles, loc="lower right", fontsize=7, ncol=min(len(handles), 6))
    ax.set_xlabel(f"seconds into the {rss.pass_name} pass")
    ax.set_ylabel("resident memory (MB)")
    ax.set_title(f"process RSS through the {rss.pass_name} pass (sysstat), stages shaded", fontsize=9)


def _live_panel(ax: Axes, live: Series) -> None:
    xs = [x * 1e3 for x, _ in live.points]
    ys = [y / 1e6 for _, y in live.points]
    ax.step(xs, ys, where="post", color="#c44e52", linewidth=1.0)
    for k, band in enumerate(live.bands):
        ax.axvspan(band.start_s * 1e3, band.end_s * 1e3, color="#4c72b0" if k % 2 else "#dd8452", alpha=0.15)
    top = max(ys, default=0.0)
    for band in _busiest(live):
        ax.text((band.start_s + band.end_s) / 2 * 1e3, top, band.name, fontsize=6, ha="center", va="bottom")
    ax.set_xlabel(f"milliseconds into the first measured forward ({live.pass_name} pass)")
    ax.set_ylabel("torch allocated (MB)")
    ax.set_title("torch's CPU allocator, live bytes through one forward (torch.profiler), layers shaded", fontsize=9)


def _busiest(live: Series) -> list[Band]:
    """The layers whose live bytes grew the most inside them (labelled), apart enough for their names to be read."""

    def growth(start: float, end: float) -> float:
        values = [y for x, y in live.points if start <= x <= end]
        return max(values) - values[0] if values else 0.0

    ranked = sorted(live.bands, key=lambda b: -growth(b.start_s, b.end_s))
    span = max((x for x, _ in live.points), default=0.0) or 1.0
    chosen: list[Band] = []
    for band in ranked:  # labels that do not overlap: centres at least LABEL_GAP of the axis apart
        centre = (band.start_s + band.end_s) / 2
        if all(abs(centre - (c.start_s + c.end_s) / 2) >= LABEL_GAP * span for c in chosen):
            chosen.append(band)
        if len(chosen) == LABELLED_LAYERS:
            break
    return chosen
