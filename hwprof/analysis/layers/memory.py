"""Memory per layer and per forward: what each layer allocates, frees and keeps (torch's allocator events, in the
layers pass: collectors/torch_profiler/memory_collector.py), the page faults the same forwards took (perf_events'
software event), and the process's resident memory beside them (sysstat).

Stateless over the run's tables: the report's memory section, layers.csv's columns (already the collectors'),
and `hwprof.load`'s memory table read this view.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from hwprof.analysis.layers.stats import LayerReport, LayerStat
from hwprof.analysis.memory_timeline import MemoryTimeline, memory_timeline
from hwprof.rundir.reader import RunData
from hwprof.schema.summaries_tools import TorchMemorySummary

PROFILER = "torch_memory"
ALLOC, FREED, ALLOCS, PEAK, GROWTH = (
    f"{PROFILER}.mem_alloc_bytes",
    f"{PROFILER}.mem_freed_bytes",
    f"{PROFILER}.mem_allocs",
    f"{PROFILER}.mem_peak_bytes",
    f"{PROFILER}.mem_growth_bytes",
)
FAULTS = "perf_events.page-faults"
COVERS = (
    "tensor memory through torch's CPU allocator (torch.profiler profile_memory with no op recorded, layers "
    "pass), per measured "
    "forward; peak = the highest live bytes above those live at the range's start (its working memory: "
    "activations and temporaries; the weights, live throughout, are not in it); growth = live bytes at its end less "
    "at its start; not the process's pages: OpenCV's buffers, Python objects and the allocator's cache are outside "
    "it"
)


@dataclass(frozen=True)
class LayerMemory:
    """One layer's memory figures, means per measured forward (None where its source did not run)."""

    name: str
    type: str
    depth: int
    alloc_bytes: float | None
    freed_bytes: float | None
    allocs: float | None
    peak_bytes: float | None
    growth_bytes: float | None
    faults: float | None


@dataclass
class MemoryView:
    """The forward's memory and its layers'."""

    layers: list[LayerMemory] = field(default_factory=list)
    forward_alloc_bytes: float | None = None
    forward_peak_bytes: float | None = None
    peak_layer: str | None = None
    """The top-level layer in which the forward's live bytes were highest (in its first measured forward:
    torch_memory's summary, memory_peak_layer); None without allocator events."""
    largest_layer: str | None = None
    """The top-level layer with the largest peak of its own (the most working memory above what was live at its
    start)."""
    layers_alloc_ratio: float | None = None
    """The top-level layers' bytes allocated over the whole forward's (1.0: every allocation is inside a layer)."""
    forward_faults: float | None = None
    rss_peak_bytes: float | None = None
    """The process's resident memory at its highest during the forward (sysstat)."""
    load_timeline: Callable[[], MemoryTimeline] = MemoryTimeline
    """Reads `timeline` from the run's records (hwprof.analysis.memory_timeline)."""
    unavailable: str | None = None
    """Why there are no allocator figures (the torch_memory collector did not run, or recorded nothing)."""

    @cached_property
    def timeline(self) -> MemoryTimeline:
        """RSS through a pass and the allocator's live bytes through one forward: memory.png's series, read when it
        is drawn (they are counter samples among the records, a second and more of parsing for a large model)."""
        return self.load_timeline()

    @property
    def beyond_peak_bytes(self) -> float | None:
        """RSS less the forward's peak of live tensor bytes: the process's memory beyond the forward's own
        tensors (the weights, Python, OpenCV, the libraries; an estimate: the two are sampled differently)."""
        if self.rss_peak_bytes is None or self.forward_peak_bytes is None:
            return None
        return self.rss_peak_bytes - self.forward_peak_bytes

    def top(self, n: int) -> list[LayerMemory]:
        """The top-level layers by bytes allocated."""
        rows = [r for r in self.layers if r.depth == 1 and r.alloc_bytes is not None]
        return sorted(rows, key=lambda r: -(r.alloc_bytes or 0.0))[:n]


def memory_view(report: LayerReport, data: RunData) -> MemoryView:
    metrics = data.metrics()
    view = MemoryView(layers=[_layer(row) for row in report.layers], load_timeline=lambda: memory_timeline(data))
    profiler = metrics.get(PROFILER)
    forward = profiler.stage("forward") if profiler is not None else {}
    if "mem_alloc_bytes" not in forward:
        view.unavailable = (
            "no allocator figures: the torch_memory collector (layers pass) did not run"
            if profiler is None
            else "torch_memory recorded no allocation in the forward"
        )
    else:
        view.forward_alloc_bytes = forward.get("mem_alloc_bytes")
        view.forward_peak_bytes = forward.get("mem_peak_bytes")
    top = [r for r in view.layers if r.depth == 1 and r.peak_bytes is not None]
    if top:
        view.largest_layer = max(top, key=lambda r: r.peak_bytes or 0.0).name
    view.peak_layer = data.doc.summary(TorchMemorySummary).memory_peak_layer
    allocated = [r.alloc_bytes for r in view.layers if r.depth == 1 and r.alloc_bytes is not None]
    if allocated and view.forward_alloc_bytes:
        view.layers_alloc_ratio = sum(allocated) / view.forward_alloc_bytes
    counters = metrics.get("perf_events")
    if counters is not None:
        view.forward_faults = counters.stage("forward").get("page-faults")
    sysstat = metrics.get("sysstat")
    if sysstat is not None:
        view.rss_peak_bytes = sysstat.stage("forward").get("rss_peak_bytes")
    return view


def _layer(row: LayerStat) -> LayerMemory:
    m = row.metrics
    return LayerMemory(
        row.name,
        row.type,
        row.depth,
        m.get(ALLOC),
        m.get(FREED),
        m.get(ALLOCS),
        m.get(PEAK),
        m.get(GROWTH),
        m.get(FAULTS),
    )
