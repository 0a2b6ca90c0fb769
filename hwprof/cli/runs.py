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
    p.add_argument("dir", type=Path, nargs="?", default=Path("results"), metavar="DIR", help="where to look")
    p.add_argument("--format", choices=FORMATS, default="rich", help="a table, JSON (one object per run) or CSV")
    p.add_argument("--model", help="only the runs of this model")
    p.add_argument("--status", help="only the runs in this status (complete, partial, interrupted, failed ...)")


def cmd_runs(args: argparse.Namespace, console: Console) -> int:
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
        console.print(f"no run directory under {root}" + (f" ({len(index.skipped)} skipped)" if index.skipped else ""))
        return
    table = Table(title=f"{len(index.rows)} runs under {root}, newest first", title_justify="left")
    for name, justify in (
        ("id", "left"), ("created", "left"), ("model", "left"), ("size", "right"), ("threads", "right"),
        ("runtime", "left"), ("status", "left"), ("forward p50 ms", "right"), ("FPS", "right"), ("health", "left"),
    ):  # fmt: skip
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in index.rows:
        table.add_row(*_cells(row))
    console.print(table)


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
