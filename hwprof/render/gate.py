"""The performance gate's verdict as a CI reads it: a terminal block, markdown for a job summary, JUnit XML
(one test case per gated figure) and JSON; and `hwprof compare BASE NEW --fail-above 5%` itself."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from hwprof.analysis.gate.judge import judge
from hwprof.analysis.gate.verdict import (
    FAIL,
    PASS,
    SHARE,
    TIMED,
    UNRESOLVED,
    Figure,
    GateError,
    GateOptions,
    Verdict,
)

if TYPE_CHECKING:
    from hwprof.analysis.run_analysis import Analysis
    from hwprof.render.tables import TableSpec

STYLE = {PASS: "green", FAIL: "bold red", UNRESOLVED: "yellow"}


@dataclass(frozen=True)
class GateOutputs:
    markdown: Path | None = None
    junit: Path | None = None
    json: Path | None = None


def moved(v: Verdict, threshold: float) -> list[Figure]:
    """Figures that failed or could not be resolved, and those that moved by more than the threshold either way
    (faster too), largest move first."""
    out = [f for f in v.figures if f.outcome != PASS or abs(f.ratio - 1) > threshold]
    return sorted(out, key=lambda f: (f.outcome != FAIL, f.outcome != UNRESOLVED, -abs(f.ratio - 1)))


def _interval(f: Figure) -> str:
    if f.why:
        return f"not judged: {f.why}"
    return f"x{f.low:.3f} - x{f.high:.3f}" if f.low is not None and f.high is not None else "exact"


def _value(f: Figure, x: float) -> str:
    if f.kind == SHARE:
        return f"{x:.2%} of forward"
    return f"{x:.3f} ms" if f.kind in TIMED else f"{x:,.0f}"


def render_verdict(v: Verdict, console: Console, threshold: float) -> None:
    """The verdict line first, then the figures that moved, the method and the notes."""
    console.print(f"[{STYLE[v.outcome]}]gate: {escape(v.line)}[/]", highlight=False, soft_wrap=True)
    for f in moved(v, threshold)[:15]:
        kernels = f"  kernel {f.kernels[0] or '?'} -> {f.kernels[1] or '?'}" if any(f.kernels) else ""
        console.print(
            f"  [{STYLE[f.outcome]}]{f.outcome:>12}[/] {escape(f.text)}{escape(kernels)}",
            highlight=False,
            soft_wrap=True,
        )
    console.print(f"[dim]method: {escape(v.method)}[/]", highlight=False, soft_wrap=True)
    for note in v.notes:
        console.print(f"[dim]note: {escape(note)}[/]", highlight=False, soft_wrap=True)


def verdict_markdown(v: Verdict, threshold: float) -> str:
    """A job summary: the verdict first, then the figures that moved (kernels before and after where the runs
    recorded them), then every gated figure, the method and the notes."""
    lines = [f"## hwprof gate: {v.outcome.upper()}", "", v.line, "", f"BASE `{v.base}` / NEW `{v.new}`", ""]
    kernels = any(any(f.kernels) for f in v.figures)  # a kernels pass in either run
    header = "| figure | outcome | BASE | NEW | ratio | interval |" + (" kernel BASE -> NEW |" if kernels else "")
    rule = "|---|---|---:|---:|---:|---|" + ("---|" if kernels else "")

    def row(f: Figure) -> str:
        name = f.name if f.kind in TIMED else f"{f.name} ({f.kind})"
        text = f"| {name} | {f.outcome} | {_value(f, f.base)} | {_value(f, f.new)} | x{f.ratio:.4f} | {_interval(f)} |"
        if kernels:
            text += f" `{f.kernels[0] or '?'}` -> `{f.kernels[1] or '?'}` |" if any(f.kernels) else " |"
        return text

    shown = moved(v, threshold)
    lines += ["### What moved", ""]
    lines += [header, rule, *map(row, shown)] if shown else ["Nothing moved by more than the threshold."]
    lines += ["", "<details><summary>Every gated figure</summary>", "", header, rule, *map(row, v.figures)]
    lines += ["", "</details>", "", f"Method: {v.method}", ""]
    lines += [f"- {n}" for n in v.notes]
    return "\n".join(lines).rstrip() + "\n"


def verdict_spec(v: Verdict) -> TableSpec:
    """The verdict as a table (the HTML page's): its line as the title, every gated figure, what moved first."""
    from hwprof.render.tables import Col, TableSpec

    cols = [Col("figure", "left"), Col("outcome", "left"), Col("BASE"), Col("NEW"), Col("ratio"), Col("interval")]
    shown = sorted(v.figures, key=lambda f: (f.outcome != FAIL, f.outcome != UNRESOLVED, -abs(f.ratio - 1)))
    rows = [
        [f.name if f.kind in TIMED else f"{f.name} ({f.kind})", f.outcome, _value(f, f.base), _value(f, f.new),
         f"x{f.ratio:.4f}", _interval(f)]
        for f in shown
    ]  # fmt: skip
    notes = [f"BASE {v.base} / NEW {v.new}", f"method: {v.method}", *v.notes]
    return TableSpec(f"gate: {v.outcome.upper()}: {v.line}", cols, rows, notes)


def verdict_junit(v: Verdict) -> str:
    """One test case per gated figure: a failure for each that failed, skipped for each not resolved (a
    failure where --unresolved fail made it one)."""
    suite = ET.Element("testsuite", name="hwprof gate", tests=str(len(v.figures)))
    failures = skipped = 0
    for f in v.figures:
        case = ET.SubElement(suite, "testcase", classname=f"hwprof.gate.{f.kind}", name=f.name)
        message = f"{f.text} ({f.outcome})"
        if f.outcome == FAIL or (f.outcome == UNRESOLVED and v.outcome == UNRESOLVED and v.exit_code):
            failures += 1
            ET.SubElement(case, "failure", message=message).text = f"{message}\nmethod: {v.method}"
        elif f.outcome == UNRESOLVED:
            skipped += 1
            ET.SubElement(case, "skipped", message=message)
        else:
            ET.SubElement(case, "system-out").text = f.text
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    suite.set("errors", "0")
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def output_files(v: Verdict, outputs: GateOutputs, threshold: float) -> dict[Path, str]:
    """The files asked for, as content (hwprof.rundir.writer writes them)."""
    files = {}
    if outputs.markdown is not None:
        files[outputs.markdown] = verdict_markdown(v, threshold)
    if outputs.junit is not None:
        files[outputs.junit] = verdict_junit(v)
    if outputs.json is not None:
        files[outputs.json] = json.dumps(v.to_dict(), indent=1) + "\n"
    return files


def gate_runs(run_dirs: Sequence[Path | str], opts: GateOptions) -> tuple[Verdict, list[Analysis], list[Path]]:
    """Load and analyse BASE and NEW, then judge NEW; GateError (one line) where the gate cannot be meaningful.
    Returns the verdict with the analyses and paths (for the comparison tables)."""
    from hwprof.analysis.gate.inputs import check_finished, gate_run
    from hwprof.analysis.run_analysis import analyse
    from hwprof.rundir.reader import RunData

    if len(run_dirs) != 2:
        raise GateError(f"--fail-above gates two runs, BASE and NEW (got {len(run_dirs)})")
    paths = [Path(p) for p in run_dirs]
    data = [RunData.load(p) for p in paths]
    for d, side in zip(data, ("BASE", "NEW"), strict=True):
        check_finished(d, side)
    analyses = [analyse(d) for d in data]
    base, new = (gate_run(d, a, s) for d, a, s in zip(data, analyses, ("BASE", "NEW"), strict=True))
    return judge(base, new, opts), analyses, paths


def compare_gate(
    run_dirs: Sequence[Path | str],
    opts: GateOptions,
    outputs: GateOutputs = GateOutputs(),
    console: Console | None = None,
    top: int = 15,
    format: str = "rich",
) -> Verdict:
    """`hwprof compare BASE NEW --fail-above ...`: the comparison tables as compare prints them, then the
    verdict (its line last on the terminal, where a CI log ends), and the files asked for."""
    from hwprof.analysis.compare import compare_analyses
    from hwprof.render.compare.views import comparison_markdown, render_comparison, specs

    console = console or Console()
    v, analyses, paths = gate_runs(run_dirs, opts)
    c = compare_analyses(analyses, paths)
    if format == "json":
        doc = {**c.to_dict(), "gate": v.to_dict()}
        (console.file or sys.stdout).write(json.dumps(doc, indent=1) + "\n")
    elif format == "markdown":
        (console.file or sys.stdout).write(comparison_markdown(c, top) + "\n" + verdict_markdown(v, opts.fail_above))
    elif format == "html":
        (console.file or sys.stdout).write(_page(v, specs(c, top)))
    else:
        render_comparison(c, console, top)
        render_verdict(v, console, opts.fail_above)
    write_gate_files(v, outputs, opts.fail_above)
    return v


def show_verdict(v: Verdict, opts: GateOptions, outputs: GateOutputs, console: Console, format: str) -> None:
    """A verdict with no comparison tables (the paired gate's): in the format asked for, and its files."""
    if format == "json":
        (console.file or sys.stdout).write(json.dumps({"gate": v.to_dict()}, indent=1) + "\n")
    elif format == "markdown":
        (console.file or sys.stdout).write(verdict_markdown(v, opts.fail_above))
    elif format == "html":
        (console.file or sys.stdout).write(_page(v, []))
    else:
        render_verdict(v, console, opts.fail_above)
    write_gate_files(v, outputs, opts.fail_above)


def _page(v: Verdict, tables: list[TableSpec]) -> str:
    from hwprof.render.html import render_tables_page

    return render_tables_page(f"hwprof gate: {v.outcome.upper()}", [verdict_spec(v), *tables])


def write_gate_files(v: Verdict, outputs: GateOutputs, threshold: float) -> None:
    from hwprof.rundir.writer import write_text_files

    write_text_files(output_files(v, outputs, threshold))
