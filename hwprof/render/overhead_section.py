"""The report's collector-overheads table: per pass its collectors, wall time, forward p50 and its cost against
the timing pass (paired where measured), with the notes on what was not resolved and why.

A figure that was not measured is never shown as 0 (MISSING, with a note).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from hwprof.analysis.overhead import COUNTERS_OFF
from hwprof.analysis.paired_cost import MIN_BLOCKS, PAIRED, PASS_LEVEL, PassCostFigure
from hwprof.render.fmt import ms, num, pct
from hwprof.render.tables import MISSING, Col, TableSpec

if TYPE_CHECKING:
    from hwprof.analysis.overhead import Overheads, PassCost
    from hwprof.analysis.run_analysis import Analysis


def overhead_spec(a: Analysis) -> TableSpec:
    """Cells hold a figure or a short status ("not resolved [1]"); the sentence behind a status is note [1]."""
    o = a.overheads
    others = any(p.neighbours for p in o.passes)  # runs from before hwprof measured it: no column
    numbered = _unresolved_notes(o)
    rows = _rows(o, others, {name: k for k, (name, _) in enumerate(numbered, 1)})
    cols = _columns(others) if rows else []
    notes = [f"[{k}] {name}: {text}" for k, (name, text) in enumerate(numbered, 1)]
    return TableSpec(
        "collector overheads",
        cols,
        rows,
        [*notes, *_pass_notes(o), *_forward_notes(o)],
        methods=[*_method_notes(o, others), *[c for c in o.counter_checks if not _counters_off(c)]],
    )


def _unresolved_notes(o: Overheads) -> list[tuple[str, str]]:
    """(pass, why its cost is not resolved) for each pass whose cost cell says only "not resolved"."""
    return [(p.name, p.cost_text(short=False) or "") for p in o.passes if p.cost and not p.cost.resolved]


def _cost_cell(p: PassCost, note: int | None) -> str:
    if note is not None:
        return f"not resolved [{note}]"
    return p.cost_text() or MISSING


def _spread_cell(cost: PassCostFigure) -> str:
    """The cost's spread, figures only (what they are is in SPREAD_NOTE); "none" for one block."""
    if cost.low is None or cost.high is None:
        return MISSING
    return cost.spread_figures() or "none"


def _blocks_cell(cost: PassCostFigure) -> str:
    if cost.method != PAIRED:
        return MISSING
    return f"{cost.blocks}" + (f" (+{cost.added_blocks})" if cost.added_blocks else "")


SPREAD_NOTE = (
    f"spread: the paired blocks' ratios, their quartiles where there are {MIN_BLOCKS} blocks or more, else their "
    "range; blocks: ABBA blocks paired (+ those added to resolve the cost); a pass-level estimate's spread is the "
    "timing pass's IQR"
)


def _columns(others: bool) -> list[Col]:
    cols = [
        Col("pass", "left"),
        Col("collectors", "left", max_width=28, priority=2),
        Col("status", "left", priority=2),
        Col("wall s", priority=1),
        Col("fwd p50 ms"),
        Col("cost"),
        Col("spread", "left", max_width=12),
        Col("blocks", priority=1),
        Col("method", "left", max_width=14),
        Col("steal", priority=1),
    ]
    if others:
        cols.append(Col("others", priority=1))
    return cols


def _rows(o: Overheads, others: bool, notes: dict[str, int]) -> list[list[str]]:
    return [
        [
            p.name,
            ", ".join(p.collectors),
            p.status,
            num(p.wall_s, 1),
            ms(p.forward_p50_ms),
            _cost_cell(p, notes.get(p.name)),
            _spread_cell(p.cost) if p.cost else MISSING,
            _blocks_cell(p.cost) if p.cost else MISSING,
            p.cost.method.removesuffix(" estimate") if p.cost else MISSING,
            pct(p.host_steal_share),
            *([pct(p.neighbours.share if p.neighbours else None)] if others else []),
        ]
        for p in o.passes
    ]


def without_blocks(stopped: str) -> str:
    """A pass's stopping text without its first parenthesis (its ABBA blocks: the table's blocks column), so that
    passes that stopped alike are said once ("kernels, trace: stopped after 10 measured iterations of the 20
    planned: resolved"); the whole text stands with the methods."""
    return re.sub(r" \([^()]*\)", "", stopped, count=1)


def _stopped(o: Overheads) -> list[tuple[str, str]]:
    """(pass, how it stopped) where a rule decided; not the timing pass, whose stages say it."""
    return [(p.name, p.stopped) for p in o.passes if p.stopped and p.name != "timing"]


def _method_notes(o: Overheads, others: bool) -> list[str]:
    """What the columns mean, the cost methods, and each pass's stopping whole."""
    return [*_definitions(o, others), *(f"{name}: {text}" for name, text in _stopped(o))]


def _definitions(o: Overheads, others: bool) -> list[str]:
    return [
        "cost = forward time with the pass's collectors / without; steal = the hypervisor's steal time during "
        "the pass, share of all CPUs (/proc/stat): timings of a pass with high steal are inflated"
        + (
            "; others = CPU time processes outside the run took on the run's CPUs, share of their capacity "
            "(steal included)"
            if others
            else ""
        ),
        SPREAD_NOTE,
        *sorted({c.method_text for p in o.passes if (c := p.cost)}),
    ]


def _pass_notes(o: Overheads) -> list[str]:
    """Per pass, what its cost leaves unresolved or out, and how it stopped."""
    stopped: dict[str, list[str]] = {}  # passes that stopped alike, named together
    for name, text in _stopped(o):
        stopped.setdefault(without_blocks(text), []).append(name)
    notes = [f"{', '.join(names)}: {text}" for text, names in stopped.items()]
    notes += [f"{p.name}: {p.cost.extension}" for p in o.passes if p.cost and p.cost.extension]
    notes += [f"{p.name}: {p.cost.shapes}" for p in o.passes if p.cost and p.cost.shapes]
    for p in o.passes:
        level = p.pass_level
        if p.cost and p.cost.always_on and level:
            notes.append(
                f"{p.name}: {', '.join(p.cost.always_on)} stayed on in the clean iterations, so the paired figure "
                f"leaves it out; the whole pass, {PASS_LEVEL}: {level.ratio_text()}, {level.spread_text()}"
            )
    return notes


def _forward_notes(o: Overheads) -> list[str]:
    """The forward's time outside the layers and between aten ops, the harness check, the counter checks."""
    notes = []
    if o.outside_layers_ms is not None:
        cpu = f"; {o.outside_layers_cpu_ms:.2f} ms CPU (perf task-clock gap)" if o.outside_layers_cpu_ms else ""
        if "outside_layers_cpu" in o.missing:
            cpu = f"; CPU (perf task-clock gap) {o.missing['outside_layers_cpu'].text()}"
        notes.append(
            f"python outside layers: {ms(o.outside_layers_ms)} ms per forward "
            f"({pct(o.outside_layers_share)}), scaled like the layers{cpu}"
        )
    if o.between_ops_ms is not None:
        worst = ", ".join(f"{name} {ms(v)} ms" for name, v, _ in o.between_ops_layers[:3])
        notes.append(
            f"between aten ops: {ms(o.between_ops_ms)} ms per forward ({pct(o.between_ops_share)}) under "
            f"torch.profiler; most in {worst}"
        )
    elif "between_ops" in o.missing:
        notes.append(f"between aten ops: {o.missing['between_ops'].note()}")
    if o.harness_vs_reference is not None:
        notes.append(f"harness forward / plain model(x) loop: {o.harness_vs_reference:.3f}")
    notes += [c for c in o.counter_checks if _counters_off(c)]  # those that held: with the methods
    return notes


# ----------------------------------------------------------------------------- rich and markdown


def _counters_off(check: str) -> bool:
    """A counter cross-check that failed (analysis.overhead.counter_checks): a note, not a method."""
    return COUNTERS_OFF in check
