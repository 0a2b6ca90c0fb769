"""Readings -> per-layer / per-stage metric tables and the check figures (pure, no I/O).

Shared by the perf_events and papi collectors, and usable on a readings file from another run.

Table contents (MetricTables):
- layers["model.7"][event]: mean self (exclusive) count per measured iteration, multiplex-scaled;
  [f"{event}.inclusive"] for layers that contain marked children (depth 2);
  ["wall-time"]: mean self wall time (ns); [f"{event}.running"]: lowest running fraction, only
  where an event was multiplexed; derived metrics (CPI, ... ) from the self counts.
- stages[stage][event]: mean count per measured iteration for load/preprocess/forward/postprocess
  and "iteration" (the whole iteration); stages["forward"][f"gap.{event}"]: the forward stage's
  self count, i.e. what ran inside forward but outside every layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hwprof.perf.counting import FORWARD, Aggregate, Reading, SpanCounts, aggregate, attribute, closure, cpu_check
from hwprof.perf.derived import DERIVED_UNITS, derived_metrics
from hwprof.schema.records import MetricTables
from hwprof.schema.summaries_cpu import CounterChecks, TaskClockCheck

GAP_METHOD = (
    "forward stage's self count: intervals inside forward outside every layer span "
    "(forward-hook overhead and the model's Python between layers); "
    "sum(layer self counts) + gap = forward count"
)
EVENT_METHOD = "mean self (exclusive) count per measured iteration, scaled by time_enabled/time_running"
GAP_ROTATED_METHOD = (
    "forward stage's count minus the sum of the layers' self counts, each a mean over the iterations that read "
    "it (the layers were read in a share of the iterations: --counter-reads rotate; estimate). Per iteration, "
    "the read layers' self counts + the forward's self count = the forward's count exactly (the summary's "
    "layers_plus_gap_vs_forward check), where the forward's self count then also holds the unread layers"
)
VISITS_METHOD = (
    "measured iterations that read the counters at this layer's markers, over which its counts are means "
    "(every measured iteration with --counter-reads every; a planned share of them with rotate)"
)


@dataclass
class Analysis:
    tables: MetricTables
    spans: list[SpanCounts]
    totals: dict[str, float] = field(default_factory=dict)
    """Per event: sum over measured iterations of the whole-iteration count."""
    closure: dict[str, dict[str, float | None]] = field(default_factory=dict)
    cpu: TaskClockCheck | None = None
    running: dict[str, float] = field(default_factory=dict)
    """Per event: lowest running fraction over any span (1.0 = never multiplexed)."""
    iterations: int = 0
    unmeasured: list[str] = field(default_factory=list)
    """Events present in the readings that never ran in any span (running time never advanced)."""


def analyse(
    readings: Sequence[Reading],
    units: Mapping[str, str],
    scales: Mapping[str, float] | None = None,
    line_size: int = 64,
    cpu_event: str = "task-clock",
    rotated: bool = False,
) -> Analysis:
    """rotated: the layers were read in a share of the measured iterations (hwprof.perf.layer_reads): the
    forward's gap is then its count minus the layers' means."""
    spans = attribute(readings, scales)
    aggs = aggregate(spans)
    tables = MetricTables()
    tables.units["wall-time"] = "ns"
    for event, unit in units.items():
        tables.units[event] = unit
        tables.methods[event] = EVENT_METHOD
    for (kind, name), agg in aggs.items():
        if kind == "layer":
            tables.layers[name] = _layer_row(agg, tables, line_size)
        else:
            tables.stages[name if kind == "stage" else kind] = _stage_row(agg, tables, line_size, units)
    if rotated and FORWARD in tables.stages:
        _gap_by_difference(tables)
    analysis = Analysis(tables, spans)
    analysis.iterations = len({s.iteration for s in spans if s.kind == "iteration"})
    for span in spans:
        if span.kind == "iteration":
            for event, value in span.inclusive.items():
                analysis.totals[event] = analysis.totals.get(event, 0.0) + value
        for event, fraction in span.running.items():
            analysis.running[event] = min(fraction, analysis.running.get(event, 1.0))
    seen = {event for r in readings for event in r.counts}
    measured = {event for s in spans for event in s.inclusive}
    analysis.unmeasured = sorted(seen - measured)
    analysis.closure = {event: c.to_dict() for event, c in closure(spans).items()}
    analysis.cpu = cpu_check(spans, cpu_event)
    return analysis


def _derived_into(
    row: dict[str, float], counts: Mapping[str, float], wall: float, tables: MetricTables, line_size: int
) -> None:
    for d in derived_metrics(counts, wall, line_size):
        row[d.name] = d.value
        tables.units[d.name] = d.unit
        tables.methods.setdefault(d.name, d.method)


def _layer_row(agg: Aggregate, tables: MetricTables, line_size: int) -> dict[str, float]:
    row: dict[str, float] = dict(agg.self)
    row["wall-time"] = agg.self_wall_ns
    row["visits"] = agg.visits
    tables.units["visits"] = "iterations"
    tables.methods["visits"] = VISITS_METHOD
    if agg.has_children:
        for event, value in agg.inclusive.items():
            row[f"{event}.inclusive"] = value
            tables.units[f"{event}.inclusive"] = tables.units.get(event, "count")
            tables.methods[f"{event}.inclusive"] = "mean count per iteration including nested layers"
        row["wall-time.inclusive"] = agg.wall_ns
        tables.units["wall-time.inclusive"] = "ns"
    _running_into(row, agg, tables)
    _derived_into(row, agg.self, agg.self_wall_ns, tables, line_size)
    return row


def _stage_row(agg: Aggregate, tables: MetricTables, line_size: int, units: Mapping[str, str]) -> dict[str, float]:
    row: dict[str, float] = dict(agg.inclusive)
    row["wall-time"] = agg.wall_ns
    if agg.kind == "stage" and agg.name == FORWARD:
        for event, value in agg.self.items():
            row[f"gap.{event}"] = value
            tables.units[f"gap.{event}"] = units.get(event, "count")
            tables.methods[f"gap.{event}"] = GAP_METHOD
        row["gap.wall-time"] = agg.self_wall_ns
        tables.units["gap.wall-time"] = "ns"
        tables.methods["gap.wall-time"] = GAP_METHOD
    _running_into(row, agg, tables)
    _derived_into(row, agg.inclusive, agg.wall_ns, tables, line_size)
    return row


def _gap_by_difference(tables: MetricTables) -> None:
    forward = tables.stages[FORWARD]
    for key in [k for k in forward if k.startswith("gap.")]:
        measure = key.removeprefix("gap.")
        total = forward.get(measure)
        if total is None:
            continue
        forward[key] = total - sum(row.get(measure, 0.0) for row in tables.layers.values())
        tables.methods[key] = GAP_ROTATED_METHOD


def _running_into(row: dict[str, float], agg: Aggregate, tables: MetricTables) -> None:
    for event, fraction in agg.running_min.items():
        if fraction < 0.999:
            row[f"{event}.running"] = fraction
            tables.units[f"{event}.running"] = "fraction"
            tables.methods[f"{event}.running"] = "lowest time_running/time_enabled: the count was multiplexed"


def summary_checks(analysis: Analysis) -> CounterChecks:
    return CounterChecks.of(task_clock_vs_process_cpu=analysis.cpu, layers_plus_gap_vs_forward=analysis.closure)


__all__ = ["DERIVED_UNITS", "Analysis", "analyse", "summary_checks"]
