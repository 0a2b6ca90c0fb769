"""The report's memory section: the top-level layers by bytes allocated per forward, with what they free, keep
and fault in; under it the forward's peak of live tensor bytes and the layer that reaches it, the layers' sum
against the forward's, the faults per forward, the process's resident memory and what the figures cover."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwprof.analysis.layers.memory import COVERS, LayerMemory, MemoryView
from hwprof.render.fmt import num
from hwprof.render.tables import MISSING, Brief, Col, TableSpec

if TYPE_CHECKING:
    from hwprof.analysis.run_analysis import Analysis

TOP_MEMORY = 10


def _mb(value: float | None) -> str:
    return num(value / 1e6, 2) if value is not None else MISSING


def _count(value: float | None) -> str:
    return num(value, 0) if value is not None else MISSING


def memory_spec(a: Analysis, top: int = TOP_MEMORY) -> TableSpec | None:
    """None where no allocator figure was measured (its reason is in the run's unavailable collectors)."""
    view = a.memory
    rows = view.top(top)
    if not rows:
        return None
    faults = any(r.faults is not None for r in rows)
    cols = [
        Col("layer", "left"),
        Col("type", "left", priority=3),
        Col("alloc MB"),
        Col("freed MB", priority=2),
        Col("allocs", priority=4),
        Col("peak MB"),
        Col("growth MB", priority=1),
    ] + ([Col("faults", priority=2)] if faults else [])
    return TableSpec(
        f"memory per layer (top {len(rows)} by bytes allocated, per forward)",
        cols,
        [_row(r, faults) for r in rows],
        memory_notes(view),
        methods=[f"what it covers: {COVERS}", BEYOND],
        brief=Brief(groups=5),
    )


def _row(r: LayerMemory, faults: bool) -> list[str]:
    cells = [
        r.name,
        r.type,
        _mb(r.alloc_bytes),
        _mb(r.freed_bytes),
        _count(r.allocs),
        _mb(r.peak_bytes),
        _mb(r.growth_bytes),
    ]
    return cells + ([_count(r.faults)] if faults else [])


BEYOND = (
    "beyond the forward's peak of tensor bytes: the weights, Python, OpenCV, the libraries, and torch_memory's own "
    "event buffers, a few MB freed at each clean stretch"
)


def memory_notes(view: MemoryView) -> list[str]:
    out = []
    if view.forward_peak_bytes is not None:
        at = f", reached in {view.peak_layer}" if view.peak_layer else ""
        at += f"; the most working memory of its own: {view.largest_layer}" if view.largest_layer else ""
        out.append(
            f"forward: {_mb(view.forward_alloc_bytes)} MB allocated, peak {_mb(view.forward_peak_bytes)} MB above "
            f"what was live at its start{at}"
        )
    if view.layers_alloc_ratio is not None:
        out.append(
            f"the top-level layers' bytes allocated add up to {view.layers_alloc_ratio:.3f}x the forward's (the "
            "rest is allocated between layers)"
        )
    if view.forward_faults is not None:
        out.append(f"page faults per forward: {num(view.forward_faults, 0)} (perf_events' software event)")
    outside = view.beyond_peak_bytes
    if view.rss_peak_bytes is not None:
        beyond = (
            f"; {_mb(outside)} MB beyond the forward's peak of tensor bytes (estimate: RSS less that peak)"
            if outside is not None
            else ""
        )
        out.append(f"resident memory (RSS) at its peak in the forward: {_mb(view.rss_peak_bytes)} MB{beyond}")
    return out
