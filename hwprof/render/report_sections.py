"""The report's tables: pipeline stages, top layers, rankings, layer types, roofline (overheads: overhead_section.py).

Each is a TableSpec built from the Analysis only (renderers in tables.py draw it for Rich or
Markdown). A figure that was not measured is never shown as 0: its column is left out and a
note under the table says "unavailable: <reason>".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hwprof.analysis.layers.memory import ALLOC
from hwprof.analysis.program.facts import GRAD_ON, INFERENCE, TRAINING, program_facts
from hwprof.render.columns import Column, Ranked, build, with_cum
from hwprof.render.fmt import ms, num, pct, si_bytes, sig
from hwprof.render.input_lines import flops_shape_note
from hwprof.render.measured_flops import measured_flops
from hwprof.render.roof_lines import compute_rows, paper_sources
from hwprof.render.tables import MISSING, Brief, Col, TableSpec

if TYPE_CHECKING:
    from hwprof.analysis.layers.stats import LayerReport, LayerStat
    from hwprof.analysis.program.facts import ProgramFacts
    from hwprof.analysis.run_analysis import Analysis
    from hwprof.analysis.stages import StageRow, Stages
    from hwprof.analysis.types import TypeStat


def _stage_energy(st: Stages) -> bool:
    return any(r.energy_j is not None for r in st.rows)


def _stage_rss(st: Stages) -> bool:
    return any(r.rss_peak_bytes is not None for r in st.rows)


def _stage_busy(st: Stages) -> bool:
    return any(r.cores_busy is not None for r in st.rows)


STAGE_COLUMNS: list[Column[Stages, StageRow]] = [
    Column(Col("stage", "left"), lambda r: r.name),
    Column(Col("p50 ms"), lambda r: ms(r.p50_ms)),
    Column(Col("p90 ms"), lambda r: ms(r.p90_ms)),
    Column(Col("p99 ms"), lambda r: ms(r.p99_ms)),
    Column(Col("mean ms", priority=3), lambda r: ms(r.mean_ms)),
    Column(Col("stdev", priority=2), lambda r: ms(r.stdev_ms)),
    Column(Col("n", priority=4), lambda r: str(r.n)),
    Column(Col("share"), lambda r: pct(r.share) if r.name != "iteration" else ""),
    Column(Col("FPS", priority=1), lambda r: num(r.fps, 2)),
    Column(Col("J/image"), lambda r: sig(r.energy_j_per_image), _stage_energy),
    Column(
        Col("RSS MB", priority=5),
        lambda r: num(r.rss_peak_bytes / 1e6, 0) if r.rss_peak_bytes is not None else MISSING,
        _stage_rss,
    ),
    Column(Col("cores", priority=5), lambda r: num(r.cores_busy), _stage_busy),
]


def stages_spec(a: Analysis) -> TableSpec | None:
    st = a.stages
    if not st.rows:
        return TableSpec("pipeline stages", [], [], [f"no stage timings in run.json (run {a.doc.status})"])
    cols, rows = build(STAGE_COLUMNS, st, st.rows)
    notes = [f"{st.disturbed}: these stage times are not clean"] if st.disturbed else []
    timing = a.doc.passes.get("timing")
    if st.source == "timing" and timing is not None and timing.stopping is not None and timing.stopping.text:
        notes.append(f"timing pass: {timing.stopping.text}")
    if st.postprocess_note:
        notes.append(st.postprocess_note)
    if a.workload.stages_note:
        notes.append(a.workload.stages_note)
    if st.fps:
        notes.append(end_to_end_note(st, program_facts(a.doc, st)))
    if st.j_per_image is not None:
        watts = f", {st.avg_w:.1f} W average" if st.avg_w else ""
        notes.append(f"energy {st.j_per_image:.3f} J per image{watts} (RAPL, whole socket)")
    elif st.energy_missing is not None:
        notes.append(f"energy: {st.energy_missing.note()}")
    methods = [STAGE_METHODS] if st.fps else []
    if _stage_rss(st) or _stage_busy(st):
        peak = f"; process peak RSS {st.peak_rss_bytes / 1e6:.0f} MB" if st.peak_rss_bytes else ""
        methods.append(
            f"RSS MB = peak resident memory in the stage, cores = CPU time / wall time (sysstat, layers pass){peak}"
        )
    elif st.process_missing is not None:
        notes.append(f"memory and CPU use: {st.process_missing.note()}")
    return TableSpec(f"pipeline stages ({st.source} pass)", cols, rows, notes, methods=methods)


def end_to_end_note(st: Stages, facts: ProgramFacts | None = None) -> str:
    """The FPS figures and what the end-to-end one includes (seed 004's two columns: inference and end to end); a
    program's forwards with grad on, or with a backward pass after them, are not an inference (`facts`)."""
    inference = f"inference {st.inference_fps:.2f} (forward alone), " if st.inference_fps else ""
    forward = st.get("forward")
    mode = facts.mode if facts is not None else INFERENCE
    step = facts.step_fps(st.batch, forward.p50_ms) if facts is not None and forward is not None else None
    if mode == TRAINING and step:
        inference = f"{TRAINING} {step:.2f} (batch / (forward p50 + backward p50): a training step, not an inference), "
    elif mode == GRAD_ON and st.inference_fps:
        inference = (
            f"{GRAD_ON} {st.inference_fps:.2f} (forward alone; its forwards recorded autograd graphs: slower than "
            "an inference), "
        )
    stages = " + ".join(st.iteration_stages) or "the iteration"
    unwritten = "" if st.writes_frames else "; no frame is written (--annotate OUT adds annotate + encode)"
    return (
        f"FPS: {inference}end to end {st.fps:.2f} (batch {st.batch} / iteration p50; an iteration is {stages}"
        f"{unwritten})"
    )


STAGE_METHODS = "FPS per stage = batch / stage p50; share = stage p50 / iteration p50"


def kernel_text(layer: LayerStat) -> str:
    """A layer's top native kernel with its share of the layer, or "-"."""
    if not layer.kernels:
        return MISSING
    k = layer.kernels[0]
    label = f" [{k.label}]" if k.label else ""
    return f"{k.name.removeprefix('aten::')}{label} {100 * k.share:.0f}%"


@dataclass(frozen=True)
class _LayerTable:
    """What decides the layer table's columns: the report, and whether its rows are ranked by time."""

    rep: LayerReport
    by_time: bool

    @property
    def roof(self) -> bool:
        return self.rep.roof.roof is not None


def _layer_counters(t: _LayerTable) -> bool:
    return t.rep.has("cpi")


def _by_time(t: _LayerTable) -> bool:
    return t.by_time


def _layer_roof(t: _LayerTable) -> bool:
    return t.roof


LAYER_COLUMNS: list[Column[_LayerTable, Ranked[LayerStat]]] = [
    Column(Col("#"), lambda r: str(r.item.index)),
    Column(Col("type", "left", max_width=14), lambda r: r.item.type),
    Column(Col("ms"), lambda r: ms(r.item.time_ms), _by_time),
    Column(Col("share"), lambda r: pct(r.item.share), _by_time),
    Column(Col("cum", priority=6), lambda r: pct(r.cum), _by_time),
    Column(Col("GFLOPs", priority=7), lambda r: sig(r.item.flops / 1e9 if r.item.flops is not None else None)),
    Column(Col("GFLOP/s", priority=3), lambda r: sig(r.item.gflops_s), _by_time),
    Column(Col("% peak"), lambda r: num(r.item.pct_peak, 1), lambda t: t.by_time and t.roof),
    Column(Col("AI", priority=4), lambda r: sig(r.item.intensity)),
    Column(Col("bound"), lambda r: r.item.bound_shown or MISSING, _layer_roof),
    Column(
        Col("bound (meas.)", priority=2),
        lambda r: r.item.bound_measured or MISSING,
        lambda t: t.roof and t.rep.has("bound_measured"),
    ),
    Column(Col("CPI"), lambda r: num(r.item.cpi), _layer_counters),
    Column(Col("IPC", priority=5), lambda r: num(r.item.ipc), _layer_counters),
    Column(Col("LLC MPKI", priority=4), lambda r: num(r.item.llc_mpki), lambda t: t.rep.has("llc_mpki")),
    Column(Col("CPUs", priority=6), lambda r: num(r.item.cpus), lambda t: t.rep.has("cpus")),
    Column(
        Col("alloc MB", priority=5),
        lambda r: sig(r.item.metrics[ALLOC] / 1e6 if ALLOC in r.item.metrics else None),
        lambda t: any(ALLOC in r.metrics for r in t.rep.layers),
    ),
    Column(
        Col("mJ", priority=3),
        lambda r: sig(r.item.energy_j * 1e3 if r.item.energy_j is not None else None),
        lambda t: t.rep.has("energy_j"),
    ),
    Column(
        Col("top kernel", "left", priority=8, max_width=30),
        lambda r: kernel_text(r.item),
        lambda t: any(r.kernels for r in t.rep.layers),
    ),
    Column(Col("out shape", "left", priority=9, max_width=16), lambda r: r.item.out_shape),
]


def layers_spec(a: Analysis, top: int, brief: int | None = None) -> TableSpec | None:
    """The top layers by time (by FLOPs where no time was measured); `brief`: the rows the terminal shows."""
    rep = a.layers
    if not rep.layers:
        return None
    rows_src = rep.top(top)
    by_time = bool(rows_src)
    if not by_time:
        rows_src = rep.top(top, "flops")
    cols, rows = build(LAYER_COLUMNS, _LayerTable(rep, by_time), with_cum(rows_src, lambda r: r.share))
    notes, methods = [], []
    if by_time:
        methods.append(rep.time_note)
        if rep.outside_ms is not None and rep.forward_ms:
            notes.append(
                f"outside every layer: {ms(rep.outside_ms)} ms ({pct(rep.outside_ms / rep.forward_ms)} of forward)"
            )
    else:
        notes.append(f"per-layer time: {rep.missing['time'].note()}")
    if a.layer_shapes is not None:
        notes.append(
            f"the forwards had {len(a.layer_shapes.shapes)} input shapes: times here are medians over all of them; "
            "per shape in the next table"
        )
    methods.append("AI = FLOPs / minimum bytes (activations in + out + weights): an upper bound on the real intensity")
    if a.doc.entry("callgrind").ran:
        methods.append(
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
            notes.append(f"{label}: {rep.missing[key].note()}")
    if not rows:  # neither times nor FLOPs: no ranking to show, only why (never "top 0 layers")
        return TableSpec("layers", [], [], notes)
    title = (
        f"top {len(rows)} layers by time (of {len(rep.layers)})"
        if by_time
        else f"top {len(rows)} layers by FLOPs (no per-layer time)"
    )
    return TableSpec(title, cols, rows, notes, key="layers", methods=methods, brief=Brief(brief) if brief else None)


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
        notes.append(f"CPI ranking: {rep.missing['counters'].note()}")
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


def _types_timed(a: Analysis) -> bool:
    return any(t.time_ms is not None for t in a.types)


def _types_cpi(a: Analysis) -> bool:
    return any(t.cpi is not None for t in a.types)


def _roof(a: Analysis) -> bool:
    return a.layers.roof.roof is not None


TYPE_COLUMNS: list[Column[Analysis, TypeStat]] = [
    Column(Col("type", "left", max_width=16), lambda t: t.type),
    Column(Col("n"), lambda t: str(t.count)),
    Column(Col("ms"), lambda t: ms(t.time_ms), _types_timed),
    Column(Col("share"), lambda t: pct(t.share), _types_timed),
    Column(Col("params", priority=3), lambda t: MISSING if t.params is None else f"{t.params:,}"),
    Column(Col("GFLOPs", priority=2), lambda t: sig(t.flops / 1e9 if t.flops is not None else None)),
    Column(Col("GFLOP/s"), lambda t: sig(t.gflops_s), _types_timed),
    Column(Col("AI", priority=1), lambda t: sig(t.intensity)),
    Column(Col("bound"), lambda t: t.bound or MISSING, _roof),
    Column(Col("% peak", priority=2), lambda t: num(t.pct_peak, 1), lambda a: _roof(a) and _types_timed(a)),
    Column(Col("CPI"), lambda t: num(t.cpi), _types_cpi),
    Column(
        Col("mJ"),
        lambda t: sig(t.energy_j * 1e3 if t.energy_j is not None else None),
        lambda a: any(t.energy_j is not None for t in a.types),
    ),
]


def types_spec(a: Analysis) -> TableSpec | None:
    if not a.types:
        return None
    cols, rows = build(TYPE_COLUMNS, a, a.types)
    methods = [
        "top-level layers; time includes nested layers; CPI = cycles / instructions summed over the type"
        if _types_cpi(a)
        else "top-level layers; time includes nested layers"
    ]
    return TableSpec("layer types", cols, rows, methods=methods)


def roofline_spec(a: Analysis) -> TableSpec:
    s = a.roofline
    if s is None:
        return TableSpec("roofline", [], [], [f"roofline: {a.layers.missing['roofline'].text()}"])
    cols = [Col("", "left"), Col("value", "left", wrap=True)]
    roof = a.layers.roof.roof
    rows = compute_rows(roof) if roof is not None else []
    rows += [
        ["peak bandwidth", f"{s.peak_gbps:.2f} GB/s (measured: STREAM-like triad)"],
        ["ridge point", f"{s.ridge:.1f} FLOP/B"],
    ]
    shape = "x".join(map(str, a.doc.model.input_shape or []))
    mixed = flops_shape_note(a.doc, shape)
    if s.flops is not None:
        rows.append(["forward FLOPs", f"{sig(s.flops / 1e9)} GFLOPs" + (f" at {shape}{mixed}" if mixed else "")])
    if s.min_bytes:
        rows.append(["forward minimum bytes", si_bytes(s.min_bytes)])
    if s.intensity is not None:
        rows.append(["forward intensity", f"{sig(s.intensity)} FLOP/B -> {s.bound or MISSING}-bound"])
    if s.gflops_s is not None:
        rough = " (FLOPs at one input shape over the forward p50 of several: rough)" if mixed else ""
        measured = measured_flops(a.doc)
        if measured is not None and not measured.at_measured:
            rough = f" (FLOPs at {shape}, a shape no measured forward had, over their forward p50: not their rate)"
        of = "of the roof" if roof is not None and roof.raised else "of peak"
        rows.append(["forward achieved", f"{sig(s.gflops_s)} GFLOP/s = {num(s.pct_peak, 1)}% {of}{rough}"])
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
        notes.append(f"measured traffic: {a.layers.missing['traffic'].note()}")
    methods = [
        "bound by minimum bytes: 'memory' is certain; 'compute' is an upper bound on intensity "
        "(real traffic can only be larger); 'kernel: <cause>' where most of a layer's samples are in the OS kernel "
        "(page faults, syscalls), which no roof bounds"
    ]
    if roof is not None:
        methods.append(f"peak methods: {roof.gflops_method}; {roof.gbps_method}")
        methods += [paper_sources(roof.paper)] if paper_sources(roof.paper) else []
    return TableSpec("roofline", cols, rows, notes, methods=methods)


_ROOF_NEEDS = {
    "flops": "forward FLOPs, minimum bytes, intensity, achieved GFLOP/s, memory-/compute-bound layers",
    "time": "forward achieved GFLOP/s and the bound layers' share of forward",
}
"""What the roofline table cannot show without FLOPs (the flops collector) or layer times (the layers pass)."""
