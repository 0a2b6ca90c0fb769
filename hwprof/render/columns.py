"""A table's columns and its rows from one description.

A report table shows a column only where the run measured its figure. Written as a header list and a
row list, each conditional column's test is written twice (once for the header, once for the cell) and
the two must be kept in step by hand. Here a column is one Column: its header and layout (Col), whether
the table shows it (`present`, asked once per table of what decides it) and its cell for a row; the
header list and every row come from the same list, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from hwprof.render.tables import Col

C = TypeVar("C")
"""What decides which columns a table shows (the analysis, or flags measured over its rows)."""
R = TypeVar("R")
"""The source of one row."""


def always(_: object) -> bool:
    """The `present` of a column every table shows."""
    return True


@dataclass(frozen=True)
class Column(Generic[C, R]):
    col: Col
    cell: Callable[[R], str]
    present: Callable[[C], bool] = always


@dataclass(frozen=True)
class GroupRow:
    """A row of a table grouped by its first columns (a layer's or a stage's kernels): the group's own cells are
    shown on its first row only."""

    first: bool

    def group_cell(self, text: str) -> str:
        return text if self.first else ""


def build(columns: Sequence[Column[C, R]], shown_for: C, rows: Iterable[R]) -> tuple[list[Col], list[list[str]]]:
    """The headers of the columns `shown_for` shows, and each row's cells in the same columns."""
    shown = [c for c in columns if c.present(shown_for)]
    return [c.col for c in shown], [[c.cell(row) for c in shown] for row in rows]


@dataclass(frozen=True)
class Ranked(Generic[R]):
    """A row of a ranked table, with the running sum of the shares down to it (the "cum" column)."""

    item: R
    cum: float


def with_cum(items: Iterable[R], share: Callable[[R], float | None]) -> list[Ranked[R]]:
    """Each item with the sum of the shares down to it (a share not measured counts 0)."""
    cum, out = 0.0, []
    for item in items:
        cum += share(item) or 0.0
        out.append(Ranked(item, cum))
    return out
