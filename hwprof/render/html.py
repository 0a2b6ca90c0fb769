"""The report as one self-contained HTML page (report.html): the terminal report's sections, rendered from
the same TableSpecs (report.specs) through a Jinja2 template with autoescape on.

Self-contained: styles and the sorting script are inline and the plots are PNG data URIs, so the page
makes no request when opened and can be sent as one file. Every value taken from the run (a model
or image name can hold `<script>`) reaches the page escaped by the template engine, never by hand.
The layer table is whole (every layer, not the terminal's top N) and sortable; findings link to the
rows of the layers they name.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jinja2 import Environment, PackageLoader, select_autoescape

from hwprof.analysis.finding import labelled
from hwprof.render.advice.table import advice_spec, heading
from hwprof.render.report import header_lines, specs, unavailable_lines
from hwprof.render.summary import (
    advice_lines,
    next_lines,
    not_measured_line,
    run_lines,
    speed_line,
    title,
    top_findings,
    top_layers_spec,
    warning_lines,
)
from hwprof.rundir.names import TRACE_NAME

if TYPE_CHECKING:
    from pathlib import Path

    from hwprof.analysis.run_analysis import Analysis
    from hwprof.render.tables import TableSpec

TEMPLATE = "report.html.j2"
TABLES_TEMPLATE = "tables.html.j2"
LAYER_ANCHOR = "layer-{}"


@dataclass
class HtmlTable:
    """A TableSpec as the template draws it: `anchors` gives each row its id (the layer rows)."""

    title: str
    headers: list[str]
    numeric: list[bool]
    rows: list[list[str]]
    notes: list[str]
    sortable: bool = False
    anchors: list[str] = field(default_factory=list)


@dataclass
class HtmlFinding:
    label: str
    title: str
    evidence: str
    caveat: bool
    layers: list[tuple[str, str]]
    """(layer index, anchor of its row) for each layer the finding names."""


def html_table(spec: TableSpec, sortable: bool = False) -> HtmlTable:
    """The HTML renderer of a TableSpec: every column (a page scrolls sideways; nothing is dropped)."""
    anchors: list[str] = []
    if sortable and spec.cols and spec.cols[0].header == "#":
        anchors = [LAYER_ANCHOR.format(row[0]) for row in spec.rows]
    return HtmlTable(
        title=spec.title,
        headers=[c.header for c in spec.cols],
        numeric=[c.justify == "right" for c in spec.cols],
        rows=spec.rows,
        notes=[*spec.notes, *spec.methods],
        sortable=sortable,
        anchors=anchors,
    )


def _links(layers: tuple[int, ...], layered: set[str]) -> list[tuple[str, str]]:
    """(index, anchor of its row in the layer table, "" where the table has no such row) per layer named."""
    anchors = [(str(i), LAYER_ANCHOR.format(i)) for i in sorted(set(layers))]
    return [(i, anchor if anchor in layered else "") for i, anchor in anchors]


def _findings(a: Analysis, layered: set[str]) -> list[HtmlFinding]:
    return [
        HtmlFinding(
            label=label,
            title=f.title,
            evidence=f.evidence + (f"; unconfirmed: {f.unconfirmed}" if f.unconfirmed else ""),
            caveat=not f.ranked,
            layers=_links(f.layers, layered),
        )
        for label, f in labelled(a.findings)
    ]


def _tables(a: Analysis) -> list[HtmlTable]:
    """The report's tables in its order; the layer table (key "layers") whole and sortable."""
    every = max(1, len(a.layers.layers))
    return [html_table(s, sortable=s.key == "layers") for s in specs(a, every)]


def _plots(plots: dict[str, bytes]) -> list[tuple[str, str]]:
    return [(name, "data:image/png;base64," + base64.b64encode(png).decode("ascii")) for name, png in plots.items()]


def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("hwprof.render", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_tables_page(
    title: str,
    tables: list[TableSpec],
    lines: list[tuple[str, str]] | None = None,
    plots: dict[str, bytes] | None = None,
) -> str:
    """A page of tables (compare, sweep): the terminal's TableSpecs with every column, `lines` above them."""
    return (
        _environment()
        .get_template(TABLES_TEMPLATE)
        .render(title=title, lines=lines or [], tables=[html_table(t) for t in tables], plots=_plots(plots or {}))
    )


def render_html(a: Analysis, plots: dict[str, bytes], run_dir: Path | None = None) -> str:
    """report.html's text. plots: file name -> PNG bytes (hwprof.render.plots), embedded as data URIs."""
    env = _environment()
    tables = _tables(a)
    layered = {anchor for t in tables for anchor in t.anchors}
    trace = run_dir / TRACE_NAME if run_dir is not None else None
    speed = speed_line(a)
    top = top_layers_spec(a)
    return env.get_template(TEMPLATE).render(
        title=f"hwprof report: {a.doc.model.name or '?'}, run {a.doc.run_id or '?'}",
        summary_title=title(a),
        summary_lines=[*warning_lines(a), *run_lines(a), *([speed] if speed else [])],
        summary_table=html_table(top) if top is not None else None,
        summary_findings=[(f, _links(f.layers, layered)) for f in top_findings(a)],
        summary_advice=advice_lines(a),
        summary_missing=not_measured_line(a),
        summary_next=next_lines(a),
        header=header_lines(a),
        unavailable=unavailable_lines(a),
        advice_heading=heading(a.advice) if a.advice is not None else None,
        advice=html_table(advice_spec(a.advice)) if a.advice is not None else None,
        tables=tables,
        findings=_findings(a, layered),
        plots=_plots(plots),
        trace_name=TRACE_NAME,
        trace_exists=trace is not None and trace.is_file(),
    )
