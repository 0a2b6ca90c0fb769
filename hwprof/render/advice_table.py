"""The advice table (advice.json): each candidate change measured against the run, in display order.

A TableSpec like the report's other tables, so the terminal and the Markdown show the same rows. The
cells are short lines stacked in one cell (figure, spread, method) rather than more columns, so that the
speed-up and its spread stay whole in an 80-column terminal; the text columns (the change, the output
check, the layers, the finding) wrap. Ranked advice is numbered 1, 2, ...; a row whose output changed is
marked and never numbered; a row that did not run says why in its change cell. The change cell is the row's key
and the number of its note under the table, which says how to make the change and, where it is long, why the row
is not advice (a program's command, or the processes that disturbed a row, would take tens of lines in a
16-column cell); a short why-not stays in the cell, a long one leaves its label there.
"""

from __future__ import annotations

import math
import textwrap

from rich.console import Console, RenderableType
from rich.text import Text

from hwprof.analysis.advice import (
    CHANGED_OUTPUT,
    FAILED,
    METHOD_TEXT,
    NOT_RUN,
    RECORDED,
    RECORDED_NOISE,
    Advice,
    AdviceRow,
    OutputCheck,
    Speedup,
)
from hwprof.analysis.advice_output import MATCH_WORDS
from hwprof.analysis.paired_cost import PAIRED, PASS_LEVEL
from hwprof.render.fmt import ms
from hwprof.render.tables import MISSING, Col, TableSpec, markdown, spec_renderables
from hwprof.rundir.names import ADVICE_CSV
from hwprof.schema.runtime_checks import BLIND

MORE = f"see --format markdown or {ADVICE_CSV}"
METHOD_SHORT = {PAIRED: "paired", PASS_LEVEL: "pass-level est.", RECORDED: "recorded"}
CHANGED_MARK = "CHANGED OUTPUT"
SETUP_WIDTH = 16
"""The speed-up cell does not wrap (its figures stay whole): a long setup text is broken to this width."""
WHY_CELL = 48
"""A why-not longer than this goes to the row's note under the table; the change cell keeps its label."""
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


def speedups(row: AdviceRow, sep: str = "\n") -> str:
    """The speed-up cell: forward ratio and spread, forward ms before->after, end to end, the method, and
    the setup time with the inferences after which it pays (a cost beside the gain)."""
    f, e2e = row.forward, row.end_to_end
    lines = []
    if f is not None and not row.resolved:  # its figure is no speed-up: it stands in the row's note (measured_text)
        method = METHOD_SHORT.get(f.method, f.method)
        return sep.join(["not resolved", f"({method})", "ratio: see note", *_setup(row)])
    if f is not None or e2e is not None:
        lines += [speedup_text(f, sep, "fwd "), _forward_ms(row, sep)] if f is not None else ["fwd " + MISSING]
        lines.append(speedup_text(e2e, sep, "e2e ") if e2e is not None else "e2e " + MISSING)
        moved = row.stages_moved
        if moved is not None:  # end to end parts from the forward: the stage that took the difference
            lines.append(f"e2e: {moved.short()}")
        method = (f or e2e).method  # type: ignore[union-attr]
        lines.append(METHOD_SHORT.get(method, method))
    lines += _setup(row)
    return sep.join(x for x in lines if x) or MISSING


def _setup(row: AdviceRow) -> list[str]:
    if row.setup_s is None:
        return []
    what = textwrap.wrap(f"{row.setup_what or 'setup'} {row.setup_s:.1f} s", SETUP_WIDTH)
    pays = row.breakeven_inferences
    if pays is not None:
        after = f"pays after {math.ceil(pays):,}"
    elif row.forward is not None and row.forward.before_ms is not None and row.forward.after_ms is not None:
        after = "never pays"
    else:
        after = "payback unknown"
    return [*what, after]


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


def _layers(row: AdviceRow, sep: str) -> str:
    faults = [f"faults/iter {row.minor_faults[0]:,.0f}->{row.minor_faults[1]:,.0f}"] if row.minor_faults else []
    if row.layers:
        return sep.join([f"{d.index} {d.type} {ms(d.before_ms)}->{ms(d.after_ms)}" for d in row.layers] + faults)
    return sep.join([row.layers_note or MISSING, *faults])


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
    """note: the number of the row's note under the table (row_notes); 0: none, its why-not whole in the cell."""
    name = f"{row.key} [{note}]" if note else row.key
    change = sep.join(x for x in (name, _why_cell(row) if note else _why_not(row)) if x)
    return [
        _rank_cell(row, rank),
        change,
        speedups(row, sep),
        output_text(row.output, changed(row), sep),
        _layers(row, sep),
        row.finding or MISSING,
    ]


def _why_cell(row: AdviceRow) -> str:
    """The why-not of the change cell: whole where short, else its label ("not resolved", "failed", ...), the whole
    text being in the row's note."""
    why = _why_not(row)
    return why if len(why) <= WHY_CELL else why.split(":")[0]


COLS = [
    Col("#"),
    Col("change", "left", wrap=True, max_width=16),
    Col("speed-up, setup", "left"),
    Col("output check", "left", wrap=True, max_width=14),
    Col("layers moved (ms)", "left", wrap=True, max_width=14, priority=2),
    Col("answers", "left", wrap=True, max_width=14, priority=1),
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
        "its spread under it; ms = forward p50 before->after; setup (compile, export) pays after N inferences = "
        "setup time / forward time saved; output check: the variant against the fp32 reference, head max|d| over "
        "the head's range, detections after NMS reference->variant"
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
    """Row key -> (number, its note under the table): how to make the change (a command, which would make the
    change column tens of lines long at 80 columns), and a why-not too long for the cell (WHY_CELL)."""
    out: dict[str, tuple[int, str]] = {}
    for r in rows:
        why = _why_not(r)
        parts = [x for x in (r.how, why if len(why) > WHY_CELL else "", measured_text(r)) if x]
        if parts:
            out[r.key] = (len(out) + 1, f"[{len(out) + 1}] {r.key}: {'; '.join(parts)}")
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
