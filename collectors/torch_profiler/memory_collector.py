"""torch's allocator per layer, in the layers pass: torch.profiler with profile_memory on and no op recorded.

Why here and not in the trace pass: there the profiler records every aten op (the trace pass costs 1.06-1.13x on
yolov7-tiny at 320), while the allocator's events alone add about 1% there and nothing the pairs resolve at 640
(scripts/bench_attributing_passes.py --methods new,no-memory; docs/passes.md).
The profiler's RecordFunction callbacks are limited to USER_SCOPE, which only the clock's sync ranges use: the
aten ops (FUNCTION scope) are never recorded, and torch's allocator reports each allocation and free to the
profiler's state all the same. In the layers pass the bytes sit beside the page faults the same forwards took
(perf_events) and the RSS they left (sysstat).

Switching: a paired pass's clean iterations must carry none of it, and toggle_collection_dynamic stops the ops'
callbacks but not the allocator's events, so each stretch of measured iterations is a profiling session of its
own: ended before the clean ones (about 6 ms, outside any forward) and begun again after (0.5 ms). Each session's
events go on the run's clock through its own sync ranges (clock.py, as the trace pass's), opened right after
it begins and right before it ends.

The torch profiler's second collector (the package's one source: torch.profiler), so that it shares the clock's
sync ranges and the probe without a collector importing another's package.

Artifacts in passes/layers/: torch_memory.metrics.json (per layer and stage) and torch_memory.records.jsonl (the
"torch CPU allocated (bytes)" counter track).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import Capability, Collector, CollectorResult, PassContext
from hwprof.collectors.torch_profiler.clock import SYNC_NAME, SyncData, fit_syncs, sync_ranges
from hwprof.collectors.torch_profiler.memory import (
    MemoryEvent,
    Range,
    live_bytes,
    memory_by_range,
    memory_methods,
    memory_units,
    peak_layer,
    with_live,
)
from hwprof.collectors.torch_profiler.probe import PROFILER_IMPORTS, probe_torch_profiler

from hwprof.core.markers import Marker, read_markers
from hwprof.core.spans import pair_begin_end
from hwprof.schema.records import MetricTables, metrics_path, records_path, write_records
from hwprof.schema.summaries_tools import TorchMemorySummary

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig

NAME = "torch_memory"
MEMORY_EVENT = "[memory]"


class TorchMemoryCollector(Collector):
    thread_bound = True
    name = NAME
    title = "torch's allocator per layer (torch.profiler profile_memory, no op recorded)"
    pass_name = "layers"
    needs_layer_markers = True
    switchable = True

    zygote_imports = PROFILER_IMPORTS

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self._on = False
        self._start_windows: list[list[int]] = []
        self._events: list[MemoryEvent] = []
        self._sessions = 0
        self._uncertainty_ns = 0

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        if config.runtime != "torch":
            return Capability.unavailable(
                f"the forward runs in {config.runtime}, whose memory is not torch's allocator's",
                "hwprof collect --runtime torch for memory per layer",
            )
        return probe_torch_profiler(sys.executable)

    def start(self, ctx: PassContext) -> None:
        self._begin()

    def pause(self, ctx: PassContext) -> None:
        self._end()

    def resume(self, ctx: PassContext) -> None:
        self._begin()

    def stop(self, ctx: PassContext) -> None:
        self._end()

    def _begin(self) -> None:
        if self._on:
            return
        import torch
        from torch._C._profiler import ProfilerActivity, ProfilerConfig, ProfilerState, RecordScope
        from torch._C._profiler import _ExperimentalConfig as Experimental

        config = ProfilerConfig(ProfilerState.KINETO, False, True, False, False, False, Experimental())
        activities = {ProfilerActivity.CPU}
        autograd: Any = torch.autograd  # its stubs lag the bindings: _enable_profiler's scopes, KinetoEvent.nbytes
        autograd._prepare_profiler(config, activities)
        autograd._enable_profiler(config, activities, {RecordScope.USER_SCOPE})
        self._on = True
        self._start_windows = sync_ranges(torch)

    def _end(self) -> None:
        if not self._on:
            return
        import torch

        stop_windows = sync_ranges(torch)
        self._on = False
        raw: list[Any] = torch.autograd._disable_profiler().events()
        syncs, memory = [], []  # one walk, each event's name asked once (yolov7 320: 264,000 events a session)
        for event in raw:
            name = event.name()
            if name == MEMORY_EVENT:
                memory.append(event)
            elif name == SYNC_NAME:
                syncs.append(event.start_ns())
        fit = fit_syncs(syncs, SyncData(self._start_windows, stop_windows))
        self._uncertainty_ns = max(self._uncertainty_ns, fit.uncertainty_ns)
        self._sessions += 1
        self._events.extend(MemoryEvent(fit(e.start_ns()), int(e.nbytes()), int(e.device_type())) for e in memory)

    def close(self, ctx: PassContext) -> CollectorResult:
        self._end()
        if not self._sessions:
            if ctx.interrupted:
                return CollectorResult("interrupted", reason=f"{ctx.interrupted}, before the profiler started")
            return CollectorResult("failed", reason="the profiler never started: the pass ended before start()")
        events = with_live(self._events)
        markers_file = ctx.out_dir / "markers.jsonl"
        ranges, iterations = measured_ranges(read_markers(markers_file) if markers_file.exists() else [])
        tables = memory_tables(events, ranges, iterations)
        tables.save(metrics_path(ctx.out_dir, NAME))
        write_records(records_path(ctx.out_dir, NAME), live_bytes(events))
        summary = TorchMemorySummary.of(
            events=len(events),
            sessions=self._sessions,
            iterations=iterations,
            memory_peak_layer=peak_layer(events, ranges),
            sync_uncertainty_ns=float(self._uncertainty_ns),
        )
        artifacts = [ctx.relpath(metrics_path(ctx.out_dir, NAME)), ctx.relpath(records_path(ctx.out_dir, NAME))]
        if not events:
            reason = "torch's allocator reported no allocation in the measured iterations"
            return CollectorResult("failed", reason=reason, summary=summary, artifacts=artifacts)
        return CollectorResult("ok", summary=summary, artifacts=artifacts)


COLLECTOR = TorchMemoryCollector


def measured_ranges(markers: list[Marker]) -> tuple[list[Range], int]:
    """The measured iterations' layer and stage ranges (kind, name, start, end), and how many iterations."""
    ranges: list[Range] = []
    iterations = 0
    for begin, end in pair_begin_end(m for m in markers if m.measured and not m.replayed):
        if begin.kind == "iteration":
            iterations += 1
        elif begin.kind in ("layer", "stage"):
            ranges.append((begin.kind, begin.name, begin.t_ns, end.t_ns))
    return ranges, iterations


def memory_tables(events: list[MemoryEvent], ranges: list[Range], iterations: int) -> MetricTables:
    """Each layer's and stage's figures as means per measured iteration; a range with no event says 0."""
    per: dict[str, dict[str, dict[str, Any]]] = {"layer": {}, "stage": {}}
    n = max(iterations, 1)
    for (kind, name), row in memory_by_range(events, ranges).items():
        per[kind][name] = {figure: value / n for figure, value in row.items()}
    return MetricTables(layers=per["layer"], stages=per["stage"], units=memory_units(), methods=memory_methods())
