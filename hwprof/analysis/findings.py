"""A short ranked list of what matters in a run, each finding with the numbers behind it.

Every rule fires only on data that was measured, and states only what the numbers show: a
memory-bound layer is one whose intensity from minimum bytes lies under the ridge point; a high
CPI is called "memory stalls" only when the same layer's cache misses per kilo-instruction are
high too. Findings are ranked by the share of forward (or of the pipeline) they concern; caveats
about the data itself (noise, few iterations, a busy host, hook overhead) come after them.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from hwprof.analysis.finding import CAVEAT, COUNTERS, KERNELS, LAYER_TIME, TIMING, TRACE, Finding, pct
from hwprof.analysis.health import RunHealth, follow_health
from hwprof.analysis.kernel_findings import kernel_findings, thin_layers
from hwprof.analysis.layers.findings import counters, efficiency, hotspots, kernels, roofline, threads, type_share
from hwprof.analysis.layers.stats import LayerReport
from hwprof.analysis.neighbours import others_text
from hwprof.analysis.overhead import Overheads
from hwprof.analysis.paired_cost import cost_words
from hwprof.analysis.roofline import Roof
from hwprof.analysis.stages import Stages
from hwprof.analysis.types import TypeStat
from hwprof.core.program_spec import PROGRAM_SPAN

SMALL_STAGE_SHARE = 0.02
BIG_STAGE_SHARE = 0.15
OUTSIDE_SHARE = 0.05
BETWEEN_OPS_SHARE = 0.10
NOISY_P90 = 1.2
FEW_ITERATIONS = 10
PASS_RATIO = 2.0
SCALE_SLACK = 0.05
STEAL_CAVEAT = 0.05
"""A pass during which the hypervisor stole more than this share of the CPUs gets a caveat."""


def stages(table: Stages) -> list[Finding]:
    out: list[Finding] = []
    if any(r.name == PROGRAM_SPAN for r in table.rows):
        # a whole-process run (a program that called no model, a service sampled from outside): its one stage is
        # the whole run, so "program is 100% of the pipeline" would be true by construction and say nothing
        return out
    rows = [r for r in table.rows if r.name not in ("forward", "iteration") and r.share is not None]
    small = [r for r in rows if (r.share or 0.0) < SMALL_STAGE_SHARE]
    if small:
        names = ", ".join(r.name for r in small)
        shares = ", ".join(pct(r.share or 0.0) for r in small)
        out.append(
            Finding(
                f"{names} {'is' if len(small) == 1 else 'are'} {shares} of the pipeline: not worth optimising",
                "; ".join(f"{r.name} p50 {r.p50_ms:.2f} ms" for r in small)
                + f" of {small[0].p50_ms / (small[0].share or 1):.2f} ms per iteration",
                "stage",
                0.01,
            )
        )
    for row in rows:
        if (row.share or 0.0) >= BIG_STAGE_SHARE:
            # NMS's time follows its candidate count: a count that is not a trained model's makes no verdict
            unlike = table.postprocess_note if row.name == "postprocess" else None
            verdict = "worth optimising beside forward" if not unlike else "not a trained model's figure"
            out.append(
                Finding(
                    f"{row.name} is {pct(row.share or 0.0)} of the pipeline: {verdict}",
                    f"p50 {row.p50_ms:.2f} ms of {row.p50_ms / (row.share or 1):.2f} ms per iteration"
                    + (f"; {unlike.removeprefix('postprocess: ')}" if unlike else ""),
                    "stage",
                    row.share or 0.0,
                )
            )
    return out


def python_overhead(report: LayerReport, over: Overheads) -> list[Finding]:
    out: list[Finding] = []
    if over.outside_layers_share is not None and over.outside_layers_share >= OUTSIDE_SHARE:
        out.append(
            Finding(
                f"{pct(over.outside_layers_share)} of forward is outside every layer",
                f"{over.outside_layers_ms:.2f} ms per forward between layer spans ({report.time_pass} pass, "
                "scaled): the model's Python between layers, plus the layer hooks",
                "overhead",
                over.outside_layers_share,
                topic="python-overhead",
            )
        )
    if over.between_ops_share is not None and over.between_ops_share >= BETWEEN_OPS_SHARE:
        out.append(
            Finding(
                f"{pct(over.between_ops_share)} of forward is between aten ops (Python and dispatch)",
                f"{over.between_ops_ms:.2f} ms per forward under torch.profiler (upper bound: includes the "
                "profiler's per-op cost)",
                "overhead",
                over.between_ops_share,
                topic="python-overhead",
            )
        )
    return out


def caveats(report: LayerReport, table: Stages, over: Overheads) -> list[Finding]:
    """What weakens the data itself: a disturbed host, few or noisy iterations, peaks, scaling, steal, pass costs."""
    return [
        *_disturbed(table),
        *_forward_spread(table),
        *_peaks(report),
        *_scaled_up(report, table),
        *_stolen(over),
        *_costly_time_pass(report, over),
        *_unresolved_costs(over),
    ]


def _caveat(title: str, evidence: str) -> Finding:
    return Finding(title, evidence, CAVEAT, 0.0)


def _disturbed(table: Stages) -> list[Finding]:
    if not table.disturbed:
        return []
    return [
        _caveat(
            "the timing pass was disturbed (the stages say by what)",
            "the stage times and every layer time (scaled to the timing pass's forward p50) are inflated; "
            "collect again when these CPUs are free, or on dedicated cores",
        )
    ]


def _forward_spread(table: Stages) -> list[Finding]:
    """Too few measured iterations, or a noisy forward."""
    fwd = table.get("forward")
    if fwd is None:
        return []
    out: list[Finding] = []
    if fwd.n < FEW_ITERATIONS:
        out.append(
            _caveat(
                f"only {fwd.n} measured iterations: p90 and p99 are rough",
                "collect with --iters 20 or more for stable percentiles",
            )
        )
    if fwd.p50_ms > 0 and fwd.p90_ms / fwd.p50_ms > NOISY_P90:
        out.append(
            _caveat(
                f"forward latency is noisy: p90 is {fwd.p90_ms / fwd.p50_ms:.2f}x p50",
                f"p50 {fwd.p50_ms:.2f} ms, p90 {fwd.p90_ms:.2f} ms, stdev {fwd.stdev_ms:.2f} ms over {fwd.n}",
            )
        )
    return out


def _peaks(report: LayerReport) -> list[Finding]:
    """A roof the run exceeded (raised to the run's best rate); peaks measured on a busy host."""
    roof = report.roof.roof
    if roof is None:
        return []
    out: list[Finding] = []
    if roof.raised:
        out.append(
            _caveat(
                f"{roof.above_measured} {'layer' if roof.above_measured == 1 else 'layers'} ran faster than the "
                f"measured peak ({roof.probe_gflops:.1f} GFLOP/s): "
                f"the roof is this run's own best rate, {roof.peak_gflops:.1f} GFLOP/s ({roof.raised_by})",
                "a roof the workload exceeds is wrong, not the layers: % peak, bound and % of roof divide by the "
                "run's best rate; measure the peak again on a quiet host: hwprof doctor --peaks --force"
                + _scaled_roof(roof),
            )
        )
    if roof.busy_host:
        kept = ""
        if roof.source == "busy":
            kept = " (this run's only: not cached; the next run on a quiet host measures again)"
        out.append(
            _caveat(
                f"peaks were measured on a busy host ({roof.busy_text()}): they are likely too low{kept}",
                ("the roof is this run's best layer rate instead" if roof.raised else "% of peak is then too high")
                + "; measure again on an idle host: hwprof doctor --peaks --force",
            )
        )
    return out


def _scaled_roof(roof: Roof) -> str:
    if roof.best_unscaled is None:
        return ""
    return (
        f"; that rate is mostly the scaling of the layer times to the clean forward: by its own time in its pass "
        f"{roof.raised_by} ran at {roof.best_unscaled:.1f} GFLOP/s, every layer's rate is scaled alike"
    )


def _scaled_up(report: LayerReport, table: Stages) -> list[Finding]:
    """The timing pass slower than the pass with hooks: its layer times were scaled up."""
    if report.scale is None or not report.scale > 1 + SCALE_SLACK:  # NaN: no caveat
        return []
    if report.scale_paired:
        text = f"the {report.time_pass} pass's clean iterations were {report.scale:.2f}x its measured ones"
    else:
        clean = "disturbed" if table.disturbed else "clean"
        text = f"the {clean} timing pass's forward was {report.scale:.2f}x the {report.time_pass} pass's"
    return [
        _caveat(
            text,
            "a pass with hooks should not be faster than the clean one: the host's load changed between "
            "passes (or between the blocks of one); per-layer times are scaled up to the clean forward",
        )
    ]


def _stolen(over: Overheads) -> list[Finding]:
    stolen = [c for c in over.passes if c.host_steal_share is not None and c.host_steal_share > STEAL_CAVEAT]
    if not stolen:
        return []
    worst = max(stolen, key=lambda c: c.host_steal_share or 0.0)
    return [
        _caveat(
            f"the hypervisor stole {worst.host_steal_share or 0.0:.1%} of the CPUs during the {worst.name} pass"
            + (f" (and over {STEAL_CAVEAT:.0%} in {len(stolen) - 1} more)" if len(stolen) > 1 else ""),
            "a noisy neighbour on this VM: that pass's timings are inflated and ratios between passes are "
            "unreliable; collect again when steal is low, or on dedicated cores",
        )
    ]


def _costly_time_pass(report: LayerReport, over: Overheads) -> list[Finding]:
    """The pass the layer times come from cost more than PASS_RATIO times the clean forward."""
    out: list[Finding] = []
    for cost in over.passes:
        figure = cost.cost
        if cost.name == report.time_pass and figure is not None and figure.resolved and figure.ratio > PASS_RATIO:
            out.append(
                _caveat(
                    f"the {cost.name} pass's forward was {figure.ratio_text()} the clean one ({figure.method})",
                    f"per-layer times are scaled by {report.scale:.3f}" if report.scale else "layer times not scaled",
                )
            )
    return out


def _unresolved_costs(over: Overheads) -> list[Finding]:
    out: list[Finding] = []
    for c in over.passes:
        if c.cost is None or c.cost.resolved:
            continue
        added = f" ({c.cost.extension})" if c.cost.extension else ""
        fix = "collect with more --iters"
        if not c.cost.too_few_blocks:
            fix += ", or when these CPUs are free, for a cost of a few %"
        out.append(
            _caveat(
                f"the paired cost of the {c.name} pass is {cost_words(c.cost, partial(others_text, c.neighbours))}",
                f"{c.cost.unresolved_why}{added}: {fix}",
            )
        )
    return out


def findings(
    report: LayerReport,
    types: list[TypeStat],
    table: Stages,
    over: Overheads,
    thread_count: int | None,
    limit: int = 10,
    host_time: bool = False,
    health: RunHealth | None = None,
) -> list[Finding]:
    """host_time: the layer times are the host's launch times (a GPU run), which the hotspot findings say.

    Each rule's findings are stamped with the measurements they rest on; where `health` says a pass under them
    was unfit for a verdict (hwprof.analysis.health), they are unconfirmed: listed after the ranked ones with the
    reason, never ranked."""
    produced = [
        (hotspots(report, host_time), (LAYER_TIME,)),
        (type_share(types, host_time), (LAYER_TIME,)),
        (roofline(report), (LAYER_TIME, TIMING)),
        (efficiency(report), (LAYER_TIME, TIMING)),
        (stages(table), (TIMING,)),
        (kernels(report), (KERNELS, LAYER_TIME)),
        (python_overhead(report, over), (LAYER_TIME, TRACE)),
        (counters(report), (COUNTERS, LAYER_TIME)),
        (threads(report, thread_count), (COUNTERS,)),
        (kernel_findings(report), (KERNELS, LAYER_TIME)),
    ]
    ranked = [replace(f, sources=sources) for found, sources in produced for f in found]
    ranked.sort(key=lambda f: -f.weight)
    ranked = follow_health(ranked, health or RunHealth())
    kept = [f for f in ranked if f.ranked][:limit] + [f for f in ranked if not f.ranked]
    return kept + caveats(report, table, over) + thin_layers(report)
