"""Python overhead inside forward, and what each collector pass costs over the clean timing pass.

- Outside layers: forward time not inside any top-level layer span (the model's own Python
  between layers: the loop over model.model, `from` routing, list appends; plus the hooks).
  From the layers pass markers, scaled like the layer times.
- Between ops: forward time on the calling thread not inside any aten op, from torch.profiler
  (range duration - aten self time). It is Python and dispatcher time, measured with the
  profiler's own cost (a few microseconds per op) included, so it is an upper bound.
- Pass overheads: each pass's own cost (run.json passes.<name>.overhead, see paired_cost): paired
  in the pass where its collectors switch off between iterations, else a pass-level estimate
  against the timing pass; the method is named beside every figure.
- Counter checks: the counting engine's own cross-checks from its run.json summary (layers + gap
  = forward per event; task-clock against process CPU time, allowing the host's steal time).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from hwprof.analysis.availability import Missing, collector_missing
from hwprof.analysis.neighbours import others_text, pass_load
from hwprof.analysis.paired_cost import PASS_LEVEL, PassCostFigure, cost_words
from hwprof.perf.neighbours import NeighbourLoad
from hwprof.schema.summaries_cpu import LayerReads, PapiSummary, PerfEventsSummary, TimingSummary

if TYPE_CHECKING:
    from hwprof.analysis.layers.stats import LayerReport
    from hwprof.rundir.reader import RunData
    from hwprof.schema.run import RunDoc


@dataclass
class PassCost:
    name: str
    status: str
    collectors: list[str]
    wall_s: float | None
    forward_p50_ms: float | None
    ratio: float | None
    """forward p50 of the pass / forward p50 of the timing pass (separate processes)."""
    host_steal_share: float | None = None
    """The hypervisor's steal over the pass, as a share of all CPUs' time (run.json passes.*)."""
    cost: PassCostFigure | None = None
    """The pass's own cost and its method (paired in the pass, or the pass-level estimate)."""
    pass_level: PassCostFigure | None = None
    """The whole pass against the timing pass: with `cost` paired, what the always-on collectors add."""
    neighbours: NeighbourLoad | None = None
    """Other work on the run's CPUs during the pass (run.json passes.*.neighbours)."""
    stopped: str | None = None
    """How many iterations the pass measured and why it stopped there (passes.*.stopping), where a rule decided."""

    def cost_text(self, short: bool = True) -> str | None:
        """The cost as the overheads table shows it: the ratio, or 'not resolved (...)' saying why: too few
        blocks (PassCostFigure.too_few_blocks), else naming who took the CPUs (short: their names; else with pid
        and CPU time, as the findings name them)."""
        if self.cost is None:
            return None
        return cost_words(self.cost, lambda: others_text(self.neighbours, short))

    def to_dict(self) -> dict[str, Any]:
        """An unresolved cost keeps no ratio under "ratio": its blocks' median is under ratio_unresolved."""
        out = asdict(self)
        for key in ("cost", "pass_level"):
            if out[key] is not None and not out[key]["shapes"]:  # one input shape: it reads as it always did
                del out[key]["shapes"]
        if self.cost is not None and not self.cost.resolved:
            out["cost"]["ratio_unresolved"] = out["cost"]["ratio"]
            out["cost"]["ratio"] = None
            out["cost"]["text"] = self.cost_text()
        if self.cost is not None:
            out["cost"]["resolved"] = self.cost.resolved
            if not self.cost.resolved:
                out["cost"]["unresolved_why"] = self.cost.unresolved_why
        return out


@dataclass
class Overheads:
    passes: list[PassCost]
    outside_layers_ms: float | None = None
    outside_layers_share: float | None = None
    outside_layers_cpu_ms: float | None = None
    """perf_events' forward gap in task-clock: CPU time of all threads outside every layer."""
    between_ops_ms: float | None = None
    between_ops_share: float | None = None
    """Of the forward range's duration under torch.profiler."""
    between_ops_layers: list[tuple[str, float, float]] = field(default_factory=list)
    """(layer, ms between ops, share of the layer range) for the layers with the most."""
    harness_vs_reference: float | None = None
    """Harness forward / a plain model(x) loop, from the timing collector."""
    counter_checks: list[str] = field(default_factory=list)
    """One line per cross-check of the counters (see counter_checks)."""
    missing: dict[str, Missing] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["passes"] = [p.to_dict() for p in self.passes]
        out["missing"] = {k: v.to_dict() for k, v in self.missing.items()}
        return out


def pass_costs(run: RunDoc) -> list[PassCost]:
    out = []
    for name, p in run.passes.items():
        cost = PassCost(
            name,
            p.status,
            list(p.collectors or []),
            p.wall_s,
            p.forward_p50_ms,
            p.overhead_vs_timing,
            p.host_steal_share,
        )
        cost.neighbours = pass_load(run, name)
        cost.stopped = p.stopping.text if p.stopping else None
        if p.overhead_pass_level:
            cost.pass_level = PassCostFigure.from_dict(p.overhead_pass_level.to_json())
        if p.overhead:
            cost.cost = PassCostFigure.from_dict(p.overhead.to_json())
        elif cost.ratio is not None and name != "timing":  # a run from before the figures had a method
            cost.cost = PassCostFigure(PASS_LEVEL, cost.ratio, None, None, covers=cost.collectors)
        out.append(cost)
    return out


def overheads(data: RunData, layers: LayerReport) -> Overheads:
    run = data.doc
    out = Overheads(pass_costs(run))
    if layers.outside_ms is not None and layers.forward_ms:
        out.outside_layers_ms = layers.outside_ms
        out.outside_layers_share = layers.outside_ms / layers.forward_ms
    else:
        out.missing["outside_layers"] = Missing("no pass recorded both forward and layer markers")
    metrics = data.metrics()
    perf = next((metrics[name] for name in ("perf_events", "papi") if name in metrics), None)
    if perf is not None:
        gap = perf.stage("forward").get("gap.task-clock")
        if gap is not None and gap < 0:
            out.missing["outside_layers_cpu"] = Missing(
                f"the forward's task-clock less its layers' came out negative ({gap / 1e6:.2f} ms): each layer's "
                "mean carries the cost of the reads at its own markers, which the forward paid for a share of "
                "the layers only (--counter-reads rotate)",
                "--counter-reads every, or --counter-threads model (a read then costs the other threads nothing)",
            )
        elif gap is not None:
            out.outside_layers_cpu_ms = gap / 1e6
    prof = metrics.get("torch_profiler")
    if prof is not None:
        fwd = prof.stage("forward")
        if fwd.get("profiler_stage_ms") and "aten_self_ms" in fwd:
            out.between_ops_ms = max(fwd["profiler_stage_ms"] - fwd["aten_self_ms"], 0.0)
            out.between_ops_share = out.between_ops_ms / fwd["profiler_stage_ms"]
        per_layer = []
        for name, row in prof.layers.items():
            if row.get("profiler_layer_ms") and "aten_self_ms" in row:
                gap_ms = max(row["profiler_layer_ms"] - row["aten_self_ms"], 0.0)
                per_layer.append((name, gap_ms, gap_ms / row["profiler_layer_ms"]))
        per_layer.sort(key=lambda t: (-t[1], t[0]))
        out.between_ops_layers = per_layer[:5]
    if out.between_ops_ms is None:
        out.missing["between_ops"] = collector_missing(run, ["torch_profiler"], "aten op times")
    timing = run.summary(TimingSummary)
    ref = timing.forward_vs_reference
    out.harness_vs_reference = float(ref) if ref is not None else None
    if ref is None and timing.forward_reference_unavailable:
        out.missing["harness_vs_reference"] = Missing(timing.forward_reference_unavailable)
    out.counter_checks = counter_checks(run)
    return out


COUNTERS_OFF = "OUTSIDE the band: check the counters"
"""Ends a counter cross-check that failed (counter_checks): the report keeps it among the notes."""


def counter_checks(run: RunDoc) -> list[str]:
    """The counters' cross-checks in words, from perf_events' (or PAPI's) summary "checks"."""
    recorded = [
        (name, checks)
        for name, checks in (
            ("perf_events", run.summary(PerfEventsSummary).checks),
            ("papi", run.summary(PapiSummary).checks),
        )
        if checks is not None and (checks.layers_plus_gap_vs_forward or checks.task_clock_vs_process_cpu)
    ]
    if not recorded:
        return []
    name, checks = recorded[0]
    lines = []
    closure = checks.layers_plus_gap_vs_forward or {}
    ratios = [c["ratio"] for c in closure.values() if c.get("ratio") is not None]
    if ratios:
        worst = max(ratios, key=lambda r: abs(r - 1))
        lines.append(f"{name}: layers + gap = forward for {len(ratios)} events (worst ratio {worst:.4f})")
    if name == "perf_events":
        perf = run.summary(PerfEventsSummary)
        lines += _layer_reads_line(perf.layer_reads)
        if perf.model_thread_only:
            lines.append("perf_events: counts of the model's thread alone (--counter-threads model; all: every thread)")
    cpu = checks.task_clock_vs_process_cpu
    if cpu is not None and cpu.ratio is not None:
        text = f"{name}: forward task-clock {cpu.ratio:.3f}x the counted threads' CPU time"
        lost = cpu.host_steal_irq_ns
        if lost is not None and cpu.process_cpu_ns:
            verdict = "consistent" if cpu.consistent else COUNTERS_OFF
            text += f"; host steal+IRQ {lost / cpu.process_cpu_ns:.1%} of it ({verdict})"
        lines.append(text)
    return lines


def _layer_reads_line(plan: LayerReads | None) -> list[str]:
    """How many visits each layer's counts come from, where the layers were read in a share of the iterations."""
    if plan is None or not plan.rotated:
        return []
    low, high = plan.visits_min, plan.visits_max
    visits = f"{low}" if low == high else f"{low}-{high}"
    return [
        f"perf_events: each layer's counts from 1 in {plan.every} measured iterations (--counter-reads rotate): "
        f"{visits} visits per layer of {plan.iterations} (layers.csv: perf_events.visits); the gap is the "
        "forward less the layers' means"
    ]
