"""Rich / Markdown views of a comparison of runs and of a sweep table."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console, Group, RenderableType
from rich.text import Text

from hwprof.analysis.compare import Comparison, Row, compare_runs
from hwprof.analysis.program.facts import INFERENCE, TRAINING
from hwprof.analysis.sweep.rows import NODE_THREADS, SweepResult, SweepRow
from hwprof.core.host_kinds import differing_software, software_text
from hwprof.render.compare.counters import instructions_spec, memory_spec
from hwprof.render.compare.runtime import (
    fused_spec,
    kernels_spec,
    marked,
    reduced_precision,
    runtime_cell,
    runtime_fields,
    runtime_notes,
    sweep_columns,
    sweep_diff_cells,
    sweep_notes,
)
from hwprof.render.fmt import ms, num, pct, sig
from hwprof.render.sweep.advice import advice_cell, advice_notes, advice_summary_spec
from hwprof.render.sweep.attempts import attempts_cell, attempts_notes, retried
from hwprof.render.tables import MISSING, Col, TableSpec, markdown, rich_render, spec_renderables

TOP_LAYERS = 15


def _ratio(value: float | None) -> str:
    return MISSING if value is None else f"{value:.2f}x"


def _times(value: float | None) -> str:
    """A speed-up to three significant digits: 0.57x, 6.03x, 12.1x, 906x."""
    if value is None:
        return MISSING
    return f"{value:,.0f}x" if value >= 100 else f"{value:.1f}x" if value >= 10 else f"{value:.2f}x"


def _slashed(*values: object) -> str:
    """ "640 / 1 / 2"; a value the run does not record (an imported GPU trace) is "-"."""
    return " / ".join(MISSING if v is None else str(v) for v in values)


def _letters(n: int) -> list[str]:
    return [chr(ord("A") + i) if i < 26 else f"R{i + 1}" for i in range(n)]


RUN_CELL = 24


def runs_spec(c: Comparison) -> TableSpec:
    names = _letters(len(c.runs))
    # a run's long values (its host, its software) are cut to fit 80 columns: whole in the notes and in markdown
    cols = [Col("", "left")] + [Col(n, max_width=RUN_CELL) for n in names]
    fields: list[tuple[str, list[str]]] = [
        ("run", [h.run_id if h.status == "complete" else f"{h.run_id} [{h.status}]" for h in c.runs]),
        ("layer times from", [h.layer_times.split(":")[0] for h in c.runs]),  # the reason is in the notes
        ("model", [str(h.model) for h in c.runs]),
        *runtime_fields(c.runs),
        ("imgsz / batch / threads", [_slashed(h.imgsz, h.batch, h.program_threads or h.threads) for h in c.runs]),
        ("forward p50 ms", [ms(h.forward_ms) for h in c.runs]),
        ("forward speed-up vs A", [_speedup(c.runs[0].forward_ms, h.forward_ms) for h in c.runs]),
        ("input", [h.source for h in c.runs]),
        ("iteration p50 ms", [ms(h.iteration_ms) for h in c.runs]),
        *_fps_fields(c),
        ("FPS (end to end)", [num(h.fps) for h in c.runs]),
        ("GFLOPs", [sig(h.gflops) for h in c.runs]),
        ("params (fused)", [f"{h.params_fused:,}" if h.params_fused else MISSING for h in c.runs]),
        ("% of peak", [num(h.pct_peak, 1) for h in c.runs]),
        ("intensity FLOP/B", [sig(h.intensity) for h in c.runs]),
        ("bound", [h.bound or MISSING for h in c.runs]),
        ("J / image", [sig(h.j_per_image) for h in c.runs]),
    ]
    fields[1:1] = _host_fields(c)
    rows = [[label, *values] for label, values in fields]
    notes = [f"{n}: {h.path}" for n, h in zip(names, c.runs, strict=True)]
    notes += runtime_notes(c.runs, names)
    return TableSpec("runs", cols, rows, notes, more="see --format markdown")


def _fps_fields(c: Comparison) -> list[tuple[str, list[str]]]:
    """FPS of the forward: "inference" where every run measured inference; where a program's did not (a training
    step, forwards with grad on), what each run measured, its forward alone, and a training step's."""
    if all(h.measured == INFERENCE for h in c.runs):
        return [("FPS (inference)", [num(h.inference_fps) for h in c.runs])]
    out = [("measured", [h.measured for h in c.runs]), ("FPS (forward alone)", [num(h.inference_fps) for h in c.runs])]
    if any(h.step_fps is not None for h in c.runs):
        out.append((f"FPS ({TRAINING})", [num(h.step_fps) for h in c.runs]))
    return out


def _host_fields(c: Comparison) -> list[tuple[str, list[str]]]:
    """The host and software rows, where the runs differ in them."""
    out = []
    if len({h.host_kind for h in c.runs}) > 1:
        out.append(("host", [h.host_kind or MISSING for h in c.runs]))
    differ = differing_software(h.versions for h in c.runs if h.versions)
    if differ:
        out.append(("software", [software_text(_pick(h.versions, differ)) for h in c.runs]))
    return out


def _speedup(base: float | None, value: float | None) -> str:
    return _times(base / value) if (base is not None and value) else MISSING


def _rows_spec(title: str, key: str, rows: list[Row], n: int, with_share: bool, speedup: bool = False) -> TableSpec:
    """Stages (ratio to run A: above 1 slower) or layers (speed-up over run A: above 1 faster; in a
    narrow terminal the other runs' ms go before their speed-ups)."""
    names = _letters(n)
    cols = [Col(key, "left", max_width=24)]
    for i, name in enumerate(names):
        cols.append(Col(f"{name} ms", priority=1 if (speedup and i) else 0))
        if with_share:
            cols.append(Col(f"{name} share", priority=2))
        if i:
            cols.append(Col(f"{name} faster" if speedup else f"{name}/A"))
    out = []
    for row in rows:
        cells = [row.key]
        for i in range(n):
            cells.append(marked(ms(row.values[i]), row.fused[i] if row.fused else []))
            if with_share:
                cells.append(pct(row.shares[i]) if row.shares else MISSING)
            if i:
                mark = "?" if row.unconfirmed and row.unconfirmed[i] else ""
                cells.append((_times(row.speedups[i]) if speedup else _ratio(row.ratios[i])) + mark)
        out.append(cells)
    return TableSpec(title, cols, out, [], more="see --format markdown")


def specs(c: Comparison, top: int = TOP_LAYERS) -> list[TableSpec]:
    n = len(c.runs)
    stages = _rows_spec("stages (p50)", "stage", c.stages, n, with_share=False)
    stages.notes.append("ratio > 1: slower than run A")
    stages.notes.extend(c.stage_notes)
    out = [runs_spec(c), stages]
    if c.layers is not None:
        timed = [r for r in c.layers if r.values[0] is not None]
        timed.sort(key=lambda r: -(r.values[0] or 0.0))
        layers = _rows_spec(
            f"top {min(top, len(timed))} layers of run A by time, matched by name",
            "layer",
            timed[:top],
            n,
            with_share=True,
            speedup=True,
        )
        layers.notes.append(
            "scaled self times (see each run's report); B faster = A ms / B ms: above 1, B ran the layer faster "
            "than run A"
        )
        layers.notes.extend(c.layer_notes)
        if any(g for row in timed[:top] for g in row.fused):
            layers.notes.append(
                "*: the layer also takes part in a runtime node fused from several layers (not in its ms)"
            )
        out.append(layers)
        kernels = kernels_spec(c, timed[:top], _letters(n))
        if kernels is not None:
            out.append(kernels)
    else:
        out.append(TableSpec("layers", [], [], [f"layers not compared: {c.layers_refused}"]))
    fused = fused_spec(c, _letters(n))
    if fused is not None:
        out.append(fused)
    instructions = instructions_spec(c, _letters(n))
    if instructions is not None:
        out.append(instructions)
    memory = memory_spec(c, _letters(n))
    if memory is not None:
        out.append(memory)
    if c.notes:
        out[0].notes.extend(c.notes)
    return out


def render_comparison(c: Comparison, console: Console, top: int = TOP_LAYERS) -> None:
    parts: list[RenderableType] = []
    for spec in specs(c, top):
        parts += spec_renderables(spec, console, note_style="yellow")
        parts.append(Text(""))
    console.print(Group(*parts))


def comparison_markdown(c: Comparison, top: int = TOP_LAYERS) -> str:
    return "\n".join(markdown(s) for s in specs(c, top))


def _sweep_columns(rows: list[SweepRow], advised: bool = False) -> list[tuple[Col, Callable[[SweepRow], str]]]:
    """The columns this sweep's rows need: a dimension that does not vary goes to the notes instead."""
    runtimes, diffs = sweep_columns(rows)
    per_model = len({(r.model, r.imgsz) for r in rows}) > 1
    cols: list[tuple[Col, Callable[[SweepRow], str]]] = []
    if len({r.host_slug for r in rows}) > 1:
        cols.append((Col("host", "left", max_width=28), lambda r: r.host_kind or r.host or MISSING))
    cols.append((Col("model", "left"), lambda r: r.model))
    if runtimes:
        cols.append((Col("runtime", "left", max_width=20), runtime_cell))
    if len({r.threads for r in rows}) > 1:
        cols.append((Col("threads"), lambda r: "node" if r.threads == NODE_THREADS else str(r.threads)))
    if len({r.batch for r in rows}) > 1:
        cols.append((Col("batch"), lambda r: str(r.batch)))
    cols += [(Col("latency ms"), lambda r: ms(r.latency_ms)), (Col("FPS", priority=1), lambda r: num(r.fps))]
    if per_model:
        cols.append((Col("params M", priority=2), lambda r: num(r.params_m)))
    cols.append((Col("size MB", priority=2), lambda r: num(r.size_mb)))
    if per_model:
        cols.append((Col("GFLOPs", priority=2), lambda r: num(r.gflops)))
    cols += [
        (Col("% peak", priority=3), lambda r: num(r.pct_peak, 1)),
        (Col("AI", priority=6), lambda r: sig(r.intensity)),
        (Col("bound", priority=4), lambda r: r.bound or MISSING),
    ]
    if diffs:
        cols.append((Col("max |Δ| head"), lambda r: sweep_diff_cells(r)[0]))
        cols.append((Col("detections"), lambda r: sweep_diff_cells(r)[1]))
    if any(r.graph_forward_ms is not None for r in rows):
        cols.append((Col("graph fwd ms", priority=3), lambda r: ms(r.graph_forward_ms)))
        cols.append((Col("eager fwd ms", priority=3), lambda r: ms(r.forward_ms)))
    if any(r.j_per_image is not None for r in rows):
        cols.append((Col("J/image", priority=5), lambda r: sig(r.j_per_image)))
    differ = differing_software(r.versions for r in rows if r.versions)
    if differ:
        cols.append((Col("software", "left", max_width=30), lambda r: software_text(_pick(r.versions, differ))))
    if any(r.status not in ("complete", "reused") for r in rows):
        cols.append((Col("status", "left"), lambda r: r.status))
    if retried(rows):
        cols.append((Col("attempts"), attempts_cell))
    if advised:
        cols.append((Col("advice", "left", max_width=22, wrap=True), advice_cell))
    return cols


def _pick(versions: dict[str, str], names: list[str]) -> dict[str, str]:
    return {n: versions.get(n, MISSING) for n in names}


def by_host(rows: list[SweepRow]) -> list[SweepRow]:
    """The rows grouped by kind of machine, kinds in order of their first row, points in their order."""
    first: dict[str, int] = {}
    for i, r in enumerate(rows):
        first.setdefault(r.host_slug, i)
    return sorted(rows, key=lambda r: first[r.host_slug])


def _host_notes(rows: list[SweepRow]) -> list[str]:
    kinds = {r.host_slug: r for r in rows if r.host_slug}
    notes = [
        f"host {r.host_kind} ({', '.join(sorted({x.host for x in rows if x.host_slug == slug and x.host}))}): "
        f"ISA {r.isa or MISSING}"
        for slug, r in kinds.items()
    ]
    differ = differing_software(r.versions for r in rows if r.versions)
    if differ:
        notes.append(f"the points ran different software ({', '.join(differ)}): see the software column")
    elif rows and rows[0].versions:
        notes.append(f"software of every point: {software_text(rows[0].versions)}")
    return notes


def _same_for_every_point(rows: list[SweepRow], headers: set[str]) -> str:
    if not rows:
        return ""
    first = rows[0]
    threads = "each node's own threads" if first.threads == NODE_THREADS else f"{first.threads} threads"
    same = [] if "threads" in headers else [threads]
    same += [] if "batch" in headers else [f"batch {first.batch}"]
    imgsz = {r.imgsz for r in rows if r.imgsz}
    same += [f"imgsz {imgsz.pop()}"] if len(imgsz) == 1 else []
    if "params M" not in headers:
        same += [f"{num(first.params_m)} M params, {num(first.gflops)} GFLOPs per image"]
    return "every point: " + ", ".join(same)


def sweep_spec(result: SweepResult) -> TableSpec:
    rows_in = by_host(result.rows)
    columns = _sweep_columns(rows_in, result.advised)
    rows = [[cell(r) for _, cell in columns] for r in rows_in]
    headers = {c.header for c, _ in columns}
    notes = [_same_for_every_point(rows_in, headers)] if rows_in else []
    notes.append(
        "latency = forward p50 per image (clean timing pass); FPS = images/s end to end (pipeline p50); "
        "size = the model as executed in MiB; GFLOPs per image (torch.utils.flop_counter); % peak = forward "
        "GFLOP/s / measured peak; AI = forward FLOPs / minimum bytes; bound = AI vs the ridge point"
    )
    notes += sweep_notes(rows_in)
    notes += _host_notes(rows_in)
    for note in sorted({r.energy_note for r in rows_in if r.j_per_image is None and r.energy_note}):
        notes.append(f"energy per image: {note}")
    over = [r.name for r in rows_in if r.pct_peak is not None and r.pct_peak > 100 and not reduced_precision(r)]
    if over:
        notes.append(
            f"% peak above 100 ({', '.join(over)}): the peaks were measured under heavier load than these "
            "points ran at, so every % peak here is overstated; hwprof doctor --peaks --force on an idle host"
        )
    for r in rows_in:
        if r.error:
            notes.append(f"{r.name}: {r.error}")
    notes += attempts_notes(rows_in)
    if result.advised:
        notes += advice_notes(rows_in)
    notes.extend(result.notes)
    return TableSpec(
        f"sweep ({len(rows_in)} points) in {result.out_root}",
        [c for c, _ in columns],
        rows,
        notes,
        more=f"see {result.out_root}/sweep.csv",
    )


def sweep_specs(result: SweepResult) -> list[TableSpec]:
    """The sweep's table, and after it for `sweep --advise` which change wins per kind of machine."""
    advice = [advice_summary_spec(by_host(result.rows))] if result.advised else []
    return [sweep_spec(result), *advice]


def render_sweep(result: SweepResult, console: Console) -> None:
    for spec in sweep_specs(result):
        console.print(rich_render(spec, console))


def sweep_markdown(result: SweepResult) -> str:
    return "\n".join(markdown(s) for s in sweep_specs(result))


# ----------------------------------------------------------------------------- CLI entry points

COMPARE_FORMATS = ("rich", "markdown", "json", "html")


def compare(
    run_dirs: Sequence[Path | str],
    console: Console | None = None,
    top: int = TOP_LAYERS,
    format: str = "rich",
) -> Comparison:
    """`hwprof compare RUN_A RUN_B [...]`: print the runs side by side (the first is the baseline)."""
    if format not in COMPARE_FORMATS:
        raise ValueError(f"--format must be one of {', '.join(COMPARE_FORMATS)} (got {format!r})")
    if top < 1:
        raise ValueError(f"--top must be at least 1 (got {top})")
    console = console or Console()
    c = compare_runs(run_dirs)
    if format == "rich":
        render_comparison(c, console, top)
        return c
    if format == "html":
        text = comparison_html(c, top)
    else:
        text = comparison_markdown(c, top) if format == "markdown" else json.dumps(c.to_dict(), indent=1) + "\n"
    (console.file or sys.stdout).write(text)
    return c


def comparison_html(c: Comparison, top: int = TOP_LAYERS) -> str:
    """The comparison as one self-contained page (hwprof.render.html): the same tables, every column."""
    from hwprof.render.html import render_tables_page

    return render_tables_page(f"hwprof compare: {len(c.runs)} runs", specs(c, top))
