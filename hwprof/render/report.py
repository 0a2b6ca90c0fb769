"""The full report of a run directory: Rich sections in the terminal, or JSON / CSV / Markdown.

Sections: run header (model, weights, host, threads, input and output, peaks, what was unavailable and
why); the advice table when the run was advised (advice.json: what to do, first); pipeline stages;
top layers by time; layer types; native kernels per stage and per layer on every thread (perf)
and over the model; aten kernels (torch.profiler) and py-spy native frames per layer;
roofline summary; Python and collector overheads; findings. Built from hwprof.analysis only.
A figure that was not measured is never shown as 0: its column is left out and a note under
the table says "unavailable: <reason>".
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from hwprof.analysis.run_analysis import Analysis
from hwprof.core.isa_units import units_text, uses_text
from hwprof.render.advice_table import advice_markdown, advice_renderables
from hwprof.render.export import layers_csv_text, summary_dict
from hwprof.render.gpu_sections import gpu_forward_spec, gpu_layers_spec, gpu_main_layers_spec, gpu_roofline_spec
from hwprof.render.input_lines import input_lines
from hwprof.render.kernel_tables import frames_spec, kernels_spec, native_kernels_spec, native_model_spec
from hwprof.render.overhead_section import overhead_spec
from hwprof.render.program_lines import program_lines
from hwprof.render.report_sections import (
    layers_spec,
    rankings_spec,
    roofline_spec,
    stages_spec,
    types_spec,
)
from hwprof.render.runtime_tables import fused_spec, layer_errors_spec, runtime_layers_spec, runtime_line
from hwprof.render.stage_kernels import stage_kernels_spec
from hwprof.render.tables import TableSpec, markdown, spec_renderables
from hwprof.render.whole_program import whole_program_spec

if TYPE_CHECKING:
    from hwprof.hardware.machine import Peaks
    from hwprof.schema.run import ModelDoc, RunDoc

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


def _shown(value: object) -> object:
    """A host figure the run did not record shows as "?"."""
    return "?" if value is None else value


def header_lines(a: Analysis) -> list[tuple[str, str]]:
    run = a.doc
    status = a.shown_status or run.status
    out: list[tuple[str, str]] = [("run", f"{run.run_id if run.run_id is not None else '?'} [{status}]")]
    out += [("warning", w) for w in a.warnings]
    out += _source_lines(run)
    out += program_lines(run)
    if run.model:
        out += _model_lines(run.model)
    out.append(_host_line(run))
    out += _units_lines(run)
    line = runtime_line(a.doc.runtime)
    if line is not None:
        out.append(line)
    out.append(_config_line(run))
    out += input_lines(run)
    out.append(_peaks_line(a))
    return out


def _source_lines(run: RunDoc) -> list[tuple[str, str]]:
    """Where an imported run came from; nothing for a collected one."""
    imported = run.imported
    if not imported:
        return []
    return [
        ("source", f"imported from {', '.join(imported.files or [])} (hwprof gpu-import)"),
        ("device", f"{imported.device or '?'} (recorded on: {imported.recorded_on})"),
    ]


def loaded_weights_text(weights: object) -> str:
    """What a run loaded (model.json's weights): the file, its format and sha256, and for a trained model fetched
    by name where it came from and its licence."""
    if not isinstance(weights, dict):
        return str(weights)
    sha = str(weights.get("sha256") or "")
    digest = f", sha256 {sha[:16]}..." if sha else ""
    stored = f"stored as {weights.get('dtype')}, loaded as float32"
    text = f"{weights.get('path')} ({weights.get('format')}, {stored}{digest})"
    return f"{weights['source']}; loaded from {text}" if weights.get("source") else text


def _model_lines(model: ModelDoc) -> list[tuple[str, str]]:
    gflops = f"{model.gflops:.2f} GFLOPs" if model.gflops else "GFLOPs not measured"
    shape = "x".join(map(str, model.input_shape or [])) or "an input shape not recorded"
    params = model.params_fused
    params_text = "params not recorded" if params is None else f"{params:,} params (fused)"
    if model.family == "program":
        weights = "the program's own"
    elif model.random_init and model.init and model.init.text:
        weights = f"random init, {model.init.text} (the compute profile is real, detections are meaningless)"
    elif model.random_init:
        weights = (
            "random init (seeded, not scaled: its signal fades layer by layer, so an output check of this run "
            "may be blind; the compute profile is real, detections are meaningless)"
        )
    else:
        weights = loaded_weights_text(model.weights)
    return [
        ("model", f"{model.name} ({model.family}): {model.layers} layers, {params_text}, {gflops} at {shape}"),
        ("weights", weights),
    ]


def _host_line(run: RunDoc) -> tuple[str, str]:
    host, imported = run.host, run.imported
    if imported and not host.recorded:
        return ("host", "the recording machine's host is not stated in the imported files")
    return (
        "recording host" if imported else "host",
        f"{_shown(host.cpu_model)}, {_shown(host.logical_cpus)} logical CPUs, "
        f"ISA {_shown(host.torch.cpu_capability)}, torch {_shown(host.torch.version)}; {_units(host.isa_flags)}",
    )


def _isa_flags(flags: list[object] | None) -> list[str] | None:
    return None if flags is None else [str(f) for f in flags]


def _units(flags: list[object] | None) -> str:
    """The advice-relevant units the host line names (core/isa_units.py)."""
    return units_text(_isa_flags(flags))


def _units_lines(run: RunDoc) -> list[tuple[str, str]]:
    """Which runtime will use which of the host's units; nothing for an imported run's unstated host."""
    if run.imported and not run.host.recorded:
        return []
    text = uses_text(_isa_flags(run.host.isa_flags))
    return [("units used", text)] if text else []


def _config_line(run: RunDoc) -> tuple[str, str]:
    cfg = run.config
    passes = ", ".join(run.passes)
    if run.imported:
        return ("config", f"{cfg.iters} profiled forwards in the trace; passes: {passes}")
    if cfg.program is not None:
        return (
            "config",
            f"{cfg.threads} torch threads, {cfg.iters} measured calls of the model after {cfg.warmup} warm-up; "
            f"passes: {passes or 'none'}",
        )
    return (
        "config",
        f"{cfg.threads} torch threads, batch {cfg.batch}, imgsz {cfg.imgsz}, "
        f"{cfg.iters} measured iterations after {cfg.warmup} warm-up; "
        f"passes: {passes or 'none'}",
    )


def _peaks_line(a: Analysis) -> tuple[str, str]:
    roof = a.layers.roof.roof
    if roof is None:
        return ("peaks", a.layers.missing["roofline"].text())
    load = f"; host load {roof.load_avg_1m:.1f} while measuring" if roof.load_avg_1m is not None else ""
    busy = " (busy host: likely too low)" if roof.busy_host else ""
    return (
        "peaks",
        f"{roof.peak_gflops:.1f} GFLOP/s FP32 (probe), {roof.peak_gbps:.2f} GB/s (triad), ridge "
        f"{roof.ridge:.1f} FLOP/B, {roof.threads} threads{load}{busy}",
    )


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


def _header_renderable(a: Analysis) -> RenderableType:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in header_lines(a):
        grid.add_row(
            Text(key, style="yellow") if key == "warning" else key, Text(value)
        )  # not markup: "[complete]", paths and reasons hold brackets
    lines = unavailable_lines(a)
    if lines:
        grid.add_row("not measured", "")
        for name, status, reason in lines:
            if status == "skipped":  # a list of names: it goes in the wide column, not the key column
                grid.add_row(Text("  skipped", style=STATUS_STYLE["skipped"]), Text(f"{name}: {reason}"))
                continue
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
        whole_program_spec(a),
        stages_spec(a),
        gpu_main_layers_spec(a, top) or layers_spec(a, top),
        rankings_spec(a),
        types_spec(a),
        runtime_layers_spec(a),
        fused_spec(a),
        layer_errors_spec(a),
        stage_kernels_spec(a),
        native_kernels_spec(a),
        native_model_spec(a),
        kernels_spec(a),
        frames_spec(a),
        roofline_spec(a),
        gpu_forward_spec(a),
        gpu_layers_spec(a, top),
        gpu_roofline_spec(a),
        overhead_spec(a),
    ]
    return [s for s in out if s is not None]


def render_rich(a: Analysis, console: Console, top: int = TOP_DEFAULT) -> None:
    parts: list[RenderableType] = [_header_renderable(a)]
    if a.advice is not None:  # the report leads with what to do
        parts.append(Text(""))
        parts += advice_renderables(a.advice, console)
    for spec in specs(a, top):
        parts.append(Text(""))
        parts += spec_renderables(spec, console)
    parts.append(Text(""))
    parts.append(_findings_renderable(a))
    console.print(Group(*parts))


def render_markdown(a: Analysis, top: int = TOP_DEFAULT) -> str:
    model = a.doc.model.name or "?"
    lines = [f"# hwprof report: {model}, run {a.doc.run_id or '?'}", ""]
    for key, value in header_lines(a):
        lines.append(f"- **{key}**: {value}")
    unavailable = unavailable_lines(a)
    if unavailable:
        lines.append("- **not measured**:")
        for name, status, reason in unavailable:
            lines.append(f"  - {name} {status}: {reason}")
    lines.append("")
    if a.advice is not None:
        lines.append(advice_markdown(a.advice))
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


def report(a: Analysis, console: Console, top: int = TOP_DEFAULT, format: str = "rich") -> None:
    """Print the report of an analysed run to `console` in `format`; it only renders (the caller loads the
    run, analyses it and writes its files: hwprof.session.finish.report_run)."""
    check_options(top, format)
    if format == "rich":
        render_rich(a, console, top)
    elif format == "markdown":
        _raw(console, render_markdown(a, top))
    elif format == "json":
        _raw(console, json.dumps(summary_dict(a), indent=1) + "\n")
    else:
        _raw(console, layers_csv_text(a))


def check_options(top: int, format: str) -> None:
    """ValueError (one line, naming the option) for a format or a --top the report does not have."""
    if format not in FORMATS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)} (got {format!r})")
    if top < 1:
        raise ValueError(f"--top must be at least 1 (got {top})")


def _raw(console: Console, text: str) -> None:
    """Machine formats bypass Rich (no wrapping, no markup)."""
    file = console.file or sys.stdout
    file.write(text)
    file.flush()


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
