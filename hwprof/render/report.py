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

from hwprof.analysis.finding import Finding, labelled
from hwprof.analysis.program.facts import ProgramFacts, program_facts
from hwprof.analysis.run_analysis import Analysis
from hwprof.core.isa_units import run_uses_text, units_text
from hwprof.core.kernels import RANKED_LAYERS
from hwprof.render.advice.table import advice_markdown, advice_renderables
from hwprof.render.export import layers_csv_text, summary_dict
from hwprof.render.gpu.sections import gpu_forward_spec, gpu_layers_spec, gpu_main_layers_spec, gpu_roofline_spec
from hwprof.render.input_lines import input_lines, warmup_text
from hwprof.render.kernel_tables import frames_spec, kernels_spec, native_kernels_spec, native_model_spec
from hwprof.render.layer_shapes import layer_shapes_spec
from hwprof.render.measured_flops import measured_flops
from hwprof.render.memory_section import memory_spec
from hwprof.render.not_measured import grouped_unavailable
from hwprof.render.overhead_section import overhead_spec
from hwprof.render.report_sections import (
    layers_spec,
    rankings_spec,
    roofline_spec,
    stages_spec,
    types_spec,
)
from hwprof.render.roof_lines import header_text
from hwprof.render.runtime_tables import fused_spec, layer_errors_spec, runtime_layers_spec, runtime_line
from hwprof.render.stage_kernels import stage_kernels_spec
from hwprof.render.summary import NOT_MEASURED, evidence_split, summary_markdown, summary_renderables, top_findings
from hwprof.render.tables import (
    METHODS_LINE,
    LeftOut,
    TableSpec,
    has_methods,
    left_out_line,
    markdown,
    spec_renderables,
)
from hwprof.render.weights_line import detections_details, loaded_weights_text
from hwprof.render.whole_program import whole_program_spec

if TYPE_CHECKING:
    from hwprof.analysis.workload import WorkloadView
    from hwprof.schema.run import ModelDoc, RunDoc

FORMATS = ("rich", "json", "csv", "markdown", "html")
TOP_DEFAULT = RANKED_LAYERS
LISTED_EVIDENCE_LINES = 3
"""A finding's evidence in the terminal's list, at most (markdown, JSON and HTML have it whole): the allocator
finding's took 9 lines of a yolov7 report at 80 columns."""
LAYERS_BRIEF = 10
"""The layer rows the terminal shows where --top was not given (its default's 15 in markdown and HTML)."""
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
    out += _source_lines(run)  # the run's warnings lead its summary (render/summary.py), once
    out += a.workload.header
    if run.model:
        out += _model_lines(run.model, run, a.workload)
    out.append(_host_line(run))
    out += _units_lines(run)
    line = runtime_line(a.doc.runtime)
    if line is not None:
        out.append(line)
    facts = program_facts(run, a.stages)
    out.append(_config_line(run, a.workload, facts))
    grad = facts.grad_text()
    if grad is not None:
        out.append(("measured", grad))
    out += input_lines(run)
    out.append(_peaks_line(a))
    if run.peaks is not None and run.peaks.cache_file:
        out.append(("cache", run.peaks.cache_file))
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


def _model_lines(model: ModelDoc, run: RunDoc, workload: WorkloadView) -> list[tuple[str, str]]:
    flops = measured_flops(run)
    shape = "x".join(map(str, model.input_shape or [])) or "an input shape not recorded"
    gflops = flops.headline() + flops.layer_table_note() if flops is not None else f"GFLOPs not measured at {shape}"
    params = model.params_fused
    params_text = "params not recorded" if params is None else f"{params:,} params (fused)"
    if workload.weights is not None:
        weights = workload.weights
    elif model.random_init and model.init and model.init.text:
        weights = f"random init, {model.init.text} (the compute profile is real, detections are meaningless)"
    elif model.random_init:
        weights = (
            "random init (seeded, not scaled: its signal fades layer by layer, so an output check of this run "
            "may be blind; the compute profile is real, detections are meaningless)"
        )
    else:
        weights = loaded_weights_text(model.weights)
    out = [
        ("model", f"{model.name} ({model.family}): {model.layers} layers, {params_text}, {gflops}"),
        ("weights", weights),
    ]
    if run.detections and not model.random_init:  # random weights' boxes mean nothing: the stages' note says so
        out.append(("detections", detections_details(run.detections)))
    return out


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
    """The host's units this run's runtime and precision used (an fp32 run: none, no line); nothing for an imported
    run's unstated host."""
    if run.imported and not run.host.recorded:
        return []
    cfg = run.config
    text = run_uses_text(_isa_flags(run.host.isa_flags), cfg.runtime or "torch", cfg.precision or "fp32")
    return [("units used", text)] if text else []


def _config_line(run: RunDoc, workload: WorkloadView, facts: ProgramFacts) -> tuple[str, str]:
    cfg = run.config
    passes = ", ".join(run.passes)
    if run.imported:
        return ("config", f"{cfg.iters} profiled forwards in the trace; passes: {passes}")
    sizes = f"{workload.sizes}, " if workload.sizes else ""
    measured = f"{sizes}{cfg.iters} {workload.measured} after {warmup_text(run)}"
    if facts.threads_set:  # the program's own counts, after the calls they count
        return ("config", f"{measured}; {facts.threads_text()}; passes: {passes or 'none'}")
    return ("config", f"{cfg.threads} torch threads, {measured}; passes: {passes or 'none'}")


def _peaks_line(a: Analysis) -> tuple[str, str]:
    roof = a.layers.roof.roof
    if roof is None:
        return ("peaks", a.layers.missing["roofline"].text())
    load = f"; host load {roof.load_avg_1m:.1f} while measuring" if roof.load_avg_1m is not None else ""
    return ("peaks", f"{header_text(roof)}, {roof.threads} threads{load}")


def unavailable_lines(a: Analysis) -> list[tuple[str, str, str]]:
    """(collectors, status, reason; fix) for what did not run fully, one line per cause (not_measured.py)."""
    return grouped_unavailable(a)


ON_THE_FIRST_SCREEN = frozenset({"run", "weights", "host"})
"""Run details the terminal's first screen says in short (its status; random or trained weights; the CPU and its
units): the terminal's run details leave them to `--format markdown`, where they stand whole."""


def detail_lines(a: Analysis) -> list[tuple[str, str]]:
    """The run details the terminal shows: header_lines less what its first screen and tables say already (the
    roofline table's rows give the peaks)."""
    said = ON_THE_FIRST_SCREEN | ({"peaks"} if a.roofline is not None and a.layers.roof.roof is not None else set())
    return [(key, value) for key, value in header_lines(a) if key not in said]


def _header_renderable(a: Analysis) -> RenderableType:
    """The run's details and the "not measured" block: after the summary, the tables and the findings."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in detail_lines(a):
        grid.add_row(
            Text(key, style="yellow") if key == "warning" else key, Text(value)
        )  # not markup: "[complete]", paths and reasons hold brackets
    lines = unavailable_lines(a)
    if not lines:
        return Group(Text("run details", style="bold"), grid)
    missing = Table.grid(padding=(0, 1))
    missing.add_column(overflow="fold")
    for names, status, reason in lines:  # names first: a group's list of collectors never squeezes the reason
        cell = Text(f"{names}: ", style="bold")
        cell.append(status, style=STATUS_STYLE.get(status, ""))
        cell.append(f": {reason}" if reason else "")
        missing.add_row(cell)
    return Group(Text("run details", style="bold"), grid, Text(""), Text(NOT_MEASURED, style="bold"), missing)


def _findings_renderable(a: Analysis, width: int) -> RenderableType:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True, style="bold")
    grid.add_column(overflow="fold")
    rows = labelled(a.findings)
    first = len(top_findings(a))  # their titles are on the first screen: here their evidence, whole
    for k, (label, f) in enumerate(rows):
        if k < first:  # on the first screen, title and evidence's head: here what follows it, if anything
            rest = evidence_split(f.evidence, width)[1]
            if rest:
                grid.add_row(label, Text(rest, style="dim"))
            continue
        cell = Text(f.title, style="" if f.ranked else "dim")
        head, rest = evidence_split(f.evidence, width, LISTED_EVIDENCE_LINES)
        cell.append(f"\n{head}" + (" (whole in `--format markdown`)" if rest else ""), style="dim")
        if f.unconfirmed:
            cell.append(f"\nunconfirmed: {_unfit_words(f)}", style="yellow")
        grid.add_row(label, cell)
    parts: list[RenderableType] = [Text("findings", style="bold")]
    if not any(f.ranked for _, f in rows):
        held = any(f.unconfirmed for _, f in rows)
        none = (
            "none confirmed: each finding below rests on a pass unfit for a verdict"
            if held
            else ("none: no rule found a clear signal in this run's data")
        )
        parts.append(Text(f"  {none}"))
    parts += [Text(f"  unfit: {why}", style="yellow") for why in _unfit_reasons(a, [f for _, f in rows])]
    parts.append(grid)
    return Group(*parts)


def _unfit_reasons(a: Analysis, shown: list[Finding]) -> list[str]:
    """Each unfit pass's reason, once, for the passes the shown findings rest on (a disturbed run named the same
    neighbours under every finding: 21 times in one report at 80 columns)."""
    named = {p for f in shown if f.unconfirmed for p in f.unfit}
    said = a.stages.disturbed  # the timing pass's: the stages' note says it whole
    return [
        "the timing pass was disturbed (the stages say by what)" if why == said else why
        for name, why in a.health.unfit.items()
        if name in named
    ]


def _unfit_words(f: Finding) -> str:
    """Under a finding: the unfit passes it rests on, whose reasons stand above the findings."""
    if not f.unfit:
        return f.unconfirmed
    names = ", ".join(f.unfit[:-1]) + (" and " if len(f.unfit) > 1 else "") + f.unfit[-1]
    return f"rests on the {names} pass{'es' if len(f.unfit) > 1 else ''} (unfit: above)"


def specs(a: Analysis, top: int) -> list[TableSpec]:
    out = [
        whole_program_spec(a),
        stages_spec(a),
        gpu_main_layers_spec(a, top) or layers_spec(a, top, LAYERS_BRIEF if top == TOP_DEFAULT else None),
        layer_shapes_spec(a, top),
        memory_spec(a),
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
    """The summary first (one screen), the advice, the tables, the findings, then the run's details."""
    left_out: list[LeftOut] = []
    parts: list[RenderableType] = summary_renderables(a, console, left_out)
    if a.advice is not None:
        parts.append(Text(""))
        parts += advice_renderables(a.advice, console)
    shown = specs(a, top)
    for spec in shown:
        parts.append(Text(""))
        parts += spec_renderables(spec, console, left_out=left_out)
    line = left_out_line(left_out, console.width)
    parts += [Text(line, style="dim")] if line else []
    parts += [Text(METHODS_LINE, style="dim")] if has_methods(shown) else []
    parts += [Text(""), _findings_renderable(a, console.width), Text(""), _header_renderable(a)]
    console.print(Group(*parts))


def render_markdown(a: Analysis, top: int = TOP_DEFAULT) -> str:
    model = a.doc.model.name or "?"
    lines = [f"# hwprof report: {model}, run {a.doc.run_id or '?'}", "", summary_markdown(a)]
    if a.advice is not None:
        lines.append(advice_markdown(a.advice))
    for spec in specs(a, top):
        lines.append(markdown(spec))
    lines += ["### findings", ""]
    for label, f in labelled(a.findings):
        if f.ranked:
            lines.append(f"{label} **{f.title}**: {f.evidence}")
        else:
            why = f"; unconfirmed: {f.unconfirmed}" if f.unconfirmed else ""
            lines.append(f"- {label}: {f.title} ({f.evidence}{why})")
    lines += ["", "### run details", ""]
    lines += [f"- **{key}**: {value}" for key, value in header_lines(a)]
    unavailable = unavailable_lines(a)
    if unavailable:
        lines += ["", f"### {NOT_MEASURED}", ""]
        lines += [f"- {names} {status}: {reason}" for names, status, reason in unavailable]
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
    elif format == "html":  # the page needs the plots: report_run prints it (hwprof.render.html) once they are drawn
        return
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
