"""Nsight Compute's raw CSV (`ncu --csv --page raw`) read into rows with their NVTX layer.

The file may start with ncu's own `==PROF==`/`==WARNING==` lines; then a header row, a units row
and one row per kernel (kernel replay) or per NVTX range (application-range replay, "Kernel Name"
= "range"). Values are converted to base units by the units row (unit_factor). Numbers carry
thousands separators ("4,947,456"). The NVTX column lists the push/pop stack as quoted `<domain>:<name>:...` items:
`"<default domain>:measured:..." "<default domain>:layer 0 Conv:..."`.
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


_TIME_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
_PREFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def unit_factor(unit: str) -> float:
    """What a value in `unit` is multiplied by for hwprof's base units (bytes, instructions, cycles;
    durations in ns). `ncu --import --csv` prints auto-scaled units by default ("Mbyte", "us", "ms"
    live on an H100) where the recordings had base units ("byte", "ns"); ncu's prefixes are decimal
    (its 9.8304 Mbyte is 9,830,400 bytes)."""
    head = unit.split("/", 1)[0]
    if head in _TIME_NS:
        return _TIME_NS[head]
    if len(head) > 1 and head[0] in _PREFIX and head[1:].isalpha() and head[1:].islower():
        return _PREFIX[head[0]]
    return 1.0


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
    factors = {h: unit_factor(u) for h, u in units.items() if "__" in h}
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
                    metrics[key] = num * factors.get(key, 1.0)
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
