"""Nsight Compute's raw CSV (`ncu --csv --page raw`) read into rows with their NVTX layer.

The file may start with ncu's own `==PROF==`/`==WARNING==` lines; then a header row, a units row
and one row per kernel (kernel replay) or per NVTX range (application-range replay, "Kernel Name"
= "range"). Numbers carry thousands separators ("4,947,456"). The NVTX column lists the push/pop
stack as quoted `<domain>:<name>:...` items: `"<default domain>:measured:..." "<default domain>:layer 0 Conv:..."`.
"""

from __future__ import annotations

import csv
import gzip
import re
from dataclasses import dataclass, field
from pathlib import Path

NVTX_COLUMN_PREFIX = "thread Domain:Push/Pop_Range"
LAYER_RANGE = re.compile(r"^layer (\d+) (\S+)$")
_NVTX_ITEM = re.compile(r'"([^"]*)"')


@dataclass
class NcuRow:
    id: int
    name: str
    """Kernel name, or "range" for an application-range row."""
    nvtx: tuple[str, ...]
    metrics: dict[str, float] = field(default_factory=dict)
    text: dict[str, str] = field(default_factory=dict)
    """Columns that are not numbers (grid and block size, stream)."""

    @property
    def layer(self) -> tuple[int, str] | None:
        """(index, type) of the innermost `layer <i> <Type>` range around this row."""
        for name in reversed(self.nvtx):
            m = LAYER_RANGE.match(name)
            if m:
                return int(m.group(1)), m.group(2)
        return None

    def value(self, metric: str) -> float:
        return self.metrics.get(metric, 0.0)


@dataclass
class NcuReport:
    rows: list[NcuRow]
    units: dict[str, str]
    replay: str
    """"kernel" or "app-range" (every row a range)."""


def _nvtx_stack(cell: str) -> tuple[str, ...]:
    names = []
    for item in _NVTX_ITEM.findall(cell):
        _domain, _, rest = item.partition(":")
        names.append(rest.split(":none")[0] if ":none" in rest else rest)
    return tuple(names)


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> NcuReport:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise ValueError('no header row starting with "ID": not an ncu --csv --page raw file')
    table = list(csv.reader(lines[start:]))
    header, units = table[0], dict(zip(table[0], table[1], strict=False))
    nvtx_col = next((h for h in header if h.startswith(NVTX_COLUMN_PREFIX)), None)
    rows = []
    for raw in table[2:]:
        if len(raw) != len(header):
            continue
        cells = dict(zip(header, raw, strict=True))
        metrics: dict[str, float] = {}
        text_cells: dict[str, str] = {}
        for key in header:
            if "__" in key:
                num = _number(cells[key])
                if num is not None:
                    metrics[key] = num
        for key in ("Block Size", "Grid Size", "Stream"):
            if key in cells:
                text_cells[key] = cells[key]
        rows.append(
            NcuRow(
                int(cells["ID"]),
                cells["Kernel Name"],
                _nvtx_stack(cells[nvtx_col]) if nvtx_col else (),
                metrics,
                text_cells,
            )
        )
    replay = "app-range" if rows and all(r.name == "range" for r in rows) else "kernel"
    return NcuReport(rows, units, replay)


def load_ncu_csv(path: Path) -> NcuReport:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        return parse_ncu_csv(handle.read())
