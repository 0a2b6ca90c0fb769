"""advice.csv's rows (render/export.py writes them beside layers.csv): one row per AdviceRow of advice.json,
in display order, flat columns for spreadsheets.

An empty cell is a figure that was not measured (a not-run row has only its change, status and reason).
Speed-ups: forward_* and end_to_end_* (method, ratio, q1, q3, low, high, blocks, before_ms, after_ms,
resolved); the output check's figures; the three layers that moved most as layer_<n>_{index,type,
before_ms,after_ms}; why the paired figure was not used (pairing_note), why a pass-level figure is not
resolved (disturbed), and the stage that moved where end to end parts from the forward (stages_note).
"""

from __future__ import annotations

from hwprof.analysis.advice.speedup import Speedup
from hwprof.analysis.advice.table import Advice, AdviceRow
from hwprof.core.csvtext import CsvRow
from hwprof.render.advice.table import ranks

SPEEDUP_FIELDS = ("method", "ratio", "q1", "q3", "low", "high", "blocks", "before_ms", "after_ms", "resolved")
OUTPUT_FIELDS = (
    "head_max_abs",
    "head_range",
    "head_relative",
    "candidates_reference",
    "candidates",
    "detections_reference",
    "detections",
    "matched",
    "unmatched_share",
    "within_tolerance",
    "head_sensitivity",
    "raw_max_abs",
    "raw_sqnr_db",
    "verdict",
)
LAYER_FIELDS = ("index", "type", "before_ms", "after_ms")
LAYERS = 3
COLUMNS = (
    "rank",
    "key",
    "change",
    "how",
    "finding",
    "status",
    "reason",
    "ranked",
    *(f"forward_{f}" for f in SPEEDUP_FIELDS),
    *(f"end_to_end_{f}" for f in SPEEDUP_FIELDS),
    "per_image",
    "setup_s",
    "setup_what",
    "breakeven_inferences",
    *(f"output_{f}" for f in OUTPUT_FIELDS),
    *(f"layer_{n}_{f}" for n in range(1, LAYERS + 1) for f in LAYER_FIELDS),
    "layers_note",
    "variant_run",
    "pairing_note",
    "race",
    "disturbed",
    "stages_note",
)


def _speedup(prefix: str, row: AdviceRow, s: Speedup | None) -> CsvRow:
    if s is None:
        return {}
    d = row.speedup_dict(s)
    return {f"{prefix}_{f}": d[f] for f in SPEEDUP_FIELDS}


def csv_row(row: AdviceRow, rank: int | None) -> CsvRow:
    out: CsvRow = {
        "rank": rank,
        "key": row.key,
        "change": row.change,
        "how": row.how,
        "finding": row.finding,
        "status": row.status,
        "reason": row.reason,
        "ranked": row.ranked,
        "per_image": row.per_image,
        "setup_s": row.setup_s,
        "setup_what": row.setup_what,
        "breakeven_inferences": row.breakeven_inferences,
        "layers_note": row.layers_note,
        "variant_run": row.variant_run,
        "pairing_note": row.pairing_note,
        "race": row.race,
        "disturbed": row.disturbed,
        "stages_note": moved.text() if (moved := row.stages_moved) else "",
    }
    out |= _speedup("forward", row, row.forward) | _speedup("end_to_end", row, row.end_to_end)
    if row.output is not None:
        d = row.output.to_dict()
        out |= {f"output_{f}": d.get(f) for f in OUTPUT_FIELDS}  # verdict: absent where not measured
    for n, delta in enumerate(row.layers[:LAYERS], start=1):
        out |= {f"layer_{n}_{f}": getattr(delta, f) for f in LAYER_FIELDS}
    return out


def advice_csv_rows(advice: Advice) -> list[CsvRow]:
    """One dict per row in display order, raw values (None: not measured); render/export.py writes them."""
    rank = ranks(advice)
    return [csv_row(r, rank.get(r.key)) for r in advice.ordered()]
