"""The one per-layer table joining every source: time, roofline, counters, energy, kernels, frames.

Time. Per-layer self (exclusive) times come from the layer markers of the layers pass (or, when
there is none, the trace pass). That pass carries forward hooks and counter reads, so its forward
is slower than a clean one, and on a busy host its iterations vary. Each layer's share of forward
is taken per iteration (self time / that iteration's forward) and averaged over the measured
iterations; the layer's time is that share x the clean forward. Per-iteration shares cancel the
load changes that hit a whole iteration, and the shares of all layers plus the time outside them
add up to exactly 1, so the scaled times add up to the clean forward.

Which clean forward: the timing pass's forward p50, the one the report states for the forward
stage, so that the layers add up to it. The shares are taken per iteration and are free of scale:
no ratio between two processes enters them, and the factor between the timing pass's forward and
the time pass's (noise of 10-20% between two processes on a shared VM, more under a load spike) is
not a cost and is not presented as one. The time pass's cost is its own paired figure
(paired_cost: clean iterations interleaved with its measured ones in the same process), stated
beside the times. Without a timing pass the clean forward is the time pass's own: its forward p50
/ its paired cost. Scaling the layers by the paired cost instead, i.e. to the time pass's own clean
forward, was considered and rejected: under a load spike during that pass (a 43 ms forward ran
at 1.1 s in the layers pass here) the layers then add up to a forward the report shows nowhere.
The hooks' cost is spread over the layers in proportion to their time, not by each layer's own
share of it (a layer of many tiny ops carries more of it): the report says "scaled".

Roofline. The compute roof is the measured peak, raised to the run's best layer rate where a layer ran
faster than it (roofline.raise_to_best: a roof the run exceeds is wrong). FLOPs and minimum bytes come
from the flops collector; achieved GFLOP/s and GB/s use
the scaled time including nested layers (FLOPs are counted per module, nested ones included); the
bound is the side of the ridge point the layer's intensity lies on (roofline.py). Where the
counters measured memory traffic (LLC misses x line), the measured intensity gives a second bound.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hwprof.analysis.availability import Missing, collector_missing
from hwprof.analysis.layers.sources import load_frames, load_kernels, load_native
from hwprof.analysis.layers.stats import (
    COUNTER_COLLECTORS,
    COUNTER_METRICS,
    LayerReport,
    LayerStat,
)
from hwprof.analysis.layers.times import TimeScale, time_note, time_scale
from hwprof.analysis.roofline import (
    RoofStatus,
    achieved_gbps,
    achieved_gflops,
    intensity,
    raise_to_best,
    roof_from_run,
)
from hwprof.schema.summaries_cpu import RAPL_ENERGY_COLUMN, RaplSummary
from hwprof.schema.summaries_tools import PerfSamplingSummary

if TYPE_CHECKING:
    from hwprof.analysis.layers.rows import LayerRow
    from hwprof.analysis.layers.sources import Frame, Kernel, NativeView
    from hwprof.rundir.reader import RunData


def _descendants(names: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for name in names:
        parts = name.split(".")
        for i in range(2, len(parts)):
            out[".".join(parts[:i])].append(name)
    return out


def _counter(row: LayerRow, metric: str) -> float | None:
    for collector in COUNTER_COLLECTORS:
        value = row.metrics.get(f"{collector}.{metric}")
        if value is not None:
            return float(value)
    return None


def gpu_run_roof(device: str, ncu_ran: bool) -> RoofStatus:
    """No CPU roofline for a forward that ran on a GPU: neither the host's peaks nor the host-side
    layer times say anything about the device (the GPU roofline per layer is Nsight Compute's)."""
    reason = (
        f"the forward ran on {device}: the host CPU's peaks do not bound it, and layer times there are host "
        "(launch) times; the GPU roofline per layer comes from Nsight Compute"
    )
    if ncu_ran:
        return RoofStatus(None, f"{reason}: see 'GPU roofline per layer'")
    return RoofStatus(None, reason, f"hwprof collect --device {device} --counters ncu")


def time_missing(data: RunData, source: str | None) -> Missing:
    """Why there are no per-layer times: the pass that should have given them is unusable, its markers
    stop before a whole measured iteration (a torn file), or no pass with layer markers ran."""
    fix = (
        "hwprof collect without --only, or with a collector of the layers pass in it (--only ...,flops): the "
        "layers pass records layer markers"
    )
    if source is not None:
        torn = [w for w in data.warnings if f"passes/{source}/markers.jsonl" in w]
        why = f"; {torn[0]}" if torn else ""
        return Missing(f"the {source} pass's markers.jsonl holds no complete measured iteration{why}", fix)
    reasons = [r for p in ("layers", "trace") if (r := data.pass_missing(p)) and p in data.missing_passes]
    if not reasons and (r := data.pass_missing("layers")):
        reasons = [r]
    if reasons:
        return Missing("; ".join(reasons), fix)
    ran = [p for p in ("layers", "trace") if p in data.pass_names]
    if ran:
        torn = [w for w in data.warnings if any(f"passes/{p}/markers.jsonl" in w for p in ran)]
        why = f"; {torn[0]}" if torn else ""
        return Missing(f"the {' and '.join(ran)} pass recorded no layer markers{why}", fix)
    return Missing("no pass recorded layer markers (the layers and trace passes did not run)", fix)


METHODS = {
    "share": "scaled self time / forward p50 of the clean timing pass",
    "gflops_s": "FLOPs (nested layers included) / scaled time including nested layers",
    "gbps": "minimum bytes (input + output activations + weights) / the same time",
    "pct_peak": "achieved GFLOP/s / the run's compute roof: the measured peak GFLOP/s (hwprof.hardware.machine), "
    "or the run's own best layer rate where a layer ran faster than it",
    "pct_roof": "achieved GFLOP/s / min(peak GFLOP/s, intensity x peak GB/s)",
    "bound": "intensity from minimum bytes vs the ridge point (peak GFLOP/s / peak GB/s)",
    "bound_measured": "intensity from measured traffic (LLC misses x line size) vs the ridge point",
    "energy_j": "RAPL energy of the layer span in the layers pass (not scaled; whole socket)",
}
"""How each per-layer column is derived (the time column's note depends on the run: time_note)."""


@dataclass
class LayerSources:
    """The per-layer data joined into each row besides the layer table: kernels, frames, native samples."""

    kernels: dict[str, list[Kernel]] | None
    frames: dict[str, tuple[list[Frame], dict[str, float]]] | None
    native: NativeView | None


def layer_stat(
    r: LayerRow, depth: int, ts: TimeScale, nested: list[str], on_gpu: bool, sources: LayerSources
) -> LayerStat:
    """One layer's row: the layer table's columns, its scaled time, achieved rates, counters and joins."""
    name = r.name
    stat = LayerStat(
        index=r.index,
        name=name,
        type=r.type,
        depth=depth,
        params=r.params,
        out_shape=r.out_shape,
        from_edges=r.from_edges,
        in_bytes=r.in_bytes,
        out_bytes=r.out_bytes,
        weight_bytes=r.weight_bytes or 0,
    )
    if "flops" in r.metrics:
        stat.flops = float(r.metrics["flops"])
        stat.min_bytes = float(
            r.metrics.get("min_bytes") or ((stat.in_bytes or 0) + (stat.out_bytes or 0) + stat.weight_bytes)
        )
        stat.intensity = intensity(stat.flops, stat.min_bytes)
    self_ns = ts.times.self_ns
    runs = {i: self_ns[i][name] for i in ts.its if name in self_ns[i]}
    if runs and ts.forward_ms:
        stat.time_raw_ms = statistics.median(runs.values()) / 1e6
        stat.share = ts.mean_share(runs)
        stat.time_ms = stat.share * ts.forward_ms
        incl = {i: sum(self_ns[i].get(n, 0) for n in [name, *nested]) for i in ts.its}
        stat.time_incl_ms = ts.mean_share(incl) * ts.forward_ms
    rate_fwd = ts.rate_forward_ms
    scaled = stat.time_incl_ms if stat.time_incl_ms and ts.forward_ms and rate_fwd and not on_gpu else None
    if scaled and rate_fwd and ts.forward_ms:
        seconds = (scaled if rate_fwd == ts.forward_ms else scaled * rate_fwd / ts.forward_ms) / 1e3
    else:
        seconds = None
    stat.gflops_s = achieved_gflops(stat.flops, seconds)
    stat.gbps = achieved_gbps(stat.min_bytes, seconds)
    for attr, metric in COUNTER_METRICS.items():
        setattr(stat, attr, _counter(r, metric))
    if stat.measured_bytes:
        stat.measured_intensity = intensity(stat.flops, stat.measured_bytes)
    energy = r.metrics.get(RAPL_ENERGY_COLUMN)
    stat.energy_j = float(energy) if energy is not None else None
    if sources.kernels is not None:
        stat.kernels = sources.kernels.get(name, [])
    if sources.frames is not None and name in sources.frames:
        stat.frames, stat.frame_shares = sources.frames[name]
    if sources.native is not None:
        stat.native = sources.native.layers.get(name)
    return stat


def unscaled_rates(layers: list[LayerStat], nested: Mapping[str, list[str]]) -> dict[str, float]:
    """Each layer without nested layers: FLOPs / its own median time in its pass, before scaling."""
    out: dict[str, float] = {}
    for s in layers:
        rate = achieved_gflops(s.flops, s.time_raw_ms / 1e3) if s.time_raw_ms and not nested.get(s.name) else None
        if rate is not None:
            out[f"{s.name} {s.type}"] = rate
    return out


def place_on_roof(stat: LayerStat, roof: RoofStatus) -> None:
    """The layer's bound (from minimum and measured bytes) and its share of the peak and of its roof."""
    if roof.roof is None:
        return
    if stat.intensity is not None:
        stat.bound = roof.roof.bound(stat.intensity)
        stat.attainable_gflops = roof.roof.attainable_gflops(stat.intensity)
    if stat.measured_intensity is not None:
        stat.bound_measured = roof.roof.bound(stat.measured_intensity)
    if stat.gflops_s is not None:
        stat.pct_peak = 100 * stat.gflops_s / roof.roof.peak_gflops
        if stat.attainable_gflops:
            stat.pct_roof = 100 * stat.gflops_s / stat.attainable_gflops


def energy_missing(data: RunData, gone: Mapping[str, str]) -> Missing:
    """Why no layer has an energy figure: rapl's own note when it withheld them, else the collector's state."""
    layer_note = data.summary(RaplSummary).per_layer if data.entry("rapl").status == "ok" else None
    if layer_note is not None and layer_note.reason:
        needed = layer_note.iterations_needed_median
        return Missing(
            f"rapl: {layer_note.reason}",
            f"collect with more iterations (median need {needed})" if needed else "",
        )
    return collector_missing(data.doc, ["rapl"], "per-layer energy", passes=gone)


def missing_reasons(
    data: RunData, layers: list[LayerStat], roof: RoofStatus, sources: LayerSources
) -> dict[str, Missing]:
    """Column group -> why no layer has it (the collector's reason and fix), for each group that is empty."""
    run, gone = data.doc, data.missing_passes
    missing: dict[str, Missing] = {}
    if not any(s.flops is not None for s in layers):
        missing["flops"] = collector_missing(run, ["flops"], "per-layer FLOPs", passes=gone)
    if roof.roof is None:
        missing["roofline"] = Missing(roof.reason, roof.fix)
    misses = ("LLC-load-misses", "cache-misses")
    counter_groups = (
        ("counters", "cpi", "per-layer CPI", ("cycles", "instructions", "PAPI_TOT_CYC", "PAPI_TOT_INS")),
        ("mpki", "llc_mpki", "per-layer cache misses", (*misses, "instructions", "PAPI_L3_TCM", "PAPI_TOT_INS")),
        ("traffic", "measured_bytes", "measured memory traffic", (*misses, "PAPI_L3_TCM")),
    )
    for key, attr, what, events in counter_groups:
        if not any(getattr(s, attr) is not None for s in layers):
            missing[key] = collector_missing(run, COUNTER_COLLECTORS, what, events=events, passes=gone)
    if not any(s.energy_j is not None for s in layers):
        missing["energy"] = energy_missing(data, gone)
    if sources.kernels is None:
        missing["kernels"] = collector_missing(run, ["torch_profiler"], "per-layer kernels", passes=gone)
    native = sources.native
    if native is None:
        missing["native"] = collector_missing(
            run, ["perf_sampling"], "native kernels per layer on every thread", passes=gone
        )
    elif native.forward.cpi is None:
        cpi = data.summary(PerfSamplingSummary).cpi_per_kernel
        missing["native_cpi"] = Missing(
            (cpi.reason if cpi else None)
            or f"perf sampled on {native.sampling_event}, with no cycles/instructions group",
            (cpi.fix if cpi and cpi.fix is not None else ""),
        )
    if sources.frames is None:
        missing["frames"] = collector_missing(run, ["pyspy"], "per-layer native frames", passes=gone)
    elif not any(s.frames for s in layers):
        missing["frames"] = Missing(
            "py-spy samples Python stacks only by default (native unwinding pauses every thread per sample); "
            "the kernels section names native code on every thread",
            "collect with --pyspy-native for py-spy's native frames on the main thread",
        )
    return missing


def build_layer_report(data: RunData) -> LayerReport:
    """The per-layer table: times scaled to the clean forward, rates, roofline, counters, energy and joins,
    with why each empty column group is empty and how each column was derived."""
    from hwprof.analysis.layers.rows import BASE_COLUMNS, layer_rows

    device = data.doc.device
    on_gpu = device != "cpu"
    roof = gpu_run_roof(device, "ncu" in data.doc.passes) if on_gpu else roof_from_run(data.doc.peaks)
    rows = layer_rows(data) if data.model_file else []
    missing: dict[str, Missing] = {}
    if not rows:
        missing["layers"] = Missing("no pass wrote a layer table (model.json)", "collect again")
    ts = time_scale(data)
    if ts.source is None or not ts.its:
        missing["time"] = time_missing(data, ts.source)
    note = time_note(data, ts, device)
    nested = _descendants([r.name for r in rows])
    sources = LayerSources(load_kernels(data), load_frames(data), load_native(data))
    base = set(BASE_COLUMNS) | {"out_shape", "time_ms", "min_bytes", "intensity"}
    depth_of = {layer.name: layer.depth for layer in data.model_file.layers}
    layers: list[LayerStat] = []
    for r in rows:
        stat = layer_stat(r, depth_of.get(r.name, r.name.count(".")), ts, nested.get(r.name, []), on_gpu, sources)
        stat.metrics = {k: v for k, v in r.metrics.items() if k not in base and isinstance(v, int | float)}
        layers.append(stat)
    rates = {f"{s.name} {s.type}": s.gflops_s for s in layers if s.gflops_s is not None}
    roof = raise_to_best(roof, rates, unscaled_rates(layers, nested))
    for stat in layers:
        place_on_roof(stat, roof)
    missing.update(missing_reasons(data, layers, roof, sources))
    methods = {"time_ms": note, **METHODS}
    its, forward_ms = ts.its, ts.forward_ms
    outside = ts.mean_share(ts.times.outside_ns) * forward_ms if (its and forward_ms and ts.times.outside_ns) else None
    return LayerReport(
        layers,
        roof,
        ts.source,
        len(its),
        ts.scale,
        note,
        forward_ms,
        ts.source_fwd,
        outside,
        missing,
        methods,
        sources.native,
        scale_paired=ts.scale_paired,
        process_ratio=ts.process_ratio,
        pass_ratio=ts.source_fwd / ts.timing_fwd if (ts.source_fwd and ts.timing_fwd) else None,
    )
