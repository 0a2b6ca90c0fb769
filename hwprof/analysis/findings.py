"""A short ranked list of what matters in a run, each finding with the numbers behind it.

Every rule fires only on data that was measured, and states only what the numbers show: a
memory-bound layer is one whose intensity from minimum bytes lies under the ridge point; a high
CPI is called "memory stalls" only when the same layer's cache misses per kilo-instruction are
high too. Findings are ranked by the share of forward (or of the pipeline) they concern; caveats
about the data itself (noise, few iterations, a busy host, hook overhead) come after them.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from hwprof.analysis.kernel_findings import kernel_findings, thin_layers
from hwprof.analysis.layer_report import LayerReport, LayerStat
from hwprof.analysis.overhead import Overheads
from hwprof.analysis.roofline import MEMORY
from hwprof.analysis.stages import Stages
from hwprof.analysis.types import TypeStat

HOT_SHARE = 0.5
"""Hotspot rule: the fewest layers that together take at least this share of forward."""
HOT_MAX_LAYERS = 5
TYPE_SHARE = 0.3
MEMORY_MIN_SHARE = 0.05
FAR_BELOW_ROOF_PCT = 25.0
BIG_LAYER_SHARE = 0.05
SMALL_STAGE_SHARE = 0.02
BIG_STAGE_SHARE = 0.15
OUTSIDE_SHARE = 0.05
BETWEEN_OPS_SHARE = 0.10
CPI_RATIO = 1.5
MPKI_RATIO = 1.5
CPUS_RATIO = 0.6
LOW_HOST_CPUS = 0.5
MIN_LAYER_SHARE = 0.02
NOISY_P90 = 1.2
FEW_ITERATIONS = 10
PASS_RATIO = 2.0
SCALE_SLACK = 0.05
STEAL_CAVEAT = 0.05
PAIRED_IQR_CAVEAT = 0.1
"""A paired cost whose blocks' quartiles lie further apart than this does not resolve a few-% cost."""
"""A pass during which the hypervisor stole more than this share of the CPUs gets a caveat."""
CAVEAT = "caveat"


@dataclass
class Finding:
    title: str
    evidence: str
    kind: str
    weight: float
    """Share of forward (or of the pipeline) concerned; the ranking key."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%" if x < 0.1 else f"{100 * x:.0f}%"


def index_ranges(indices: Iterable[int]) -> str:
    """[0, 1, 2, 3, 7, 9, 10] -> "0-3, 7, 9-10"."""
    values = sorted(set(indices))
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(parts)


def _layers(indices: Iterable[int]) -> str:
    """ "layer 3" or "layers 0-2, 7"."""
    values = list(indices)
    return f"layer {values[0]}" if len(values) == 1 else f"layers {index_ranges(values)}"


def _verb(items: list[Any], singular: str, plural: str) -> str:
    return singular if len(items) == 1 else plural


def _label(layer: LayerStat) -> str:
    return f"{layer.index} ({layer.type})"


def hotspots(report: LayerReport) -> list[Finding]:
    timed = report.top(len(report.layers))
    if not timed or not report.forward_ms:
        return []
    chosen: list[LayerStat] = []
    total = 0.0
    for layer in timed:
        if total >= HOT_SHARE:
            break
        chosen.append(layer)
        total += layer.share or 0.0
    if total < HOT_SHARE or len(chosen) > HOT_MAX_LAYERS:
        top = timed[0]
        return [
            Finding(
                f"time is spread: the largest layer, {_label(top)}, takes {_pct(top.share or 0)} of forward",
                f"{len(chosen)} layers are needed for {_pct(total)} of forward ({report.forward_ms:.2f} ms p50)",
                "hotspot",
                top.share or 0.0,
            )
        ]
    parts = ", ".join(f"{_label(layer)} {_pct(layer.share or 0)}" for layer in chosen)
    return [
        Finding(
            f"{len(chosen)} layer{'s' if len(chosen) > 1 else ''} take {_pct(total)} of forward",
            f"{parts} (scaled self time; forward p50 {report.forward_ms:.2f} ms)",
            "hotspot",
            total,
        )
    ]


def type_share(types: list[TypeStat]) -> list[Finding]:
    timed = [t for t in types if t.share is not None]
    if not timed:
        return []
    top = max(timed, key=lambda t: t.share or 0.0)
    if (top.share or 0.0) < TYPE_SHARE:
        return []
    flops = f"; {top.flops / 1e9:.2f} GFLOPs" if top.flops else ""
    return [
        Finding(
            f"{top.type} layers ({top.count}) take {_pct(top.share or 0)} of forward",
            f"{top.time_ms:.2f} ms of {top.count} layers{flops}",
            "hotspot",
            (top.share or 0.0) * 0.9,
        )
    ]


def roofline(report: LayerReport) -> list[Finding]:
    roof = report.roof.roof
    if roof is None:
        return []
    out: list[Finding] = []
    mem = [r for r in report.top_level if r.bound == MEMORY and r.share is not None]
    movers = [r for r in mem if not r.flops]
    mem = [r for r in mem if r.flops]
    share = sum(r.share or 0.0 for r in movers)
    if movers and share >= MEMORY_MIN_SHARE:
        types = ", ".join(sorted({r.type for r in movers}))
        moved = sum(r.min_bytes or 0.0 for r in movers)
        out.append(
            Finding(
                f"{_layers(r.index for r in movers)} ({types}) only {_verb(movers, 'moves', 'move')} data: "
                f"{_pct(share)} of forward",
                f"0 FLOPs; {moved / 1e6:.1f} MB minimum traffic per forward would take "
                f"{moved / roof.peak_gbps / 1e6:.2f} ms at the measured {roof.peak_gbps:.1f} GB/s; they take "
                f"{sum(r.time_ms or 0.0 for r in movers):.2f} ms",
                "roofline",
                share,
            )
        )
    share = sum(r.share or 0.0 for r in mem)
    if mem and share >= MEMORY_MIN_SHARE:
        ais = [r.intensity or 0.0 for r in mem]
        out.append(
            Finding(
                f"{_layers(r.index for r in mem)} {_verb(mem, 'is', 'are')} memory-bound: {_pct(share)} of forward",
                f"intensity {min(ais):.1f}-{max(ais):.1f} FLOP/B (minimum bytes) under a ridge of "
                f"{roof.ridge:.1f} FLOP/B ({roof.peak_gflops:.1f} GFLOP/s / {roof.peak_gbps:.1f} GB/s "
                "measured)",
                "roofline",
                share,
            )
        )
    low = [
        r
        for r in report.top(len(report.layers))
        if r.depth == 1
        and (r.share or 0.0) >= BIG_LAYER_SHARE
        and r.pct_roof is not None
        and r.pct_roof < FAR_BELOW_ROOF_PCT
    ]
    if low:
        share = sum(r.share or 0.0 for r in low)
        worst = min(r.pct_roof or 0.0 for r in low)
        best = max(r.pct_roof or 0.0 for r in low)
        span = f"{worst:.0f}%" if round(worst) == round(best) else f"{worst:.0f}-{best:.0f}%"
        many = len(low) > 1
        out.append(
            Finding(
                f"layer{'s' if many else ''} {index_ranges(r.index for r in low)} "
                f"reach{'' if many else 'es'} only {span} of {'their' if many else 'its'} roof: "
                f"{_pct(share)} of forward",
                "; ".join(
                    f"{r.index} {r.type}: {r.gflops_s:.2f} of {r.attainable_gflops:.1f} GFLOP/s attainable "
                    f"at {r.intensity:.0f} FLOP/B"
                    for r in low[:4]
                )
                + ("; ..." if len(low) > 4 else ""),
                "roofline",
                sum((r.share or 0.0) * (1 - (r.pct_roof or 0.0) / 100) for r in low),
            )
        )
    return out


SLOW_KERNEL = "slow_conv"
"""aten's reference convolutions (_slow_conv2d_forward, slow_conv_dilated2d, ...): no oneDNN."""


def kernels(report: LayerReport) -> list[Finding]:
    hits = []
    for r in report.top_level:
        for k in r.kernels:
            if SLOW_KERNEL in k.name and r.share:
                hits.append((r, k))
    if not hits:
        return []
    weight = sum((r.share or 0.0) * k.share for r, k in hits)
    names = sorted({k.name for _, k in hits})
    return [
        Finding(
            f"{', '.join(names)} (aten's reference convolution, not oneDNN) runs in "
            f"{_layers(sorted({r.index for r, _ in hits}))}",
            "; ".join(
                f"{r.index} {r.type}: {k.self_ms:.2f} ms/iter, {100 * k.share:.0f}% of its aten time"
                for r, k in hits[:4]
            )
            + " (torch.profiler, trace pass)",
            "kernels",
            weight,
        )
    ]


def efficiency(report: LayerReport) -> list[Finding]:
    roof = report.roof.roof
    flops = sum(r.flops or 0.0 for r in report.top_level)
    if roof is None or not flops or not report.forward_ms:
        return []
    gflops = flops / report.forward_ms / 1e6
    return [
        Finding(
            f"forward runs at {gflops:.1f} GFLOP/s, {100 * gflops / roof.peak_gflops:.0f}% of this host's "
            "measured peak",
            f"{flops / 1e9:.2f} GFLOPs in {report.forward_ms:.2f} ms (p50, clean pass); peak "
            f"{roof.peak_gflops:.1f} GFLOP/s by a {roof.threads}-thread {roof.compute_label}",
            "roofline",
            0.25,
        )
    ]


def stages(table: Stages) -> list[Finding]:
    out: list[Finding] = []
    rows = [r for r in table.rows if r.name not in ("forward", "iteration") and r.share is not None]
    small = [r for r in rows if (r.share or 0.0) < SMALL_STAGE_SHARE]
    if small:
        names = ", ".join(r.name for r in small)
        shares = ", ".join(_pct(r.share or 0.0) for r in small)
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
            out.append(
                Finding(
                    f"{row.name} is {_pct(row.share or 0.0)} of the pipeline: worth optimising beside forward",
                    f"p50 {row.p50_ms:.2f} ms of {row.p50_ms / (row.share or 1):.2f} ms per iteration",
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
                f"{_pct(over.outside_layers_share)} of forward is outside every layer",
                f"{over.outside_layers_ms:.2f} ms per forward between layer spans ({report.time_pass} pass, "
                "scaled): the model's Python between layers, plus the layer hooks",
                "overhead",
                over.outside_layers_share,
            )
        )
    if over.between_ops_share is not None and over.between_ops_share >= BETWEEN_OPS_SHARE:
        out.append(
            Finding(
                f"{_pct(over.between_ops_share)} of forward is between aten ops (Python and dispatch)",
                f"{over.between_ops_ms:.2f} ms per forward under torch.profiler (upper bound: includes the "
                "profiler's per-op cost)",
                "overhead",
                over.between_ops_share,
            )
        )
    return out


def counters(report: LayerReport) -> list[Finding]:
    rows = [r for r in report.top_level if r.cpi is not None and (r.share or 0.0) >= MIN_LAYER_SHARE]
    if len(rows) < 3:
        return []
    median_cpi = statistics.median(r.cpi for r in rows if r.cpi is not None)
    mpkis = [r.llc_mpki for r in rows if r.llc_mpki is not None]
    median_mpki = statistics.median(mpkis) if mpkis else None
    out = []
    for r in rows:
        assert r.cpi is not None
        if r.cpi < CPI_RATIO * median_cpi:
            continue
        cause = ""
        if r.llc_mpki is not None and median_mpki and r.llc_mpki >= MPKI_RATIO * median_mpki:
            cause = f"; LLC MPKI {r.llc_mpki:.2f} vs {median_mpki:.2f} median: memory stalls"
        elif r.llc_mpki is not None and median_mpki is not None:
            cause = f"; LLC MPKI {r.llc_mpki:.2f} is not high (median {median_mpki:.2f}): not cache misses"
        out.append(
            Finding(
                f"CPI {r.cpi:.2f} in layer {_label(r)} vs {median_cpi:.2f} median",
                f"{_pct(r.share or 0)} of forward{cause}",
                "counters",
                r.share or 0.0,
            )
        )
    return out


def threads(report: LayerReport, thread_count: int | None) -> list[Finding]:
    rows = [r for r in report.top_level if r.cpus is not None and (r.share or 0.0) >= MIN_LAYER_SHARE]
    if len(rows) < 3 or not thread_count:
        return []
    out = []
    weighted = sum((r.cpus or 0.0) * (r.share or 0.0) for r in rows) / (sum(r.share or 0.0 for r in rows) or 1)
    if thread_count > 1 and weighted < LOW_HOST_CPUS * thread_count:
        out.append(
            Finding(
                f"forward keeps {weighted:.2f} CPUs busy with {thread_count} torch threads",
                "task-clock / wall time over the layers (time-weighted): the threads wait, or other "
                "processes hold the cores (check the host's load)",
                "threads",
                1 - weighted / thread_count,
            )
        )
    median = statistics.median(r.cpus for r in rows if r.cpus is not None)
    low = [r for r in rows if (r.cpus or 0.0) < CPUS_RATIO * median]
    if low:
        share = sum(r.share or 0.0 for r in low)
        out.append(
            Finding(
                f"{_layers(r.index for r in low)} {_verb(low, 'uses', 'use')} fewer CPUs than the rest: "
                f"{_pct(share)} of forward",
                ", ".join(f"{r.index}: {r.cpus:.2f}" for r in low[:6]) + f" CPUs vs {median:.2f} median "
                "(task-clock / wall): little intra-op parallelism",
                "threads",
                share,
            )
        )
    return out


def caveats(report: LayerReport, table: Stages, over: Overheads) -> list[Finding]:
    out: list[Finding] = []
    fwd = table.get("forward")
    if fwd is not None:
        if fwd.n < FEW_ITERATIONS:
            out.append(
                Finding(
                    f"only {fwd.n} measured iterations: p90 and p99 are rough",
                    "collect with --iters 20 or more for stable percentiles",
                    CAVEAT,
                    0.0,
                )
            )
        if fwd.p50_ms > 0 and fwd.p90_ms / fwd.p50_ms > NOISY_P90:
            out.append(
                Finding(
                    f"forward latency is noisy: p90 is {fwd.p90_ms / fwd.p50_ms:.2f}x p50",
                    f"p50 {fwd.p50_ms:.2f} ms, p90 {fwd.p90_ms:.2f} ms, stdev {fwd.stdev_ms:.2f} ms over {fwd.n}",
                    CAVEAT,
                    0.0,
                )
            )
    roof = report.roof.roof
    over_peak = [r for r in report.top_level if r.pct_peak is not None and r.pct_peak > 100]
    if roof is not None and over_peak:
        out.append(
            Finding(
                f"{_layers(r.index for r in over_peak)} ran faster than the measured peak "
                f"({roof.peak_gflops:.1f} GFLOP/s)",
                "the peak was measured under heavier load than the run saw: % of peak is overstated; "
                "hwprof doctor --peaks --force on an idle host",
                CAVEAT,
                0.0,
            )
        )
    if roof is not None and roof.busy_host:
        out.append(
            Finding(
                f"peaks were measured on a busy host ({roof.busy_text()}): they are likely too low",
                "% of peak is then too high; measure again on an idle host: hwprof doctor --peaks --force",
                CAVEAT,
                0.0,
            )
        )
    if report.scale is not None and report.scale > 1 + SCALE_SLACK:
        if report.scale_paired:
            text = f"the {report.time_pass} pass's clean iterations were {report.scale:.2f}x its measured ones"
        else:
            text = f"the clean timing pass's forward was {report.scale:.2f}x the {report.time_pass} pass's"
        out.append(
            Finding(
                text,
                "a pass with hooks should not be faster than the clean one: the host's load changed between "
                "passes (or between the blocks of one); per-layer times are scaled up to the clean forward",
                CAVEAT,
                0.0,
            )
        )
    stolen = [c for c in over.passes if c.host_steal_share is not None and c.host_steal_share > STEAL_CAVEAT]
    if stolen:
        worst = max(stolen, key=lambda c: c.host_steal_share or 0.0)
        out.append(
            Finding(
                f"the hypervisor stole {worst.host_steal_share or 0.0:.1%} of the CPUs during the {worst.name} pass"
                + (f" (and over {STEAL_CAVEAT:.0%} in {len(stolen) - 1} more)" if len(stolen) > 1 else ""),
                "a noisy neighbour on this VM: that pass's timings are inflated and ratios between passes are "
                "unreliable; collect again when steal is low, or on dedicated cores",
                CAVEAT,
                0.0,
            )
        )
    for cost in over.passes:
        figure = cost.cost
        if cost.name == report.time_pass and figure is not None and figure.ratio > PASS_RATIO:
            out.append(
                Finding(
                    f"the {cost.name} pass's forward was {figure.ratio_text()} the clean one ({figure.method})",
                    f"per-layer times are scaled by {report.scale:.3f}" if report.scale else "layer times not scaled",
                    CAVEAT,
                    0.0,
                )
            )
    unresolved = [
        c.name
        for c in over.passes
        if c.cost and c.cost.q1 is not None and c.cost.q3 is not None and c.cost.q3 - c.cost.q1 > PAIRED_IQR_CAVEAT
    ]
    if unresolved:
        out.append(
            Finding(
                f"the paired cost of the {', '.join(unresolved)} pass{'es is' if len(unresolved) > 1 else ' is'} not "
                f"resolved: the quartiles of {'their' if len(unresolved) > 1 else 'its'} ABBA blocks' ratios lie more "
                f"than {PAIRED_IQR_CAVEAT:.2f} apart",
                "the host's load changed within blocks (other work on these CPUs): collect with more --iters, "
                "or on a quieter host, for a cost of a few %",
                CAVEAT,
                0.0,
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
) -> list[Finding]:
    ranked = (
        hotspots(report)
        + type_share(types)
        + roofline(report)
        + efficiency(report)
        + stages(table)
        + kernels(report)
        + python_overhead(report, over)
        + counters(report)
        + threads(report, thread_count)
        + kernel_findings(report)
    )
    ranked.sort(key=lambda f: -f.weight)
    return ranked[:limit] + caveats(report, table, over) + thin_layers(report)
