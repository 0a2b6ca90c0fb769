"""Findings about the layers: where forward's time goes (hot layers, layer types), how far layers sit below the
roofline, and which kernels, counters and threads stand out.
"""

from __future__ import annotations

import statistics

from hwprof.analysis.finding import Finding, index_ranges, layer_label, layers_of, pct, verb
from hwprof.analysis.layers.stats import LayerReport, LayerStat
from hwprof.analysis.roofline import MEMORY, Roof
from hwprof.analysis.types import TypeStat

HOT_SHARE = 0.5
"""Hotspot rule: the fewest layers that together take at least this share of forward."""
HOT_MAX_LAYERS = 5
TYPE_SHARE = 0.3
MEMORY_MIN_SHARE = 0.05
FAR_BELOW_ROOF_PCT = 25.0
BIG_LAYER_SHARE = 0.05
CPI_RATIO = 1.5
MPKI_RATIO = 1.5
CPUS_RATIO = 0.6
LOW_HOST_CPUS = 0.5
MIN_LAYER_SHARE = 0.02


def _of(host_time: bool) -> tuple[str, str]:
    """What a layer's share is of, and the evidence's tail: on a GPU the layer hooks time the host launching
    a layer's kernels, not the GPU running them."""
    if host_time:
        return "the forward's host (launch) time", "; the GPU's own time per layer is in 'layers by GPU time'"
    return "forward", ""


def hotspots(report: LayerReport, host_time: bool = False) -> list[Finding]:
    timed = report.top(len(report.layers))
    if not timed or not report.forward_ms:
        return []
    of, tail = _of(host_time)
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
                f"time is spread: the largest layer, {layer_label(top)}, takes {pct(top.share or 0)} of {of}",
                f"{len(chosen)} layers are needed for {pct(total)} of forward ({report.forward_ms:.2f} ms p50){tail}",
                "hotspot",
                top.share or 0.0,
            )
        ]
    parts = ", ".join(f"{layer_label(layer)} {pct(layer.share or 0)}" for layer in chosen)
    return [
        Finding(
            f"{len(chosen)} layer{'s' if len(chosen) > 1 else ''} take {pct(total)} of {of}",
            f"{parts} (scaled self time; forward p50 {report.forward_ms:.2f} ms){tail}",
            "hotspot",
            total,
            layers=tuple(layer.index for layer in chosen),
        )
    ]


def type_share(types: list[TypeStat], host_time: bool = False) -> list[Finding]:
    timed = [t for t in types if t.share is not None]
    if not timed:
        return []
    top = max(timed, key=lambda t: t.share or 0.0)
    if (top.share or 0.0) < TYPE_SHARE:
        return []
    of, tail = _of(host_time)
    flops = f"; {top.flops / 1e9:.2f} GFLOPs" if top.flops else ""
    return [
        Finding(
            f"{top.type} layers ({top.count}) take {pct(top.share or 0)} of {of}",
            f"{top.time_ms:.2f} ms of {top.count} layers{flops}{tail}",
            "hotspot",
            (top.share or 0.0) * 0.9,
        )
    ]


def roofline(report: LayerReport) -> list[Finding]:
    roof = report.roof.roof
    if roof is None:
        return []
    mem = [r for r in report.top_level if r.bound == MEMORY and r.share is not None]
    movers = [r for r in mem if not r.flops]
    return [
        *_data_movers(movers, roof),
        *_memory_bound([r for r in mem if r.flops], roof),
        *_below_roof(report),
    ]


def _data_movers(movers: list[LayerStat], roof: Roof) -> list[Finding]:
    """Memory-bound layers with no FLOPs: they only move data."""
    share = sum(r.share or 0.0 for r in movers)
    if not movers or not share >= MEMORY_MIN_SHARE:
        return []
    types = ", ".join(sorted({r.type for r in movers}))
    moved = sum(r.min_bytes or 0.0 for r in movers)
    return [
        Finding(
            f"{layers_of(r.index for r in movers)} ({types}) only {verb(movers, 'moves', 'move')} data: "
            f"{pct(share)} of forward",
            f"0 FLOPs; {moved / 1e6:.1f} MB minimum traffic per forward would take "
            f"{moved / roof.peak_gbps / 1e6:.2f} ms at the measured {roof.peak_gbps:.1f} GB/s; they take "
            f"{sum(r.time_ms or 0.0 for r in movers):.2f} ms",
            "roofline",
            share,
            topic="data-movement",
            layers=tuple(r.index for r in movers),
        )
    ]


def _memory_bound(mem: list[LayerStat], roof: Roof) -> list[Finding]:
    """Memory-bound layers with FLOPs: their intensity lies under the ridge."""
    share = sum(r.share or 0.0 for r in mem)
    if not mem or not share >= MEMORY_MIN_SHARE:
        return []
    ais = [r.intensity or 0.0 for r in mem]
    return [
        Finding(
            f"{layers_of(r.index for r in mem)} {verb(mem, 'is', 'are')} memory-bound: {pct(share)} of forward",
            f"intensity {min(ais):.1f}-{max(ais):.1f} FLOP/B (minimum bytes) under a ridge of "
            f"{roof.ridge:.1f} FLOP/B ({roof.peak_gflops:.1f} GFLOP/s / {roof.peak_gbps:.1f} GB/s "
            + ("measured; compute roof: the run's best layer rate)" if roof.raised else "measured)"),
            "roofline",
            share,
            topic="memory-bound",
            layers=tuple(r.index for r in mem),
        )
    ]


def _below_roof(report: LayerReport) -> list[Finding]:
    """Big top-level layers far below their roof."""
    low = [
        r
        for r in report.top(len(report.layers))
        if r.depth == 1
        and (r.share or 0.0) >= BIG_LAYER_SHARE
        and r.pct_roof is not None
        and r.pct_roof < FAR_BELOW_ROOF_PCT
    ]
    if not low:
        return []
    share = sum(r.share or 0.0 for r in low)
    worst = min(r.pct_roof or 0.0 for r in low)
    best = max(r.pct_roof or 0.0 for r in low)
    span = f"{worst:.0f}%" if round(worst) == round(best) else f"{worst:.0f}-{best:.0f}%"
    many = len(low) > 1
    return [
        Finding(
            f"layer{'s' if many else ''} {index_ranges(r.index for r in low)} "
            f"reach{'' if many else 'es'} only {span} of {'their' if many else 'its'} roof: "
            f"{pct(share)} of forward",
            "; ".join(
                f"{r.index} {r.type}: {r.gflops_s:.2f} of {r.attainable_gflops:.1f} GFLOP/s attainable "
                f"at {r.intensity:.0f} FLOP/B"
                for r in low[:4]
            )
            + ("; ..." if len(low) > 4 else ""),
            "roofline",
            sum((r.share or 0.0) * (1 - (r.pct_roof or 0.0) / 100) for r in low),
            topic="below-roof",
            layers=tuple(r.index for r in low),
        )
    ]


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
            f"{layers_of(sorted({r.index for r, _ in hits}))}",
            "; ".join(
                f"{r.index} {r.type}: {k.self_ms:.2f} ms/iter, {100 * k.share:.0f}% of its aten time"
                for r, k in hits[:4]
            )
            + " (torch.profiler, trace pass)",
            "kernels",
            weight,
            topic="reference-conv",
            layers=tuple(sorted({r.index for r, _ in hits})),
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
            + ("roof (the run's best layer rate)" if roof.raised else "measured peak"),
            f"{flops / 1e9:.2f} GFLOPs in {report.forward_ms:.2f} ms (p50, clean pass); roof "
            f"{roof.peak_gflops:.1f} GFLOP/s: {roof.compute_text()}",
            "roofline",
            0.25,
            topic="efficiency",
        )
    ]


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
                f"CPI {r.cpi:.2f} in layer {layer_label(r)} vs {median_cpi:.2f} median",
                f"{pct(r.share or 0)} of forward{cause}",
                "counters",
                r.share or 0.0,
                layers=(r.index,),
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
                topic="threads-idle",
            )
        )
    median = statistics.median(r.cpus for r in rows if r.cpus is not None)
    low = [r for r in rows if (r.cpus or 0.0) < CPUS_RATIO * median]
    if low:
        share = sum(r.share or 0.0 for r in low)
        out.append(
            Finding(
                f"{layers_of(r.index for r in low)} {verb(low, 'uses', 'use')} fewer CPUs than the rest: "
                f"{pct(share)} of forward",
                ", ".join(f"{r.index}: {r.cpus:.2f}" for r in low[:6]) + f" CPUs vs {median:.2f} median "
                "(task-clock / wall): little intra-op parallelism",
                "threads",
                share,
                topic="threads-low",
            )
        )
    return out
