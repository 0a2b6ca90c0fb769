"""The report's first screen: the answer to "what ran, how fast, where does the time go, what to do", in at most
40 lines at 80 columns; the long header, every table and the "not measured" block follow it.

Pieces of content (lines and one TableSpec), so the terminal, the Markdown and the HTML page show the same
summary: what ran where (a program's command and its forwards' input shapes first; model with its GFLOPs at the
measured forwards' shapes, host, run, input; for loaded weights also the weights, in at most two lines at 80
columns, and the boxes NMS kept per image, in one), speed and the measurement's health (one line), the top 5 layers,
the top findings with one line of evidence each, the best measured change with its output check, and one
line counting what was not measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from hwprof.analysis.next_steps import next_steps
from hwprof.analysis.program.facts import GRAD_ON, TRAINING, program_facts
from hwprof.core.isa_units import units_text
from hwprof.core.program_spec import PROGRAM_SPAN
from hwprof.render.advice.table import heading, output_text
from hwprof.render.fmt import ms, pct
from hwprof.render.input_lines import pass_inputs_text, warmup_text
from hwprof.render.measured_flops import measured_flops
from hwprof.render.report_sections import kernel_text
from hwprof.render.tables import MISSING, Col, LeftOut, TableSpec, markdown, spec_renderables
from hwprof.render.weights_line import detections_summary, weights_summary
from hwprof.schema.weights import WeightsDoc

if TYPE_CHECKING:
    from hwprof.analysis.run_analysis import Analysis
    from hwprof.schema.run import RunDoc

TOP_LAYERS = 5
TOP_FINDINGS = 3
PROGRAM = "program"
"""The key of a program's command: one line in the terminal, cut to its width."""
NOT_MEASURED = "not measured"
"""The title of the block the summary's last line points to."""


@dataclass
class SummaryFinding:
    rank: int
    title: str
    evidence: str
    layers: tuple[int, ...]


def title(a: Analysis) -> str:
    run = a.doc
    return f"summary of run {run.run_id if run.run_id is not None else '?'} [{a.shown_status or run.status}]"


def warning_lines(a: Analysis) -> list[tuple[str, str]]:
    """What makes the run's figures not final (a run a collect still holds, damaged files): first."""
    return [("warning", w) for w in a.warnings]


RANDOM_WEIGHTS = "random init: the times are real, the detections mean nothing (--weights FILE for yours)"


def run_lines(a: Analysis) -> list[tuple[str, str]]:
    """What ran where: a program's command and its forwards' input shapes (first), model and weights with the
    GFLOPs at the measured forwards' shapes, host and its units, threads and sizes, the input (at most 4 lines);
    a run on loaded weights adds the weights (at most two lines at 80 columns) and the boxes NMS kept."""
    run = a.doc
    model = run.model
    out: list[tuple[str, str]] = []
    shapes = pass_inputs_text(run, a.workload.own_input)
    if a.workload.command is not None:  # what the user ran, and on what: first (a program chose its own input)
        out.append((PROGRAM, a.workload.command))
        if shapes:
            out.append(("inputs", shapes))
    if model.name:
        loaded = None if model.random_init else WeightsDoc.of_model(model.weights)
        flops = measured_flops(run)
        gflops = f", {flops.headline()}" if flops is not None else ""
        head = f"{model.name} ({model.family}), {model.layers} layers{gflops}"
        if model.random_init:  # said up front, with what follows from it
            out += [("model", head), ("weights", RANDOM_WEIGHTS)]
        elif loaded is None:
            out.append(("model", f"{head}; weights: {str(model.weights) if model.weights else '?'}"))
        else:
            out += [("model", head), ("weights", weights_summary(loaded))]
            if run.detections:  # random weights' boxes mean nothing: the pipeline stages' note says so instead
                out.append(("detections", detections_summary(run.detections)))
    host = run.host
    flags = None if host.isa_flags is None else [str(f) for f in host.isa_flags]
    out.append(("host", f"{host.cpu_model or '?'}, {host.logical_cpus or '?'} CPUs; {units_text(flags)}"))
    cfg = run.config
    sizes = f", {a.workload.sizes}" if a.workload.sizes else ""
    iterations = _iterations_text(run, a)
    facts = program_facts(run, a.stages)
    if facts.threads_set:  # the program's own counts, last: they hold commas
        out.append(("run", f"{a.workload.sizes + ', ' if sizes else ''}{iterations}; {facts.threads_text()}"))
    else:
        threads = [] if cfg.outside else [f"{cfg.threads} torch thread{'s' if cfg.threads != 1 else ''}"]
        out.append(("run", ", ".join([*threads, *([a.workload.sizes] if a.workload.sizes else []), iterations])))
    images = _images_text(run)
    if images:
        out.append(("input", images))
    if shapes and a.workload.command is None:
        out.append(("inputs", shapes))
    return out


def _iterations_text(run: RunDoc, a: Analysis) -> str:
    """ "20 iterations after 2 warm-up"; an attached service's calls in each window; a service sampled from outside
    (`hwprof attach --no-agent`) for how long its one window lasted."""
    if run.config.outside:
        window = next((r.p50_ms for r in a.stages.rows if r.name == PROGRAM_SPAN), None)
        lasted = f" for {window / 1e3:.1f} s" if window else ""
        return f"sampled from outside{lasted} (no agent: whole-process, no call counted)"
    counted = "of the service's calls in each window" if run.config.attached is not None else "iterations"
    return f"{run.config.iters} {counted} after {warmup_text(run)}"


def _images_text(run: RunDoc) -> str | None:
    doc: Mapping[str, object] | None = run.images
    if not doc:
        return run.config.images
    video = doc.get("video")
    if isinstance(video, Mapping):
        return f"video {PurePath(str(video.get('path') or '?')).name}"
    paths = doc.get("paths")
    names = [PurePath(str(p)).name for p in paths] if isinstance(paths, list) else []
    if not names:
        return None
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"{len(names)} image{'s' if len(names) > 1 else ''}: {shown}"


def speed_line(a: Analysis) -> tuple[str, str] | None:
    """Forward p50 and p90, FPS (inference and end to end), and whether the measurement is clean. A program that
    trains (a backward pass after its forwards) or ran its forwards with grad on did not measure an inference: its
    FPS says what it measured (forward + backward, forward with grad on)."""
    st = a.stages
    forward = st.get("forward")
    if forward is None:
        return None
    facts = program_facts(a.doc, st)
    mode, fps = facts.mode, []
    step = facts.step_fps(st.batch, forward.p50_ms)
    if mode == TRAINING and step:
        fps.append(f"{TRAINING} {step:.2f}")
    elif st.inference_fps:
        fps.append(f"{GRAD_ON if mode == GRAD_ON else 'inference'} {st.inference_fps:.2f}")
    if st.fps:
        fps.append(f"end to end {st.fps:.2f}")
    health = "disturbed (see pipeline stages)" if st.disturbed else "clean"
    fps_text = f"; FPS {', '.join(fps)}" if fps else ""
    times = f"forward p50 {ms(forward.p50_ms)} ms, p90 {ms(forward.p90_ms)} ms"
    if facts.backward_ms is not None:
        times += f", backward p50 {ms(facts.backward_ms)} ms"
    elif mode == GRAD_ON:
        times += " (grad on)"
    return ("speed", f"{times}{fps_text}; {health}")


def top_layers_spec(a: Analysis, n: int = TOP_LAYERS) -> TableSpec | None:
    """The layers that take the most time: time, share, bound and their top kernel."""
    rows = a.layers.top(n)
    if not rows:
        return None
    cols = [
        Col("#"),
        Col("type", "left", max_width=12),
        Col("ms"),
        Col("share"),
        Col("bound", "left"),
        Col("top kernel", "left", priority=1, max_width=28),
    ]
    cells = [
        [str(r.index), r.type, ms(r.time_ms), pct(r.share), r.bound_shown or MISSING, kernel_text(r)] for r in rows
    ]
    return TableSpec(f"where the time goes: top {len(rows)} layers", cols, cells, key="summary-layers")


def top_findings(a: Analysis, n: int = TOP_FINDINGS) -> list[SummaryFinding]:
    ranked = [f for f in a.findings if f.ranked]
    return [SummaryFinding(i + 1, f.title, f.evidence, f.layers) for i, f in enumerate(ranked[:n])]


def advice_lines(a: Analysis) -> list[str]:
    """The best measured change and its output check, where the run was advised."""
    if a.advice is None:
        return []
    top = next((r for r in a.advice.ordered() if r.ranked), None)
    lines = [heading(a.advice)]
    if top is not None:
        lines.append(f"output check: {output_text(top.output, False, '; ')}")
    return lines


NEXT = "next"


def next_lines(a: Analysis) -> list[tuple[str, str]]:
    """The first screen's last block: (command or file, what it tells and how long it takes) for each next step
    (hwprof.analysis.next_steps)."""
    return [(s.command, f"{s.tells} ({s.takes})") for s in next_steps(a)]


def not_measured_line(a: Analysis) -> str | None:
    """The collectors that did not measure everything (skipped ones are not counted), or None."""
    missing = [name for name, e in a.unavailable.items() if e["status"] != "skipped"]
    if not missing:
        return None
    return ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")


# ----------------------------------------------------------------------------- renderers


def summary_renderables(a: Analysis, console: Console, left_out: list[LeftOut] | None = None) -> list[RenderableType]:
    """The first screen in the terminal: key lines, the top layers' table, findings, advice, what is missing.
    `left_out`: the report's list of the columns its tables left out (hwprof.render.tables.rich_render)."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    speed = speed_line(a)
    for key, value in [*warning_lines(a), *run_lines(a), *([speed] if speed else [])]:
        cut = key == PROGRAM  # the command in one line, cut to the terminal's width: its script comes first
        text = Text(value, no_wrap=True, overflow="ellipsis") if cut else Text(value)
        grid.add_row(Text(key, style="yellow" if key == "warning" else ""), text)
    parts: list[RenderableType] = [Text(title(a), style="bold underline"), grid]
    spec = top_layers_spec(a)
    if spec is not None:
        parts += [Text(""), *spec_renderables(spec, console, left_out=left_out)]
    parts += [Text(""), _findings_grid(a, console.width)]
    for line in advice_lines(a):
        parts.append(Text(line, style="bold" if line.startswith("what to do") else ""))
    missing = not_measured_line(a)
    if missing:
        line = f"{NOT_MEASURED}: {missing} (see the end)"
        parts.append(Text(line, style="dim", no_wrap=True, overflow="ellipsis"))
    steps = [Text.assemble(command, "\n", (what, "dim")) for command, what in next_lines(a)]
    parts += [Text(""), Text(NEXT, style="bold"), Padding(Group(*steps), (0, 0, 0, 2))]  # hanging under "next"
    return parts


def withheld_line(a: Analysis) -> str | None:
    """The findings kept off the first screen because a pass under them was unfit for a verdict, or None."""
    held = [f for f in a.findings if f.unconfirmed]
    if not held:
        return None
    passes = a.health.unfit_under(s for f in held for s in f.sources)
    names = " and ".join(filter(None, (", ".join(passes[:-1]), passes[-1]))) if passes else "?"
    return (
        f"{len(held)} {'finding' if len(held) == 1 else 'findings'} withheld as unconfirmed: the {names} "
        f"{'pass was' if len(passes) == 1 else 'passes were'} disturbed or ran at another speed (each reason "
        "with its finding below)"
    )


EVIDENCE_LINES = 2
"""The first screen's lines of a top finding's evidence; the rest is under it in the findings list."""


def evidence_split(evidence: str, width: int, lines: int = EVIDENCE_LINES) -> tuple[str, str]:
    """A top finding's evidence as the first screen's part (at most `lines` lines at `width`, cut at a word) and
    the rest, which the findings list gives: together the evidence, each part said once."""
    limit = lines * max(width - 6, 20)
    if len(evidence) <= limit:
        return evidence, ""
    cut = evidence.rfind(" ", 0, limit - 2)
    cut = cut if cut > 0 else limit - 2
    return evidence[:cut] + " …", "… " + evidence[cut:].lstrip()


def _findings_grid(a: Analysis, width: int) -> RenderableType:
    found = top_findings(a)
    held = withheld_line(a)
    if not found:
        text = "top findings: none (no rule found a clear signal in this run's data)"
        return Text(f"top findings: none confirmed; {held}" if held else text)
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True, style="bold")
    grid.add_column()
    for f in found:
        grid.add_row(f"{f.rank}.", Text(f.title))
        grid.add_row("", Text(evidence_split(f.evidence, width)[0], style="dim"))
    parts: list[RenderableType] = [Text(f"top findings ({len(found)} of the ranked list below)", style="bold"), grid]
    if held:
        parts.append(Text(held, style="yellow"))
    return Group(*parts)


def summary_markdown(a: Analysis) -> str:
    speed = speed_line(a)
    lines = [f"## {title(a)}", ""]
    lines += [f"- **{k}**: {v}" for k, v in [*warning_lines(a), *run_lines(a), *([speed] if speed else [])]]
    lines.append("")
    spec = top_layers_spec(a)
    if spec is not None:
        lines.append(markdown(spec))
    lines += ["**top findings**", ""]
    lines += [f"{f.rank}. {f.title}: {f.evidence}" for f in top_findings(a)] or ["none"]
    held = withheld_line(a)
    lines += ["", held] if held else []
    lines.append("")
    lines += [f"**{line}**" if line.startswith("what to do") else line for line in advice_lines(a)]
    missing = not_measured_line(a)
    if missing:
        lines += ["", f"_{NOT_MEASURED}: {missing} (see the end)_"]
    lines += ["", f"**{NEXT}**", ""] + [f"- `{command}`: {what}" for command, what in next_lines(a)]
    return "\n".join(lines) + "\n"
