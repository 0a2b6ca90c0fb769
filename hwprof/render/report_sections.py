"""The report's tables: pipeline stages, top layers, rankings, layer types, roofline (overheads: overhead_section.py).

Each is a TableSpec built from the Analysis only (renderers in tables.py draw it for Rich or
Markdown). A figure that was not measured is never shown as 0: its column is left out and a
note under the table says "unavailable: <reason>".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwprof.analysis.roofline import PROBE_LABELS
from hwprof.render.fmt import ms, num, pct, si_bytes, sig
from hwprof.render.tables import MISSING, Col, TableSpec

if TYPE_CHECKING:
    from hwprof.analysis.layer_stats import LayerStat
    from hwprof.analysis.run_analysis import Analysis


def stages_spec(a: Analysis) -> TableSpec | None:
    st = a.stages
    if not st.rows:
        return TableSpec("pipeline stages", [], [], [f"no stage timings in run.json (run {a.run.get('status')})"])
    energy = any(r.energy_j is not None for r in st.rows)
    rss = any(r.rss_peak_bytes is not None for r in st.rows)
    busy = any(r.cores_busy is not None for r in st.rows)
    cols = [
        Col("stage", "left"),
        Col("p50 ms"),
        Col("p90 ms"),
        Col("p99 ms"),
        Col("mean ms", priority=3),
        Col("stdev", priority=2),
        Col("n", priority=4),
        Col("share"),
        Col("FPS", priority=1),
    ]
    if energy:
        cols.append(Col("J/image"))
    if rss:
        cols.append(Col("RSS MB", priority=5))
    if busy:
        cols.append(Col("cores", priority=5))
    rows = []
    for r in st.rows:
        row = [
            r.name,
            ms(r.p50_ms),
            ms(r.p90_ms),
            ms(r.p99_ms),
            ms(r.mean_ms),
            ms(r.stdev_ms),
            str(r.n),
            pct(r.share) if r.name != "iteration" else "",
            num(r.fps, 2),
        ]
        if energy:
            row.append(sig(r.energy_j_per_image))
        if rss:
            row.append(num(r.rss_peak_bytes / 1e6, 0) if r.rss_peak_bytes is not None else MISSING)
        if busy:
            row.append(num(r.cores_busy))
        rows.append(row)
    notes = [f"{st.disturbed}: these stage times are not clean"] if st.disturbed else []
    if st.fps:
        notes.append(
            f"{st.fps:.2f} images/s end to end (batch {st.batch} / iteration p50); FPS per stage = batch / "
            "stage p50; share = stage p50 / iteration p50"
        )
    if st.j_per_image is not None:
        watts = f", {st.avg_w:.1f} W average" if st.avg_w else ""
        notes.append(f"energy {st.j_per_image:.3f} J per image{watts} (RAPL, whole socket)")
    elif st.energy_missing is not None:
        notes.append(f"energy: {st.energy_missing.short()}")
    if rss or busy:
        peak = f"; process peak RSS {st.peak_rss_bytes / 1e6:.0f} MB" if st.peak_rss_bytes else ""
        notes.append(
            f"RSS MB = peak resident memory in the stage, cores = CPU time / wall time (sysstat, layers pass){peak}"
        )
    elif st.process_missing is not None:
        notes.append(f"memory and CPU use: {st.process_missing.short()}")
    return TableSpec(f"pipeline stages ({st.source} pass)", cols, rows, notes)


def _kernel_text(layer: LayerStat) -> str:
    if not layer.kernels:
        return MISSING
    k = layer.kernels[0]
    label = f" [{k.label}]" if k.label else ""
    return f"{k.name.removeprefix('aten::')}{label} {100 * k.share:.0f}%"


def layers_spec(a: Analysis, top: int) -> TableSpec | None:
    rep = a.layers
    if not rep.layers:
        return None
    rows_src = rep.top(top)
    by_time = bool(rows_src)
    if not by_time:
        rows_src = rep.top(top, "flops")
    roof = rep.roof.roof is not None
    counters = rep.has("cpi")
    mpki = rep.has("llc_mpki")
    cpus = rep.has("cpus")
    energy = rep.has("energy_j")
    kernels = any(r.kernels for r in rep.layers)
    measured = rep.has("bound_measured")
    cols = [Col("#"), Col("type", "left", max_width=14)]
    if by_time:
        cols += [Col("ms"), Col("share"), Col("cum", priority=6)]
    cols += [Col("GFLOPs", priority=7)]
    if by_time:
        cols += [Col("GFLOP/s", priority=3)]
        if roof:
            cols += [Col("% peak")]
    cols += [Col("AI", priority=4)]
    if roof:
        cols += [Col("bound")]
        if measured:
            cols += [Col("bound (meas.)", priority=2)]
    if counters:
        cols += [Col("CPI"), Col("IPC", priority=5)]
    if mpki:
        cols += [Col("LLC MPKI", priority=4)]
    if cpus:
        cols += [Col("CPUs", priority=6)]
    if energy:
        cols += [Col("mJ", priority=3)]
    if kernels:
        cols += [Col("top kernel", "left", priority=8, max_width=30)]
    cols += [Col("out shape", "left", priority=9, max_width=16)]
    rows = []
    cum = 0.0
    for r in rows_src:
        row = [str(r.index), r.type]
        if by_time:
            cum += r.share or 0.0
            row += [ms(r.time_ms), pct(r.share), pct(cum)]
        row += [sig(r.flops / 1e9 if r.flops is not None else None)]
        if by_time:
            row += [sig(r.gflops_s)]
            if roof:
                row += [num(r.pct_peak, 1)]
        row += [sig(r.intensity)]
        if roof:
            row += [r.bound or MISSING]
            if measured:
                row += [r.bound_measured or MISSING]
        if counters:
            row += [num(r.cpi), num(r.ipc)]
        if mpki:
            row += [num(r.llc_mpki)]
        if cpus:
            row += [num(r.cpus)]
        if energy:
            row += [sig(r.energy_j * 1e3 if r.energy_j is not None else None)]
        if kernels:
            row += [_kernel_text(r)]
        row += [r.out_shape]
        rows.append(row)
    notes = []
    if by_time:
        notes.append(rep.time_note)
        if rep.outside_ms is not None and rep.forward_ms:
            notes.append(
                f"outside every layer: {ms(rep.outside_ms)} ms ({pct(rep.outside_ms / rep.forward_ms)} of forward)"
            )
    else:
        notes.append(f"per-layer time: {rep.missing['time'].short()}")
    notes.append("AI = FLOPs / minimum bytes (activations in + out + weights): an upper bound on the real intensity")
    simulated = a.run.get("collectors", {}).get("callgrind", {})
    if simulated.get("status") in ("ok", "partial"):
        notes.append(
            "instructions, MPKI and branch figures that perf could not count here are simulated (callgrind, "
            "AVX2 code path: valgrind hides AVX-512); callgrind simulates no cycles, so no CPI from it"
        )
    for key, label in (
        ("roofline", "roofline (% peak, bound)"),
        ("counters", "CPI / IPC"),
        ("mpki", "LLC MPKI"),
        ("energy", "energy"),
        ("kernels", "top kernels"),
    ):
        if key in rep.missing:
            notes.append(f"{label}: {rep.missing[key].short()}")
    if not rows:  # neither times nor FLOPs: no ranking to show, only why (never "top 0 layers")
        return TableSpec("layers", [], [], notes)
    title = (
        f"top {len(rows)} layers by time (of {len(rep.layers)})"
        if by_time
        else f"top {len(rows)} layers by FLOPs (no per-layer time)"
    )
    return TableSpec(title, cols, rows, notes)


RANK_ROWS = 5
RANK_MIN_SHARE = 0.02


def rankings_spec(a: Analysis) -> TableSpec | None:
    """The layers that matter (>= 2% of forward) ranked by roofline position, CPI and cache misses."""
    rep = a.layers
    big = [r for r in rep.top_level if (r.share or 0.0) >= RANK_MIN_SHARE]
    if not big:
        return None

    def ranked(key: str, reverse: bool, fmt: str, suffix: str = "") -> list[str]:
        rows = sorted((r for r in big if getattr(r, key) is not None), key=lambda r: getattr(r, key), reverse=reverse)
        return [f"{r.index} {r.type} {getattr(r, key):{fmt}}{suffix}" for r in rows[:RANK_ROWS]]

    columns: list[tuple[str, list[str]]] = []
    notes = [f"top-level layers with at least {100 * RANK_MIN_SHARE:.0f}% of forward ({len(big)})"]
    if rep.roof.roof is not None:
        columns.append(("lowest % of roof", ranked("pct_roof", False, ".1f", "%")))
    if rep.has("cpi"):
        columns.append(("highest CPI", ranked("cpi", True, ".2f")))
    else:
        notes.append(f"CPI ranking: {rep.missing['counters'].short()}")
    if rep.has("llc_mpki"):
        columns.append(("highest LLC MPKI", ranked("llc_mpki", True, ".2f")))
    if rep.has("cpus"):
        columns.append(("fewest CPUs busy", ranked("cpus", False, ".2f")))
    if not columns:
        return None
    depth = max(len(values) for _, values in columns)
    cols = [Col("#")] + [Col(title, "left", max_width=26) for title, _ in columns]
    rows = [[str(i + 1)] + [values[i] if i < len(values) else "" for _, values in columns] for i in range(depth)]
    return TableSpec("layers ranked", cols, rows, notes)


def types_spec(a: Analysis) -> TableSpec | None:
    if not a.types:
        return None
    roof = a.layers.roof.roof is not None
    timed = any(t.time_ms is not None for t in a.types)
    cpi = any(t.cpi is not None for t in a.types)
    energy = any(t.energy_j is not None for t in a.types)
    cols = [Col("type", "left", max_width=16), Col("n")]
    if timed:
        cols += [Col("ms"), Col("share")]
    cols += [Col("params", priority=3), Col("GFLOPs", priority=2)]
    if timed:
        cols += [Col("GFLOP/s")]
    cols += [Col("AI", priority=1)]
    if roof:
        cols += [Col("bound")]
        if timed:
            cols += [Col("% peak", priority=2)]
    if cpi:
        cols += [Col("CPI")]
    if energy:
        cols += [Col("mJ")]
    rows = []
    for t in a.types:
        row = [t.type, str(t.count)]
        if timed:
            row += [ms(t.time_ms), pct(t.share)]
        row += [MISSING if t.params is None else f"{t.params:,}", sig(t.flops / 1e9 if t.flops is not None else None)]
        if timed:
            row += [sig(t.gflops_s)]
        row += [sig(t.intensity)]
        if roof:
            row += [t.bound or MISSING]
            if timed:
                row += [num(t.pct_peak, 1)]
        if cpi:
            row += [num(t.cpi)]
        if energy:
            row += [sig(t.energy_j * 1e3 if t.energy_j is not None else None)]
        rows.append(row)
    notes = [
        "top-level layers; time includes nested layers; CPI = cycles / instructions summed over the type"
        if cpi
        else "top-level layers; time includes nested layers"
    ]
    return TableSpec("layer types", cols, rows, notes)


def roofline_spec(a: Analysis) -> TableSpec:
    s = a.roofline
    if s is None:
        return TableSpec("roofline", [], [], [f"roofline: {a.layers.missing['roofline'].text()}"])
    cols = [Col("", "left"), Col("value", "left")]
    rows = [
        [
            "peak compute",
            f"{s.peak_gflops:.1f} GFLOP/s (measured: {PROBE_LABELS.get(s.compute_probe, s.compute_probe)})",
        ],
        ["peak bandwidth", f"{s.peak_gbps:.2f} GB/s (measured: STREAM-like triad)"],
        ["ridge point", f"{s.ridge:.1f} FLOP/B"],
    ]
    if s.flops is not None:
        rows.append(["forward FLOPs", f"{sig(s.flops / 1e9)} GFLOPs"])
    if s.min_bytes:
        rows.append(["forward minimum bytes", si_bytes(s.min_bytes)])
    if s.intensity is not None:
        rows.append(["forward intensity", f"{sig(s.intensity)} FLOP/B -> {s.bound or MISSING}-bound"])
    if s.gflops_s is not None:
        rows.append(["forward achieved", f"{sig(s.gflops_s)} GFLOP/s = {num(s.pct_peak, 1)}% of peak"])
    for bound, entry in s.layers_by_bound.items():
        share = entry["share"]
        rows.append(
            [
                f"{bound}-bound layers",
                f"{int(entry['layers'] or 0)}" + (f", {pct(share)} of forward" if share is not None else ""),
            ]
        )
    notes = [f"{what}: {s.unavailable[key]}" for key, what in _ROOF_NEEDS.items() if key in s.unavailable]
    if s.measured_intensity is not None:
        rows.append(
            [
                "measured traffic",
                f"{si_bytes(s.measured_bytes)} -> {sig(s.measured_intensity)} FLOP/B, {s.bound_measured}-bound",
            ]
        )
    elif "traffic" in a.layers.missing:
        notes.append(f"measured traffic: {a.layers.missing['traffic'].short()}")
    notes.append(
        "bound by minimum bytes: 'memory' is certain; 'compute' is an upper bound on intensity "
        "(real traffic can only be larger)"
    )
    roof = a.layers.roof.roof
    if roof is not None:
        notes.append(f"peak methods: {roof.gflops_method}; {roof.gbps_method}")
    return TableSpec("roofline", cols, rows, notes)


_ROOF_NEEDS = {
    "flops": "forward FLOPs, minimum bytes, intensity, achieved GFLOP/s, memory-/compute-bound layers",
    "time": "forward achieved GFLOP/s and the bound layers' share of forward",
}
"""What the roofline table cannot show without FLOPs (the flops collector) or layer times (the layers pass)."""
