"""compare's instruction table: per-layer instruction counts of every run and their exact differences.

Under callgrind the counts are the same from run to run (to a few instructions per layer), so a model
change shows as an exact per-layer delta instead of drowning in timing noise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwprof.render.tables import MISSING, Col, TableSpec

if TYPE_CHECKING:
    from hwprof.analysis.compare import Comparison, Row

TOP_CHANGED = 15


def _count(value: float | None) -> str:
    return f"{value:,.0f}" if value is not None else MISSING


def instructions_spec(c: Comparison, letters: list[str]) -> TableSpec | None:
    rows_in = c.instructions
    if not rows_in:
        return None
    n = len(letters)
    cols = [Col("layer", "left", max_width=16)] + [Col(f"{x} instr") for x in letters]
    cols += [Col(f"{x}-A") for x in letters[1:]] + [Col(f"{x}/A", priority=1) for x in letters[1:]]

    def change(row: Row) -> float:
        base = row.values[0]
        return max((abs(v - base) for v in row.values[1:] if v is not None and base is not None), default=0.0)

    ranked = sorted(rows_in, key=change, reverse=True)[:TOP_CHANGED]
    rows = []
    for row in ranked:
        base = row.values[0]
        deltas = [_signed(v - base) if v is not None and base is not None else MISSING for v in row.values[1:]]
        ratios = [f"{r:.4f}" if r is not None else MISSING for r in row.ratios[1:]]
        rows.append([row.key, *(_count(v) for v in row.values), *deltas, *ratios])
    total = [sum(v or 0.0 for v in (r.values[k] for r in rows_in)) for k in range(n)]
    notes = [
        "instructions per measured iteration, self (exclusive) per layer, largest differences first; "
        f"all layers: {', '.join(f'{x} {_count(t)}' for x, t in zip(letters, total, strict=True))}",
        "source: " + "; ".join(f"{x} {s}" for x, s in zip(letters, c.instructions_source, strict=True)),
    ]
    return TableSpec("instructions per layer", cols, rows, notes)


def memory_spec(c: Comparison, letters: list[str]) -> TableSpec | None:
    """Bytes allocated per forward per layer in every run, run A's largest first."""
    rows_in = [r for r in c.memory or [] if r.values[0] is not None]
    if not rows_in:
        return None
    ranked = sorted(rows_in, key=lambda r: -(r.values[0] or 0.0))[:TOP_CHANGED]
    cols = [Col("layer", "left", max_width=16)] + [Col(f"{x} MB") for x in letters]
    cols += [Col(f"{x}/A") for x in letters[1:]]
    rows = [
        [
            r.key,
            *(f"{v / 1e6:.2f}" if v is not None else MISSING for v in r.values),
            *(f"{q:.2f}" if q is not None else MISSING for q in r.ratios[1:]),
        ]
        for r in ranked
    ]
    totals = [sum(v or 0.0 for v in (r.values[k] for r in rows_in)) for k in range(len(letters))]
    notes = [
        "bytes allocated per forward (torch's CPU allocator, torch_memory in the layers pass), a "
        "layer's range with its nested layers; all layers: "
        + ", ".join(f"{x} {t / 1e6:.2f} MB" for x, t in zip(letters, totals, strict=True))
    ]
    return TableSpec("memory per layer", cols, rows, notes)


def _signed(value: float) -> str:
    return f"{value:+,.0f}"
