"""The full report of a run directory: Rich sections in the terminal, or JSON / CSV / Markdown.

Sections: run header (model, weights, host, threads, peaks, what was unavailable and why);
pipeline stages; top layers by time; layer types; native kernels per layer on every thread (perf)
and over the model; aten kernels (torch.profiler) and py-spy native frames per layer;
roofline summary; Python and collector overheads; findings. Built from hwprof.analysis only.
A figure that was not measured is never shown as 0: its column is left out and a note under
the table says "unavailable: <reason>".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from hwprof.analysis.roofline import PROBE_LABELS
from hwprof.analysis.run_analysis import Analysis, analyse
from hwprof.render.fmt import ms, num, pct, si_bytes, sig
from hwprof.render.kernel_tables import frames_spec, kernels_spec, native_kernels_spec, native_model_spec
from hwprof.render.tables import MISSING, Col, TableSpec, markdown, spec_renderables

if TYPE_CHECKING:
    from hwprof.analysis.layer_report import LayerStat
    from hwprof.machine import Peaks
    from hwprof.rundata import RunData

FORMATS = ("rich", "json", "csv", "markdown")
TOP_DEFAULT = 15
STATUS_STYLE = {
    "ok": "green",
    "partial": "yellow",
    "unavailable": "yellow",
    "failed": "red",
    "skipped": "dim",
    "complete": "green",
    "timeout": "red",
    "interrupted": "red",
}


# ----------------------------------------------------------------------------- sections


def header_lines(a: Analysis) -> list[tuple[str, str]]:
    run = a.run
    model = run.get("model", {})
    host = run.get("host", {})
    cfg = run.get("config", {})
    out: list[tuple[str, str]] = [("run", f"{run.get('run_id', '?')} [{run.get('status', '?')}]")]
    if model:
        gflops = f"{model['gflops']:.2f} GFLOPs" if model.get("gflops") else "GFLOPs not measured"
        shape = "x".join(map(str, model.get("input_shape", [])))
        out.append(
            (
                "model",
                f"{model.get('name')} ({model.get('family')}): {model.get('layers')} layers, "
                f"{model.get('params_fused', 0):,} params (fused), {gflops} at {shape}",
            )
        )
        weights = (
            "random init (seeded: the compute profile is real, detections are meaningless)"
            if model.get("random_init")
            else str(model.get("weights"))
        )
        out.append(("weights", weights))
    torch_info = host.get("torch", {})
    out.append(
        (
            "host",
            f"{host.get('cpu_model', '?')}, {host.get('logical_cpus', '?')} logical CPUs, "
            f"ISA {torch_info.get('cpu_capability', '?')}, torch {torch_info.get('version', '?')}",
        )
    )
    passes = ", ".join(run.get("passes", {}))
    out.append(
        (
            "config",
            f"{cfg.get('threads')} torch threads, batch {cfg.get('batch')}, imgsz {cfg.get('imgsz')}, "
            f"{cfg.get('iters')} measured iterations after {cfg.get('warmup')} warm-up; "
            f"passes: {passes or 'none'}",
        )
    )
    roof = a.layers.roof.roof
    if roof is not None:
        load = f"; host load {roof.load_avg_1m:.1f} while measuring" if roof.load_avg_1m is not None else ""
        busy = " (busy host: likely too low)" if roof.busy_host else ""
        out.append(
            (
                "peaks",
                f"{roof.peak_gflops:.1f} GFLOP/s FP32 (probe), {roof.peak_gbps:.2f} GB/s (triad), ridge "
                f"{roof.ridge:.1f} FLOP/B, {roof.threads} threads{load}{busy}",
            )
        )
    else:
        out.append(("peaks", a.layers.missing["roofline"].text()))
    return out


def unavailable_lines(a: Analysis) -> list[tuple[str, str, str]]:
    """(collector, status, reason; fix) for what did not run fully; skipped ones on one line."""
    out = []
    skipped = []
    for name, entry in a.unavailable.items():
        if entry["status"] == "skipped":
            skipped.append(name)
            continue
        text = entry["reason"] + (f"; fix: {entry['fix']}" if entry["fix"] else "")
        out.append((name, entry["status"], text))
    if skipped:
        out.append((", ".join(skipped), "skipped", "not requested for this run"))
    return out


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
    notes = []
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
    for key, label in (
        ("roofline", "roofline (% peak, bound)"),
        ("counters", "CPI / IPC"),
        ("mpki", "LLC MPKI"),
        ("energy", "energy"),
        ("kernels", "top kernels"),
    ):
        if key in rep.missing:
            notes.append(f"{label}: {rep.missing[key].short()}")
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
        row += [f"{t.params:,}", sig(t.flops / 1e9 if t.flops is not None else None)]
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
        ["forward FLOPs", f"{sig(s.flops / 1e9 if s.flops is not None else None)} GFLOPs"],
        ["forward minimum bytes", si_bytes(s.min_bytes)],
        ["forward intensity", f"{sig(s.intensity)} FLOP/B -> {s.bound or MISSING}-bound"],
        ["forward achieved", f"{sig(s.gflops_s)} GFLOP/s = {num(s.pct_peak, 1)}% of peak"],
    ]
    for bound, entry in s.layers_by_bound.items():
        rows.append([f"{bound}-bound layers", f"{int(entry['layers'])}, {pct(entry['share'])} of forward"])
    notes = []
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


def overhead_spec(a: Analysis) -> TableSpec:
    o = a.overheads
    cols = [
        Col("pass", "left"),
        Col("collectors", "left", max_width=40),
        Col("status", "left", priority=2),
        Col("wall s", priority=1),
        Col("fwd p50 ms"),
        Col("x timing"),
        Col("steal", priority=1),
    ]
    rows = [
        [
            p.name,
            ", ".join(p.collectors),
            p.status,
            num(p.wall_s, 1),
            ms(p.forward_p50_ms),
            f"{p.ratio:.2f}x" if p.ratio is not None else MISSING,
            pct(p.host_steal_share),
        ]
        for p in o.passes
    ]
    if not rows:
        cols = []
    notes = [
        "x timing = the pass's forward p50 / the clean timing pass's: what its collectors cost; steal = the "
        "hypervisor's steal time during the pass, share of all CPUs (/proc/stat): timings of a pass with high "
        "steal are inflated"
    ]
    if o.outside_layers_ms is not None:
        cpu = f"; {o.outside_layers_cpu_ms:.2f} ms CPU (perf task-clock gap)" if o.outside_layers_cpu_ms else ""
        notes.append(
            f"python outside layers: {ms(o.outside_layers_ms)} ms per forward "
            f"({pct(o.outside_layers_share)}), scaled like the layers{cpu}"
        )
    if o.between_ops_ms is not None:
        worst = ", ".join(f"{name} {ms(v)} ms" for name, v, _ in o.between_ops_layers[:3])
        notes.append(
            f"between aten ops: {ms(o.between_ops_ms)} ms per forward ({pct(o.between_ops_share)}) under "
            f"torch.profiler; most in {worst}"
        )
    elif "between_ops" in o.missing:
        notes.append(f"between aten ops: {o.missing['between_ops'].short()}")
    if o.harness_vs_reference is not None:
        notes.append(f"harness forward / plain model(x) loop: {o.harness_vs_reference:.3f}")
    notes += o.counter_checks
    return TableSpec("collector overheads", cols, rows, notes)


# ----------------------------------------------------------------------------- rich and markdown


def _header_renderable(a: Analysis) -> RenderableType:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in header_lines(a):
        grid.add_row(key, value)
    lines = unavailable_lines(a)
    if lines:
        grid.add_row("not measured", "")
        for name, status, reason in lines:
            cell = Text()
            cell.append(status, style=STATUS_STYLE.get(status, ""))
            cell.append(f": {reason}" if reason else "")
            grid.add_row(f"  {name}", cell)
    return grid


def _findings_renderable(a: Analysis) -> RenderableType:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True, style="bold")
    grid.add_column(overflow="fold")
    n = 0
    for f in a.findings:
        caveat = f.kind == "caveat"
        if not caveat:
            n += 1
        cell = Text(f.title, style="dim" if caveat else "")
        cell.append(f"\n{f.evidence}", style="dim")
        grid.add_row("note" if caveat else f"{n}.", cell)
    parts: list[RenderableType] = [Text("findings", style="bold")]
    if n == 0:
        parts.append(Text("  none: no rule found a clear signal in this run's data"))
    parts.append(grid)
    return Group(*parts)


def specs(a: Analysis, top: int) -> list[TableSpec]:
    out = [
        stages_spec(a),
        layers_spec(a, top),
        rankings_spec(a),
        types_spec(a),
        native_kernels_spec(a),
        native_model_spec(a),
        kernels_spec(a),
        frames_spec(a),
        roofline_spec(a),
        overhead_spec(a),
    ]
    return [s for s in out if s is not None]


def render_rich(a: Analysis, console: Console, top: int = TOP_DEFAULT) -> None:
    parts: list[RenderableType] = [_header_renderable(a)]
    for spec in specs(a, top):
        parts.append(Text(""))
        parts += spec_renderables(spec, console)
    parts.append(Text(""))
    parts.append(_findings_renderable(a))
    console.print(Group(*parts))


def render_markdown(a: Analysis, top: int = TOP_DEFAULT) -> str:
    model = a.run.get("model", {}).get("name", "?")
    lines = [f"# hwprof report: {model}, run {a.run.get('run_id', '?')}", ""]
    for key, value in header_lines(a):
        lines.append(f"- **{key}**: {value}")
    unavailable = unavailable_lines(a)
    if unavailable:
        lines.append("- **not measured**:")
        for name, status, reason in unavailable:
            lines.append(f"  - {name} {status}: {reason}")
    lines.append("")
    for spec in specs(a, top):
        lines.append(markdown(spec))
    lines += ["### findings", ""]
    n = 0
    for f in a.findings:
        if f.kind == "caveat":
            lines.append(f"- note: {f.title} ({f.evidence})")
        else:
            n += 1
            lines.append(f"{n}. **{f.title}**: {f.evidence}")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- entry points


def report(
    run_dir: Path | str,
    top: int = TOP_DEFAULT,
    format: str = "rich",
    console: Console | None = None,
    write: bool = True,
    plots: bool | None = None,
) -> Analysis:
    """Print the report of a run directory to `console` in `format`.

    write: also (re)write summary.json and the enriched layers.csv in the run directory; a run
    directory that cannot be written to (a read-only copy) only gets a warning.
    plots: (re)draw the PNG plots too; None draws them only when the run directory has none yet
    (matplotlib costs about a second, and the plots of a run do not change between reports).
    """
    from hwprof.rundata import RunData

    if format not in FORMATS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)} (got {format!r})")
    if top < 1:
        raise ValueError(f"--top must be at least 1 (got {top})")
    console = console or Console()
    data = RunData.load(run_dir)
    analysis = analyse(data)
    emit(analysis, data, console, top, format)
    if write:
        from hwprof.render.plots import PLOT_FILES

        draw = plots if plots is not None else not all((data.root / f).exists() for f in PLOT_FILES)
        written = write_artifacts(analysis, data, console, plots=draw)
        if written and format == "rich":
            names = ", ".join(p.name for p in written)
            console.print(Text(f"written in {data.root}: {names}", style="dim"))
    return analysis


def emit(a: Analysis, data: RunData, console: Console, top: int, format: str) -> None:
    from hwprof.render.export import layers_csv_text, summary_dict

    if format == "rich":
        render_rich(a, console, top)
    elif format == "markdown":
        _raw(console, render_markdown(a, top))
    elif format == "json":
        _raw(console, json.dumps(summary_dict(a), indent=1) + "\n")
    else:
        _raw(console, layers_csv_text(a))


def _raw(console: Console, text: str) -> None:
    """Machine formats bypass Rich (no wrapping, no markup)."""
    file = console.file or sys.stdout
    file.write(text)
    file.flush()


def write_artifacts(a: Analysis, data: RunData, console: Console, plots: bool = True) -> list[Path]:
    from hwprof.render.export import write_exports

    written: list[Path] = []
    try:
        written += write_exports(a, data.root)
        if plots:
            from hwprof.render.plots import write_plots

            written += write_plots(a, data.root)
    except OSError as exc:
        console.print(
            f"[yellow]warning:[/] could not write the report's files into {data.root}: {exc}", highlight=False
        )
    return written


def render_report(data: RunData, console: Console, top: int = TOP_DEFAULT, write: bool = True) -> Analysis:
    """The end of `collect`: the full Rich report of a freshly loaded run, and its files."""
    analysis = analyse(data)
    render_rich(analysis, console, top)
    if write:
        write_artifacts(analysis, data, console)
    return analysis


def peaks_renderable(peaks: Peaks) -> RenderableType:
    """`hwprof doctor --peaks`."""
    text = Text()
    source = "cached" if peaks.cached else f"measured now in {peaks.measure_s:.1f} s"
    text.append("machine peaks ", style="bold")
    text.append(f"({source}; {peaks.measured_at}; key {peaks.host_key})\n")
    text.append(f"  compute    {peaks.gflops:.1f} GFLOP/s FP32 with {peaks.threads} threads\n")
    text.append(f"             {peaks.gflops_method}; samples {peaks.gflops_samples}\n", style="dim")
    text.append(f"  bandwidth  {peaks.gbps:.2f} GB/s\n")
    text.append(f"             {peaks.gbps_method}; samples {peaks.gbps_samples}\n", style="dim")
    text.append(f"  ridge      {peaks.ridge:.1f} FLOP/B\n")
    if peaks.load_avg_1m is not None:
        text.append(f"  load       {peaks.load_avg_1m:.2f} (1-min) on {peaks.logical_cpus} CPUs\n")
    if peaks.interference is not None:
        text.append(f"  others     {peaks.interference:.1%} of the host's CPU time while measuring\n")
    if peaks.busy_host:
        text.append("  busy host: the peaks are likely too low (measure again when idle: --force)\n", style="yellow")
    text.rstrip()
    return text


def doctor_peaks(threads: int, force: bool = False, console: Console | None = None) -> Peaks:
    """`hwprof doctor --peaks [--force]`: this host's peaks (cached, or measured now) and how."""
    from hwprof.machine import measure_peaks

    peaks = measure_peaks(threads, force=force)
    (console or Console()).print(peaks_renderable(peaks))
    return peaks


def summary_of(data: RunData) -> dict[str, Any]:
    from hwprof.render.export import summary_dict

    return summary_dict(analyse(data))
