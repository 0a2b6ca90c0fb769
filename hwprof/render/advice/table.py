"""The advice table (advice.json): each candidate change measured against the run, in display order.

A TableSpec like the report's other tables, so the terminal, the Markdown and the HTML page show the same rows.
Every cell is at most two short lines, so that a row reads whole in an 80-column terminal: the change and its
note's number (and why it is not advice, as a label), the forward and end-to-end speed-ups with their spreads,
the output check's verdict, the first layers that moved, the finding it answers. Everything else about a row
(how to make the change, the times before and after, the method, the setup and when it pays, the output check's
figures, every layer that moved, why it is not advice) is in the row's numbered note under the table. Ranked
advice is numbered 1, 2, ...; a row whose output changed is marked and never numbered.
"""

from __future__ import annotations

import math
import textwrap

from rich.console import Console, RenderableType
from rich.text import Text

from hwprof.analysis.advice.output import MATCH_WORDS
from hwprof.analysis.advice.race import race_text
from hwprof.analysis.advice.speedup import METHOD_TEXT, RECORDED, RECORDED_NOISE, Speedup
from hwprof.analysis.advice.table import (
    CHANGED_OUTPUT,
    FAILED,
    NOT_RUN,
    Advice,
    AdviceRow,
    OutputCheck,
)
from hwprof.analysis.paired_cost import PAIRED, PASS_LEVEL
from hwprof.render.fmt import ms
from hwprof.render.tables import MISSING, Col, TableSpec, markdown, spec_renderables
from hwprof.rundir.names import ADVICE_CSV
from hwprof.schema.runtime_checks import BLIND

MORE = f"see --format markdown or {ADVICE_CSV}"
METHOD_SHORT = {PAIRED: "paired", PASS_LEVEL: "pass-level est.", RECORDED: "recorded"}
CHANGED_MARK = "CHANGED OUTPUT"
WHY_CELL = 16
"""A why-not longer than this goes to the row's note under the table; the change cell keeps its label."""
ANSWER_CELL = 18
"""The finding a row answers, where it is this short; else its label, the whole in the row's note."""
CHANGED_RANK = "x"
"""The '#' cell of a changed-output row: marked, never a rank."""


def ranks(advice: Advice) -> dict[str, int]:
    """Row key -> rank (1 = the largest measured forward speed-up) for the rows that are advice."""
    return {r.key: i for i, r in enumerate((r for r in advice.ordered() if r.ranked), start=1)}


def changed(row: AdviceRow) -> bool:
    return row.status == CHANGED_OUTPUT or (row.output is not None and not row.output.within_tolerance)


def speedup_text(s: Speedup, sep: str = "\n", label: str = "") -> str:
    """ "1.27x", then its spread (q1-q3 of the blocks; low-high where there are no quartiles)."""
    return f"{label}{s.ratio:.2f}x{sep}{s.spread_text()}"


def _forward_ms(row: AdviceRow, sep: str) -> str:
    f = row.forward
    if f is None or f.before_ms is None or f.after_ms is None:
        return ""
    return f"{ms(f.before_ms)}->{ms(f.after_ms)} ms" + (f"{sep}per image" if row.per_image else "")


def speed_cell(row: AdviceRow) -> list[str]:
    """The speed-up cell: forward and end to end, each with its spread; a not-resolved row says so and how it
    was measured (its measured ratio is in its note: it is no speed-up)."""
    f, e2e = row.forward, row.end_to_end
    if f is not None and not row.resolved:
        return ["not resolved", f"({METHOD_SHORT.get(f.method, f.method)})"]
    if f is None and e2e is None:
        return [MISSING]
    return [speedup_text(f, " ", "fwd ") if f else "fwd " + MISSING, speedup_text(e2e, " ", "e2e ") if e2e else ""]


def speed_detail(row: AdviceRow) -> str:
    """For the row's note: forward ms before->after, the method, the stage that took an end-to-end difference,
    and the setup time with the inferences after which it pays (a cost beside the gain)."""
    f, e2e = row.forward, row.end_to_end
    parts = []
    if f is not None and row.resolved:
        method = METHOD_SHORT.get(f.method, f.method)
        parts.append(f"fwd {_forward_ms(row, ' ')}, {method}" if _forward_ms(row, " ") else method)
    elif f is None and e2e is not None:
        parts.append(METHOD_SHORT.get(e2e.method, e2e.method))
    if row.stages_moved is not None and row.resolved:
        parts.append(f"e2e: {row.stages_moved.short()}")
    setup = _setup(row)
    if setup:
        parts.append(f"setup {' '.join(setup)}")
    return "; ".join(parts)


def _setup(row: AdviceRow) -> list[str]:
    if row.setup_s is None:
        return []
    pays = row.breakeven_inferences
    if pays is not None:
        after = f"pays after {math.ceil(pays):,}"
    elif row.forward is not None and row.forward.before_ms is not None and row.forward.after_ms is not None:
        after = "never pays"
    else:
        after = "payback unknown"
    return [f"{row.setup_what or 'setup'} {row.setup_s:.1f} s,", after]


def output_cell(check: OutputCheck | None, marked: bool) -> list[str]:
    """The output check's cell: its verdict, then the detections (a trained model) or the head's error."""
    if check is None:
        return [CHANGED_MARK if marked else MISSING]
    if check.decides:
        first = CHANGED_MARK if marked else f"{check.matched} of {check.detections_reference} det."
        return [first, f"det. {check.detections_reference}->{check.detections}" if marked else "boxes kept"]
    if check.verdict == BLIND:
        return [CHANGED_MARK if marked else BLIND, "head ignores input"]
    verdict = CHANGED_MARK if marked else (check.verdict or ("undecided" if check.undecided else MISSING))
    if check.head_max_abs == 0:
        return [verdict, "bit-identical"]
    return [verdict, f"head {100 * check.head_relative:.2g}% rng"]


def output_text(check: OutputCheck | None, marked: bool, sep: str = "\n") -> str:
    """The output check's cell: on a trained model the detections' verdict first (pass with the count matched,
    or the change), the head's error beside it; elsewhere the head's verdict, the detections, and why they
    cannot decide."""
    if check is None:
        return CHANGED_MARK if marked else MISSING
    lines = [CHANGED_MARK] if marked else []
    if check.decides:
        lines.append(check.detections_text())
        if check.score_max_abs is not None:
            lines.append(f"score max|d| {check.score_max_abs:.2g}")
    lines += _head_lines(check)
    if not check.decides:
        lines.append(f"det. {check.detections_reference}->{check.detections}, {check.matched} matched")
        if check.undecided:
            lines.append("undecided: " + ("random weights" if check.trained is False else "no detections"))
    return sep.join(lines)


def _head_lines(check: OutputCheck) -> list[str]:
    if check.verdict == BLIND:  # a check that could not have failed is never shown as a pass
        return [f"BLIND: head does not depend on its input (another input moves it {check.head_sensitivity:.2g})"]
    if check.head_max_abs == 0:  # an environment change (malloc, OMP) runs the same code on the same input
        return ["head bit-identical", "(same code, same output)"]
    lines = [f"head max|d| {100 * check.head_relative:.2g}% of range"]
    if check.head_sensitivity:
        share = 100 * check.head_max_abs / check.head_sensitivity
        lines.append(f"{check.verdict}: {share:.2g}% of input sens.")
    return lines


def _memory(row: AdviceRow) -> list[str]:
    """The process's page faults per iteration and resident memory, before -> after (an allocator's figures)."""
    out = [f"faults/iter {row.minor_faults[0]:,.0f}->{row.minor_faults[1]:,.0f}"] if row.minor_faults else []
    if row.rss_bytes:
        out.append(f"RSS MB {row.rss_bytes[0] / 1e6:,.0f}->{row.rss_bytes[1] / 1e6:,.0f}")
    return out


def _layers(row: AdviceRow, sep: str) -> str:
    faults = _memory(row)
    if row.layers:
        return sep.join([f"{d.index} {d.type} {ms(d.before_ms)}->{ms(d.after_ms)}" for d in row.layers] + faults)
    return sep.join([row.layers_note or MISSING, *faults])


def layers_cell(row: AdviceRow) -> list[str]:
    """The first two layers that moved, or the first and the page faults per iteration (an allocator's figure);
    every layer in the row's note."""
    if row.layers:
        lines = [f"{d.index} {d.type} {ms(d.before_ms)}->{ms(d.after_ms)}" for d in row.layers[:2]]
    else:
        lines = [_short(row.layers_note, ANSWER_CELL) if row.layers_note else MISSING]
    if row.minor_faults or row.rss_bytes:
        lines = [lines[0], *_memory(row)]
    return lines


def _short(text: str, width: int) -> str:
    """A cell's text where it fits, else its label (the words before the first colon) where that fits, else its
    first words and an ellipsis: the whole text is in the row's note."""
    if len(text) <= width:
        return text
    label = text.split(":")[0]
    if len(label) <= width:
        return label
    return textwrap.shorten(label, width, placeholder="…")


def _why_not(row: AdviceRow) -> str:
    """Why a row is not advice, in the change cell ("" for ranked rows)."""
    if row.ranked:
        return ""
    if row.status in (NOT_RUN, FAILED):
        return f"{row.status}: {row.reason}" if row.reason else row.status
    if changed(row):
        return f"{CHANGED_MARK}: {row.reason}" if row.reason else CHANGED_MARK
    if row.disturbed:
        return f"not resolved: {row.disturbed}"
    f = row.forward
    if f is None:
        return "not advice: no forward time measured" + (f" ({row.reason})" if row.reason else "")
    if not f.resolved and f.method == RECORDED:
        return f"not advice: within the recordings' run-to-run noise ({RECORDED_NOISE:.1f}x either way)"
    if not f.resolved:
        return f"not advice: spread {f.spread_text()} includes 1.00"
    return "not advice: slower"


def _rank_cell(row: AdviceRow, rank: dict[str, int]) -> str:
    if row.key in rank:
        return str(rank[row.key])
    return CHANGED_RANK if changed(row) else ""


def row_cells(row: AdviceRow, rank: dict[str, int], sep: str = "\n", note: int = 0) -> list[str]:
    """note: the number of the row's note under the table (row_notes); 0: none."""
    name = f"{row.key} [{note}]" if note else row.key
    why = _why_not(row)
    return [
        _rank_cell(row, rank),
        sep.join(x for x in (name, _short(why, WHY_CELL)) if x),
        sep.join(x for x in speed_cell(row) if x),
        sep.join(output_cell(row.output, changed(row))),
        sep.join(layers_cell(row)),
        _short(row.finding, ANSWER_CELL) if row.finding else MISSING,
    ]


COLS = [
    Col("#"),
    Col("change", "left", max_width=WHY_CELL + 6),
    Col("speed-up", "left"),
    Col("output check", "left"),
    Col("layers moved (ms)", "left", priority=2),
    Col("answers", "left", max_width=ANSWER_CELL, priority=1),
]


def heading(advice: Advice) -> str:
    """The line the report leads with: what to do, or that nothing measured faster."""
    top = next((r for r in advice.ordered() if r.ranked), None)
    if top is None or top.forward is None:
        measured = sum(1 for r in advice.rows if r.forward is not None)
        resolved = sum(1 for r in advice.rows if r.resolved)
        return (
            f"what to do: no change measured faster ({resolved} resolved of {measured} measured, "
            f"{len(advice.rows)} candidates)"
        )
    f = top.forward
    times = f", {_forward_ms(top, ' ')}" if f.before_ms is not None and f.after_ms is not None else ""
    method = METHOD_SHORT.get(f.method, f.method)
    return (
        f"what to do: {top.key} ({top.how}): forward {f.ratio:.2f}x faster (spread {f.spread_text()}, {method}{times})"
    )


def notes(advice: Advice) -> list[str]:
    """Under the table: the methods used, the advice's own notes, where it comes from and its wall time."""
    used = {s.method for r in advice.rows for s in (r.forward, r.end_to_end) if s is not None}
    out = [METHOD_TEXT.get(m, m) for m in METHOD_TEXT if m in used]
    out += [m for m in sorted(used) if m not in METHOD_TEXT]
    out.append(
        "speed-up = baseline time / variant time (above 1: faster), forward (fwd) and end to end (e2e), each with "
        "its spread; output check: the variant against the fp32 reference (rng: the head's max|d| over its range; "
        "det.: detections after NMS reference->variant); in each row's note: ms = forward p50 before->after, "
        "setup (compile, export) pays after N inferences = setup time / forward time saved"
    )
    checks = [r.output for r in advice.rows if r.output is not None]
    if any(c.decides for c in checks):
        images = max(c.images or 0 for c in checks)
        out.append(
            f"the detections decide the output check (a trained model): the variant's boxes on the run's {images} "
            f"image(s) against the fp32 reference's, matched one to one ({MATCH_WORDS}); a lost, added, relabelled "
            "or rescored box reads CHANGED OUTPUT, never ranked, whatever its speed"
        )
    out += advice.notes
    out += [f"{r.key}: {r.pairing_note}" for r in advice.ordered() if r.pairing_note]
    out += [f"{r.key}: {race_text(r.race)}" for r in advice.ordered() if r.race]
    out += [f"{r.key} (a combination) ran: {r.combination}" for r in advice.ordered() if r.combination]
    out += [f"{r.key}: {moved.text()}" for r in advice.ordered() if (moved := r.stages_moved) is not None]
    took = f"advice took {advice.wall_s:.1f} s"
    out.append(f"source: {advice.source}; baseline {advice.baseline} on {advice.device}; {took}")
    return out


def advice_spec(advice: Advice, sep: str = "\n") -> TableSpec:
    """sep: what stacks a cell's lines ("\\n" in the terminal, "; " in Markdown)."""
    rank = ranks(advice)
    ordered = advice.ordered()
    numbered = row_notes(ordered)
    rows = [row_cells(r, rank, sep, numbered[r.key][0] if r.key in numbered else 0) for r in ordered]
    title = (
        f"advice: {len(rank)} of {len(advice.rows)} candidate changes measured faster "
        f"(# = rank; {CHANGED_RANK} = changed output, never ranked)"
    )
    return TableSpec(title, list(COLS), rows, [text for _, text in numbered.values()] + notes(advice), MORE)


def row_notes(rows: list[AdviceRow]) -> dict[str, tuple[int, str]]:
    """Row key -> (number, its note under the table): how to make the change, why it is not advice, its measured
    figures beyond the cell (times, method, setup), the output check whole, every layer that moved, and the
    finding it answers where the cell holds its label."""
    out: dict[str, tuple[int, str]] = {}
    for r in rows:
        why = _why_not(r)
        output = output_text(r.output, False, ", ") if r.output is not None else ""
        layers = (
            _layers(r, ", ")
            if (r.layers and len(r.layers) > 2) or r.layers_note or r.minor_faults or r.rss_bytes
            else ""
        )
        parts = [
            r.how,
            why if len(why) > WHY_CELL else "",
            measured_text(r),
            speed_detail(r),
            f"output: {output}" if output else "",
            f"layers: {layers}" if layers else "",
            f"answers {r.finding}" if r.finding and len(r.finding) > ANSWER_CELL else "",
        ]
        if any(parts):
            n = len(out) + 1
            out[r.key] = (n, f"[{n}] {r.key}: {'; '.join(x for x in parts if x)}")
    return out


def measured_text(row: AdviceRow) -> str:
    """A not-resolved row's measured figures, for its note: the ratio is what was measured, not a speed-up."""
    f = row.forward
    if f is None or row.resolved:
        return ""
    e2e = f", e2e {row.end_to_end.ratio:.2f}x" if row.end_to_end is not None else ""
    return f"measured ratio (not resolved) fwd {f.ratio:.2f}x, spread {f.spread_text()}{e2e}, {_forward_ms(row, ' ')}"


def advice_renderables(advice: Advice, console: Console) -> list[RenderableType]:
    """The report's advice section: the line that says what to do, then the table and its notes."""
    return [Text(heading(advice), style="bold"), *spec_renderables(advice_spec(advice), console)]


def advice_markdown(advice: Advice) -> str:
    return f"**{heading(advice)}**\n\n{markdown(advice_spec(advice, '; '))}"
