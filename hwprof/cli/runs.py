"""`hwprof runs [DIR]`: the run directories under results/ (or DIR) as one table (hwprof.analysis.run_index)."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import fields
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hwprof.analysis.run_index import RunIndex, RunRow, run_index

FORMATS = ("rich", "json", "csv")
COLUMNS = tuple(f.name for f in fields(RunRow) if f.name != "disturbed")
"""The CSV's columns: the row's fields, in order (why a run is disturbed is JSON's, a sentence)."""


def add_runs_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=Path, nargs="?", default=DEFAULT_DIR, metavar="DIR", help="where to look")
    p.add_argument("--format", choices=FORMATS, default="rich", help="a table, JSON (one object per run) or CSV")
    p.add_argument("--model", help="only the runs of this model")
    p.add_argument("--status", help="only the runs in this status (complete, partial, interrupted, failed ...)")


DEFAULT_DIR = Path("results")


def cmd_runs(args: argparse.Namespace, console: Console) -> int:
    if args.dir == DEFAULT_DIR and not args.dir.exists():  # before the first collect: nothing yet, not an error
        index = RunIndex()
    else:
        index = run_index(args.dir, args.model, args.status)
    if args.format == "json":
        sys.stdout.write(json.dumps({"runs": [r.to_json() for r in index.rows], "skipped": index.skipped}, indent=1))
        sys.stdout.write("\n")
    elif args.format == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(COLUMNS)
        for row in index.rows:
            writer.writerow(["" if v is None else v for v in (getattr(row, c) for c in COLUMNS)])
    else:
        _print_table(index, args.dir, console)
    for line in index.skipped:
        print(f"skipped {line}", file=sys.stderr)
    return 0


def _print_table(index: RunIndex, root: Path, console: Console) -> None:
    if not index.rows:
        skipped = f" ({len(index.skipped)} skipped)" if index.skipped else ""
        first = "" if root.exists() else ": `hwprof collect --model yolov7` writes the first there"
        console.print(f"no run directory under {root}{skipped}{first}", highlight=False, markup=False)
        return
    count = f"{len(index.rows)} run{'s' if len(index.rows) != 1 else ''}"
    rows = [_cells(row) for row in index.rows]
    shown = _fitting(rows, console.width)
    table = Table(title=f"{count} under {root}, newest first", title_justify="left")
    for k in shown:
        name, justify = HEADS[k]
        # the id is what a user copies into `hwprof report`: never cut (the columns that do not fit are left out)
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for cells in rows:
        table.add_row(*(cells[k] for k in shown))
    console.print(table)
    left_out = [HEADS[k][0] for k in range(len(HEADS)) if k not in shown]
    if left_out:
        console.print(f"left out at this width: {', '.join(left_out)} (--format csv has every column)", highlight=False)


HEADS = (
    ("id", "left"), ("created", "left"), ("model", "left"), ("size", "right"), ("threads", "right"),
    ("runtime", "left"), ("status", "left"), ("forward p50 ms", "right"), ("FPS", "right"), ("health", "left"),
)  # fmt: skip
"""The table's columns in their order: (title, justify)."""
PRIORITY = (0, 2, 7, 6, 8, 9, 3, 4, 5, 1)
"""Which columns a narrow terminal keeps first: the id (to copy), model, forward p50, status, FPS, health, size,
threads, runtime; created last (a default id holds the time)."""


def _fitting(rows: list[list[str]], width: int) -> list[int]:
    """The columns (indexes, in table order) that fit `width` whole, taken in PRIORITY order; the id always."""
    need = [max(len(HEADS[k][0]), *(len(r[k]) for r in rows)) + 3 for k in range(len(HEADS))]
    shown: list[int] = []
    used = 1
    for k in PRIORITY:
        if not shown or used + need[k] <= width:
            shown.append(k)
            used += need[k]
    return sorted(shown)


def _cells(row: RunRow) -> list[str]:
    size = f"{row.imgsz}" + (f" x{row.batch}" if row.batch and row.batch > 1 else "") if row.imgsz else "-"
    return [
        row.id,
        row.created.replace("T", " ")[:16],
        row.model,
        size,
        str(row.threads) if row.threads is not None else "-",
        f"{row.runtime}/{row.precision}" + ("" if row.device == "cpu" else f" {row.device}"),
        row.status,
        f"{row.forward_p50_ms:.2f}" if row.forward_p50_ms is not None else "-",
        f"{row.fps:.1f}" if row.fps is not None else "-",
        row.health,
    ]
