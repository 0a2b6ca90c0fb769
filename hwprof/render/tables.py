"""Table specs rendered either as Rich tables that fit the console, or as Markdown.

A report table is data first (TableSpec: columns with a drop priority, rows of strings, notes),
so the terminal report and the Markdown document show the same thing. In a narrow terminal the
columns of highest priority number are dropped, one at a time, until the table's natural width
fits: numbers are never wrapped or cut.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from rich.cells import cell_len
from rich.console import Console, Group, JustifyMethod, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from hwprof.analysis.availability import AT_THE_END

MISSING = "-"
FIRST_COL_MAX = 32
"""The first column is kept whole up to this width (a longer key still folds rather than push every figure out)."""


@dataclass
class Col:
    header: str
    justify: JustifyMethod = "right"
    priority: int = 0
    """0: never dropped; otherwise the highest number is dropped first when the table is too wide."""
    max_width: int | None = None
    """Text columns only: longer cells end in an ellipsis (with `wrap`: the width the column is counted at
    when the table is fitted)."""
    wrap: bool = False
    """Text columns only: cells wrap onto more lines rather than being cut, so a narrow terminal squeezes
    this column before any other."""


@dataclass(frozen=True)
class Brief:
    """How much of a long table the terminal shows: its first `groups` groups (a group: a row with a first cell,
    and the rows under it with none: a layer and its kernels), at most `rows` rows of each."""

    groups: int
    rows: int = 1


def briefed(spec: TableSpec) -> tuple[TableSpec, int]:
    """The rows `spec.brief` keeps, and how many the terminal left out."""
    if spec.brief is None:
        return spec, 0
    groups: list[list[list[str]]] = []
    for row in spec.rows:
        if (row and row[0]) or not groups:
            groups.append([])
        groups[-1].append(row)
    kept = [group[: spec.brief.rows] for group in groups[: spec.brief.groups]]
    shown = sum(len(group) for group in kept)
    rows = [row for group in kept for row in group]
    title = spec.title + (f" (first {len(kept)})" if len(kept) < len(groups) else "")
    return replace(spec, title=title, rows=rows), len(spec.rows) - shown


@dataclass(frozen=True)
class LeftOut:
    """What the terminal left out of one table: columns that did not fit its width, rows past its brief."""

    columns: list[str]
    rows: int


@dataclass
class TableSpec:
    title: str
    cols: list[Col]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Lines under the table: what is unavailable and why, how the figures were obtained."""
    more: str = "see --format markdown or layers.csv"
    """Where the columns left out in a narrow terminal can be read."""
    key: str = ""
    """What the table is, for a renderer that treats one specially ("layers": the HTML page's whole, sortable
    layer table with an anchor per row)."""
    brief: Brief | None = None
    """The terminal's share of a long table (markdown and HTML show every row)."""
    methods: list[str] = field(default_factory=list)
    """How the figures were obtained (definitions, probes, scaling): under the table in markdown and HTML; the
    terminal report says once where to read them (a default yolov7 report at 80 columns spent 60 of its 448 lines
    on them)."""

    def without(self, index: int) -> TableSpec:
        return replace(
            self,
            cols=[c for i, c in enumerate(self.cols) if i != index],
            rows=[[v for i, v in enumerate(row) if i != index] for row in self.rows],
        )


def _rich_table(spec: TableSpec, fitting: bool = False) -> Table:
    """The Rich table; `fitting`: wrapping columns counted at their max_width, to decide what to drop."""
    table = Table(title=spec.title, title_justify="left", title_style="bold")
    for index, col in enumerate(spec.cols):
        if index == 0 and not col.wrap:  # a row's key (pass, layer, stage, change): whole up to FIRST_COL_MAX
            key = min(FIRST_COL_MAX, max([cell_len(col.header), *(cell_len(row[0]) for row in spec.rows)]))
            widest = max(key, col.max_width) if col.max_width is not None else None
            table.add_column(
                col.header, justify=col.justify, no_wrap=True, overflow="ellipsis", min_width=key, max_width=widest
            )
        elif col.wrap:
            width = col.max_width if fitting else None
            table.add_column(col.header, justify=col.justify, max_width=width, no_wrap=False, overflow="fold")
        elif col.max_width is not None:
            table.add_column(
                col.header,
                justify=col.justify,
                max_width=col.max_width,
                no_wrap=True,
                overflow="ellipsis",
            )
        else:
            table.add_column(col.header, justify=col.justify, no_wrap=True)
    for row in spec.rows:
        table.add_row(*(Text(cell) for cell in row))  # plain text: "[jit]" or "[libgomp]" is not markup
    return table


def natural_width(console: Console, table: Table) -> int:
    return Measurement.get(console, console.options.update(max_width=10_000), table).maximum


def fit(spec: TableSpec, console: Console) -> tuple[TableSpec, list[str]]:
    """Drop columns by priority until the table fits the console; returns the dropped headers."""
    dropped: list[str] = []
    while natural_width(console, _rich_table(spec, fitting=True)) > console.width:
        candidates = [(c.priority, i) for i, c in enumerate(spec.cols) if c.priority > 0]
        if not candidates:
            break
        _, index = max(candidates)
        dropped.append(spec.cols[index].header)
        spec = spec.without(index)
    return _narrowed(spec, console), dropped


TEXT_MIN = 12
"""A cut text column (max_width) keeps at least this many cells when a table is narrowed to fit."""


def _narrowed(spec: TableSpec, console: Console) -> TableSpec:
    """Where no column is left to drop, the widest cut text columns (not the first) give up cells, so that
    Rich never has to cut a number ("53.…") to fit the console."""
    while (excess := natural_width(console, _rich_table(spec, fitting=True)) - console.width) > 0:
        text = [(c.max_width or 0, i) for i, c in enumerate(spec.cols) if i and (c.max_width or 0) > TEXT_MIN]
        if not text:
            break
        width, index = max(text)
        cols = list(spec.cols)
        cols[index] = replace(cols[index], max_width=width - min(excess, width - TEXT_MIN))
        spec = replace(spec, cols=cols)
    return spec


def rich_render(spec: TableSpec, console: Console, left_out: list[LeftOut] | None = None) -> RenderableType:
    """The table fitted to the console, with its notes (not its methods: the report says where they are). `left_out`:
    a report's list of what its tables left out, said once at its end (left_out_line)."""
    spec, rows = briefed(spec)
    fitted, dropped = fit(spec, console)
    parts: list[RenderableType] = [_rich_table(fitted)]
    notes = list(spec.notes)
    if left_out is not None:
        left_out += [LeftOut(dropped, rows)] if dropped or rows else []
    else:
        notes += [f"{rows} rows left out here: `--format markdown` has every one"] if rows else []
        if dropped:
            notes.append(f"columns left out at this width ({console.width}): {', '.join(dropped)}; {spec.more}")
    for note in _unavailable_named_once(notes):
        parts.append(Text(note, style="dim"))
    return Group(*parts)


def _unavailable_named_once(notes: list[str]) -> list[str]:
    """A table's notes on metrics whose cause the report's end says (Missing.note: "CPI / IPC: unavailable: cycles,
    instructions could not be counted (perf_events) (why: ...)") as one line naming them, in the place of the
    first: the terminal report said one missing PMU in 14 lines (markdown keeps every note whole)."""
    labels = [note.split(": unavailable: ")[0] for note in notes if _points_to_the_end(note)]
    if not labels:
        return notes
    first = next(k for k, note in enumerate(notes) if _points_to_the_end(note))
    rest = [note for note in notes if not _points_to_the_end(note)]
    return [*rest[:first], f"unavailable: {', '.join(labels)} {AT_THE_END}", *rest[first:]]


def _points_to_the_end(note: str) -> bool:
    return note.endswith(AT_THE_END) and ": unavailable: " in note


def spec_renderables(
    spec: TableSpec, console: Console, note_style: str = "dim", left_out: list[LeftOut] | None = None
) -> list[RenderableType]:
    """The table, or for a spec with no columns (nothing measured) its title and notes saying why."""
    if spec.cols:
        return [rich_render(spec, console, left_out)]
    return [Text(spec.title, style="bold"), *(Text(n, style=note_style) for n in spec.notes)]


def left_out_line(left_out: list[LeftOut], width: int) -> str | None:
    """The one line a report says about what its tables left out in the terminal, or None: how much, not which
    (the list of every column named took ten lines at 80 columns)."""
    if not left_out:
        return None
    columns = [t for t in left_out if t.columns]
    rows = [t for t in left_out if t.rows]
    said = [f"{sum(len(t.columns) for t in columns)} columns of {len(columns)} tables at this width ({width})"]
    said += [f"{sum(t.rows for t in rows)} rows of {len(rows)} long tables"] if rows else []
    return f"left out here: {' and '.join(said)}; `--format markdown`, report.html and layers.csv have every one"


METHODS_LINE = "how each table's figures were obtained: under it in `--format markdown` and report.html"


def has_methods(specs: list[TableSpec]) -> bool:
    return any(spec.methods for spec in specs)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(spec: TableSpec) -> str:
    lines = [f"### {spec.title}", ""]
    if spec.cols:
        lines.append("| " + " | ".join(_md_cell(c.header) for c in spec.cols) + " |")
        lines.append("|" + "|".join("---:" if c.justify == "right" else "---" for c in spec.cols) + "|")
        for row in spec.rows:
            lines.append("| " + " | ".join(_md_cell(v) for v in row) + " |")
        lines.append("")
    for note in [*spec.notes, *spec.methods]:
        lines.append(f"> {note}")
        lines.append("")
    return "\n".join(lines)
