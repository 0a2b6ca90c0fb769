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

Roofline. FLOPs and minimum bytes come from the flops collector; achieved GFLOP/s and GB/s use
the scaled time including nested layers (FLOPs are counted per module, nested ones included); the
bound is the side of the ridge point the layer's intensity lies on (roofline.py). Where the
counters measured memory traffic (LLC misses x line), the measured intensity gives a second bound.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hwprof.analysis.availability import Missing, collector_missing
from hwprof.analysis.layer_sources import load_frames, load_kernels, load_native
from hwprof.analysis.layer_stats import (
    COUNTER_COLLECTORS,
    COUNTER_METRICS,
    LayerReport,
    LayerStat,
    iteration_times,
    time_pass,
)
from hwprof.analysis.neighbours import cost_text, pass_load, timing_disturbance
from hwprof.analysis.paired_cost import paired_cost
from hwprof.analysis.roofline import (
    RoofStatus,
    achieved_gbps,
    achieved_gflops,
    intensity,
    roof_from_run,
)
from hwprof.core.spans import clean_forward_ms_by_iteration, forward_ms_by_iteration, forward_p50, measured_spans

if TYPE_CHECKING:
    from hwprof.rundir.reader import RunData


def _descendants(names: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for name in names:
        parts = name.split(".")
        for i in range(2, len(parts)):
            out[".".join(parts[:i])].append(name)
    return out


def _counter(row: dict[str, Any], metric: str) -> float | None:
    for collector in COUNTER_COLLECTORS:
        value = row.get(f"{collector}.{metric}")
        if value is not None:
            return float(value)
    return None


HOST_TIME_ON_GPU = (
    "on {device} a layer's time is host time: the layer hooks do not synchronise, so it is the time "
    "spent launching the layer's kernels (and waiting wherever the host synchronises); the GPU's own "
    "time per layer is in 'layers by GPU time'"
)


def run_device(run: dict[str, Any]) -> str:
    """cpu or cuda[:N]: where the run's forward ran (runs recorded before --device: cpu)."""
    return str(run.get("config", {}).get("device") or "cpu")


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
    fix = "hwprof collect without --only timing (the layers pass records layer markers)"
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


def build_layer_report(data: RunData) -> LayerReport:
    from hwprof.analysis.layers import BASE_COLUMNS, layer_rows

    run = data.run
    device = run_device(run)
    on_gpu = device != "cpu"
    roof = gpu_run_roof(device, "ncu" in run.get("passes", {})) if on_gpu else roof_from_run(run)
    missing: dict[str, Missing] = {}
    methods: dict[str, str] = {}
    gone = data.missing_passes
    rows = layer_rows(data) if data.model_info else []
    if not rows:
        missing["layers"] = Missing("no pass wrote a layer table (model.json)", "collect again")

    source, spans = time_pass(data)
    times = iteration_times(spans)
    its = times.iterations
    source_fwd = forward_p50(spans) if source is not None else None
    if source is None or not its:
        missing["time"] = time_missing(data, source)
    timing_fwd = None
    paired = None
    if source is not None and source != "timing":
        markers = data.markers(source)
        paired = paired_cost(forward_ms_by_iteration(markers), clean_forward_ms_by_iteration(markers))
        if "timing" in data.pass_names:
            timing_fwd = forward_p50(measured_spans(data.markers("timing")))
    scale = timing_fwd / source_fwd if (timing_fwd and source_fwd) else None
    forward_ms = timing_fwd if timing_fwd else source_fwd
    if not timing_fwd and paired is not None and source_fwd:
        scale = 1 / paired.ratio
        forward_ms = source_fwd * scale
    cost = (
        f"the {source} pass's own cost, paired in it: {cost_text(paired, pass_load(data.run, source))} (median of "
        f"{paired.blocks} ABBA blocks of clean and measured iterations in one process)"
        if paired is not None and source is not None
        else f"the {source} pass ran no clean iterations: its cost is a pass-level estimate"
    )
    if not its:
        note = "no per-layer times"
    elif timing_fwd:
        disturbed = timing_disturbance(data.run)
        note = (
            f"layer time = its mean share of forward over {len(its)} iterations of the {source} pass "
            f"(self time / that iteration's forward) x the forward the report states, the "
            f"{'disturbed' if disturbed else 'clean'} timing pass's p50 {timing_fwd:.2f} ms (scaled x{scale:.3f} "
            f"from the {source} pass's {source_fwd:.2f} ms: the shares are scale-free, so this factor is the two "
            f"processes' difference, not a cost); {cost}; the hooks' cost is spread over the layers in proportion "
            "to their time"
        )
        if disturbed:
            note = f"{disturbed.upper()[:1]}{disturbed[1:]}: every layer time below is scaled to its p50. {note}"
    elif paired is not None and source_fwd:
        note = (
            f"layer time = its mean share of forward over {len(its)} iterations of the {source} pass "
            f"(self time / that iteration's forward) x that pass's clean forward {forward_ms:.2f} ms (no timing "
            f"pass): its forward p50 {source_fwd:.2f} ms / the median of its blocks' ratios {paired.ratio:.3f}; "
            f"{cost}; the hooks' cost is spread over the layers in proportion to their time"
        )
    else:
        note = (
            f"layer time = its mean share of forward over {len(its)} iterations of the {source} pass x "
            f"that pass's forward p50 {source_fwd:.2f} ms: NOT scaled (no clean timing pass), the hooks' "
            "overhead is included"
        )
    if on_gpu and its:
        note = f"{HOST_TIME_ON_GPU.format(device=device)}; {note}"
    methods["time_ms"] = note

    def mean_share(values: Mapping[int, float]) -> float:
        return statistics.fmean(values.get(i, 0.0) / times.forward_ns[i] for i in its)

    names = [str(r["name"]) for r in rows]
    nested = _descendants(names)
    kernels = load_kernels(data)
    frames = load_frames(data)
    native = load_native(data)
    layers: list[LayerStat] = []
    base = set(BASE_COLUMNS) | {"out_shape", "time_ms", "min_bytes", "intensity"}
    depth_of = {layer["name"]: int(layer.get("depth", 1)) for layer in data.model_info.get("layers", [])}
    for r in rows:
        name = str(r["name"])
        stat = LayerStat(
            index=int(r["index"]),
            name=name,
            type=str(r["type"]),
            depth=depth_of.get(name, name.count(".")),
            params=None if r["params"] is None else int(r["params"]),
            out_shape=str(r.get("out_shape", "")),
            from_edges=str(r.get("from", "")),
            in_bytes=int(r.get("in_bytes") or 0),
            out_bytes=int(r.get("out_bytes") or 0),
            weight_bytes=int(r.get("weight_bytes") or 0),
        )
        if "flops" in r:
            stat.flops = float(r["flops"])
            stat.min_bytes = float(r.get("min_bytes") or (r["in_bytes"] + r["out_bytes"] + r["weight_bytes"]))
            stat.intensity = intensity(stat.flops, stat.min_bytes)
        runs = {i: times.self_ns[i][name] for i in its if name in times.self_ns[i]}
        if runs and forward_ms:
            stat.time_raw_ms = statistics.median(runs.values()) / 1e6
            stat.share = mean_share(runs)
            stat.time_ms = stat.share * forward_ms
            incl = {i: sum(times.self_ns[i].get(n, 0) for n in [name, *nested.get(name, [])]) for i in its}
            stat.time_incl_ms = mean_share(incl) * forward_ms
        seconds = stat.time_incl_ms / 1e3 if stat.time_incl_ms and not on_gpu else None
        stat.gflops_s = achieved_gflops(stat.flops, seconds)
        stat.gbps = achieved_gbps(stat.min_bytes, seconds)
        for attr, metric in COUNTER_METRICS.items():
            setattr(stat, attr, _counter(r, metric))
        if stat.measured_bytes:
            stat.measured_intensity = intensity(stat.flops, stat.measured_bytes)
        if roof.roof is not None:
            if stat.intensity is not None:
                stat.bound = roof.roof.bound(stat.intensity)
                stat.attainable_gflops = roof.roof.attainable_gflops(stat.intensity)
            if stat.measured_intensity is not None:
                stat.bound_measured = roof.roof.bound(stat.measured_intensity)
            if stat.gflops_s is not None:
                stat.pct_peak = 100 * stat.gflops_s / roof.roof.peak_gflops
                if stat.attainable_gflops:
                    stat.pct_roof = 100 * stat.gflops_s / stat.attainable_gflops
        energy = r.get("rapl.energy_J")
        stat.energy_j = float(energy) if energy is not None else None
        if kernels is not None:
            stat.kernels = kernels.get(name, [])
        if frames is not None and name in frames:
            stat.frames, stat.frame_shares = frames[name]
        if native is not None:
            stat.native = native.layers.get(name)
        stat.metrics = {k: v for k, v in r.items() if k not in base and isinstance(v, int | float)}
        layers.append(stat)

    if not any(s.flops is not None for s in layers):
        missing["flops"] = collector_missing(run, ["flops"], "per-layer FLOPs", passes=gone)
    if roof.roof is None:
        missing["roofline"] = Missing(roof.reason, roof.fix)
    if not any(s.cpi is not None for s in layers):
        missing["counters"] = collector_missing(
            run,
            COUNTER_COLLECTORS,
            "per-layer CPI",
            events=("cycles", "instructions", "PAPI_TOT_CYC", "PAPI_TOT_INS"),
            passes=gone,
        )
    if not any(s.llc_mpki is not None for s in layers):
        missing["mpki"] = collector_missing(
            run,
            COUNTER_COLLECTORS,
            "per-layer cache misses",
            events=("LLC-load-misses", "cache-misses", "instructions", "PAPI_L3_TCM", "PAPI_TOT_INS"),
            passes=gone,
        )
    if not any(s.measured_bytes is not None for s in layers):
        missing["traffic"] = collector_missing(
            run,
            COUNTER_COLLECTORS,
            "measured memory traffic",
            events=("LLC-load-misses", "cache-misses", "PAPI_L3_TCM"),
            passes=gone,
        )
    if not any(s.energy_j is not None for s in layers):
        rapl = run.get("collectors", {}).get("rapl", {})
        layer_note = rapl.get("summary", {}).get("per_layer", {}) if rapl.get("status") == "ok" else {}
        if layer_note.get("reason"):
            missing["energy"] = Missing(
                f"rapl: {layer_note['reason']}",
                f"collect with more iterations (median need {layer_note['iterations_needed_median']})"
                if layer_note.get("iterations_needed_median")
                else "",
            )
        else:
            missing["energy"] = collector_missing(run, ["rapl"], "per-layer energy", passes=gone)
    if kernels is None:
        missing["kernels"] = collector_missing(run, ["torch_profiler"], "per-layer kernels", passes=gone)
    if native is None:
        missing["native"] = collector_missing(
            run, ["perf_sampling"], "native kernels per layer on every thread", passes=gone
        )
    elif native.forward.cpi is None:
        cpi = run.get("collectors", {}).get("perf_sampling", {}).get("summary", {}).get("cpi_per_kernel", {})
        missing["native_cpi"] = Missing(
            cpi.get("reason") or f"perf sampled on {native.sampling_event}, with no cycles/instructions group",
            cpi.get("fix", ""),
        )
    if frames is None:
        missing["frames"] = collector_missing(run, ["pyspy"], "per-layer native frames", passes=gone)
    elif not any(s.frames for s in layers):
        missing["frames"] = Missing(
            "py-spy samples Python stacks only by default (native unwinding pauses every thread per sample); "
            "the kernels section names native code on every thread",
            "collect with --pyspy-native for py-spy's native frames on the main thread",
        )

    methods.update(
        {
            "share": "scaled self time / forward p50 of the clean timing pass",
            "gflops_s": "FLOPs (nested layers included) / scaled time including nested layers",
            "gbps": "minimum bytes (input + output activations + weights) / the same time",
            "pct_peak": "achieved GFLOP/s / measured peak GFLOP/s (hwprof.hardware.machine)",
            "pct_roof": "achieved GFLOP/s / min(peak GFLOP/s, intensity x peak GB/s)",
            "bound": "intensity from minimum bytes vs the ridge point (peak GFLOP/s / peak GB/s)",
            "bound_measured": "intensity from measured traffic (LLC misses x line size) vs the ridge point",
            "energy_j": "RAPL energy of the layer span in the layers pass (not scaled; whole socket)",
        }
    )
    outside = mean_share(times.outside_ns) * forward_ms if (its and forward_ms and times.outside_ns) else None
    return LayerReport(
        layers,
        roof,
        source,
        len(its),
        scale,
        note,
        forward_ms,
        source_fwd,
        outside,
        missing,
        methods,
        native,
        scale_paired=not timing_fwd and paired is not None and source_fwd is not None,
    )
