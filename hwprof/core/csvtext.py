"""CSV text of flat rows, as the exports write it (layers.csv, advice.csv, sweep.csv, sweep_advice.csv)."""

from __future__ import annotations

import csv
import io
from typing import TypeAlias

CsvCell: TypeAlias = str | int | float | bool | None
"""One cell: a scalar (None: not measured, written as an empty cell)."""
CsvRow: TypeAlias = dict[str, CsvCell]
"""Column -> cell; a column the row lacks is written empty."""


def csv_text(columns: list[str], rows: list[CsvRow]) -> str:
    """The header and one line per row, in `columns` order ("\\n" line ends)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()
