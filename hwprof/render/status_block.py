"""What can or cannot be measured, with the reason and the fix: a table in a wide terminal, one fact
per line in a narrow one.

Reasons and fixes are sentences of 100 to 400 characters. In a five-column table on an 80-column
terminal each of the two text columns gets about 15 characters, and one reason takes 30 lines with
words cut in the middle. Below WIDE_FROM columns each collector gets a line of its own (name, pass,
status) and its reason and fix each get an indented line, as in the report's "not measured" block.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

WIDE_FROM = 120
"""At 120 columns the reason and fix columns get about 30 characters each: the narrowest that reads."""


@dataclass
class StatusRow:
    name: str
    """A collector's name; empty for a part of the collector above (e.g. events it cannot count)."""
    where: str
    """The pass it runs in; empty for a part."""
    status: str
    """Rich markup allowed."""
    reason: str = ""
    fix: str = ""


def status_renderable(title: str, rows: list[StatusRow], width: int) -> RenderableType:
    return _table(title, rows) if width >= WIDE_FROM else _lines(title, rows)


def _table(title: str, rows: list[StatusRow]) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("collector", "pass", "status", "reason", "fix"):
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(row.name, row.where, row.status, row.reason, row.fix)
    return table


def _lines(title: str, rows: list[StatusRow]) -> Group:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for row in rows:
        status = Text.from_markup(row.status)
        if row.name:
            head = Text(row.name, style="bold")
            status = Text.assemble(f"pass {row.where}: " if row.where else "", status)
        else:
            head = Text("  part")
        grid.add_row(head, status)
        for key, value in (("reason", row.reason), ("fix", row.fix)):
            if value:
                grid.add_row(Text(f"  {key}", style="dim"), value)
    return Group(Text(title, style="italic"), grid)
