"""Rich / Markdown views of a comparison of runs and of a sweep table."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console, Group, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from hwprof.analysis.compare import Comparison, Row, compare_runs
from hwprof.render.fmt import ms, num, pct, sig
from hwprof.render.tables import MISSING, Col, TableSpec, markdown, rich_render, spec_renderables
from hwprof.sweep import SweepEvent, SweepPlan, SweepResult, run_sweep

TOP_LAYERS = 15


def _ratio(value: float | None) -> str:
    return MISSING if value is None else f"{value:.2f}x"


def _letters(n: int) -> list[str]:
    return [chr(ord("A") + i) if i < 26 else f"R{i + 1}" for i in range(n)]


def runs_spec(c: Comparison) -> TableSpec:
    names = _letters(len(c.runs))
    cols = [Col("", "left")] + [Col(n) for n in names]
    fields: list[tuple[str, list[str]]] = [
        ("run", [h.run_id for h in c.runs]),
        ("model", [str(h.model) for h in c.runs]),
        ("imgsz / batch / threads", [f"{h.imgsz} / {h.batch} / {h.threads}" for h in c.runs]),
        ("forward p50 ms", [ms(h.forward_ms) for h in c.runs]),
        ("iteration p50 ms", [ms(h.iteration_ms) for h in c.runs]),
        ("FPS (end to end)", [num(h.fps) for h in c.runs]),
        ("GFLOPs", [sig(h.gflops) for h in c.runs]),
        ("params (fused)", [f"{h.params_fused:,}" if h.params_fused else MISSING for h in c.runs]),
        ("% of peak", [num(h.pct_peak, 1) for h in c.runs]),
        ("intensity FLOP/B", [sig(h.intensity) for h in c.runs]),
        ("bound", [h.bound or MISSING for h in c.runs]),
        ("J / image", [sig(h.j_per_image) for h in c.runs]),
    ]
    rows = [[label, *values] for label, values in fields]
    notes = [f"{n}: {h.path}" for n, h in zip(names, c.runs, strict=True)]
    return TableSpec("runs", cols, rows, notes, more="see --format markdown")


def _rows_spec(title: str, key: str, rows: list[Row], n: int, with_share: bool) -> TableSpec:
    names = _letters(n)
    cols = [Col(key, "left", max_width=24)]
    for i, name in enumerate(names):
        cols.append(Col(f"{name} ms"))
        if with_share:
            cols.append(Col(f"{name} share", priority=2))
        if i:
            cols.append(Col(f"{name}/A"))
    out = []
    for row in rows:
        cells = [row.key]
        for i in range(n):
            cells.append(ms(row.values[i]))
            if with_share:
                cells.append(pct(row.shares[i]) if row.shares else MISSING)
            if i:
                cells.append(_ratio(row.ratios[i]))
        out.append(cells)
    return TableSpec(title, cols, out, [], more="see --format markdown")


def specs(c: Comparison, top: int = TOP_LAYERS) -> list[TableSpec]:
    n = len(c.runs)
    stages = _rows_spec("stages (p50)", "stage", c.stages, n, with_share=False)
    stages.notes.append("ratio > 1: slower than run A")
    out = [runs_spec(c), stages]
    if c.layers is not None:
        timed = [r for r in c.layers if r.values[0] is not None]
        timed.sort(key=lambda r: -(r.values[0] or 0.0))
        layers = _rows_spec(
            f"top {min(top, len(timed))} layers of run A by time, matched by index and type",
            "layer",
            timed[:top],
            n,
            with_share=True,
        )
        layers.notes.append("scaled self times (see each run's report); ratio > 1: slower than run A")
        out.append(layers)
    else:
        out.append(TableSpec("layers", [], [], [f"layers not compared: {c.layers_refused}"]))
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


def sweep_spec(result: SweepResult) -> TableSpec:
    rows_in = result.rows
    threads = len({r.threads for r in rows_in}) > 1
    batches = len({r.batch for r in rows_in}) > 1
    energy = any(r.j_per_image is not None for r in rows_in)
    status = any(r.status not in ("complete", "reused") for r in rows_in)
    cols = [Col("model", "left")]
    cols += [Col("threads")] if threads else []
    cols += [Col("batch")] if batches else []
    cols += [
        Col("latency ms"),
        Col("FPS"),
        Col("params M"),
        Col("size MB", priority=2),
        Col("GFLOPs"),
        Col("% peak"),
        Col("AI", priority=1),
        Col("bound"),
    ]
    cols += [Col("J/image")] if energy else []
    cols += [Col("status", "left")] if status else []
    rows = []
    for r in rows_in:
        row = [r.model]
        row += [str(r.threads)] if threads else []
        row += [str(r.batch)] if batches else []
        row += [
            ms(r.latency_ms),
            num(r.fps),
            num(r.params_m),
            num(r.size_mb),
            num(r.gflops),
            num(r.pct_peak, 1),
            sig(r.intensity),
            r.bound or MISSING,
        ]
        row += [sig(r.j_per_image)] if energy else []
        row += [r.status] if status else []
        rows.append(row)
    notes = []
    same = []
    if not threads and rows_in:
        same.append(f"{rows_in[0].threads} threads")
    if not batches and rows_in:
        same.append(f"batch {rows_in[0].batch}")
    imgsz = {r.imgsz for r in rows_in if r.imgsz}
    if len(imgsz) == 1:
        same.append(f"imgsz {imgsz.pop()}")
    if same:
        notes.append("every point: " + ", ".join(same))
    notes.append(
        "latency = forward p50 per image (clean timing pass); FPS = images/s end to end (pipeline p50); "
        "size = FP32 parameters in MiB; GFLOPs per image (torch.utils.flop_counter); % peak = forward "
        "GFLOP/s / measured peak; AI = forward FLOPs / minimum bytes; bound = AI vs the ridge point"
    )
    for note in sorted({r.energy_note for r in rows_in if r.j_per_image is None and r.energy_note}):
        notes.append(f"energy per image: {note}")
    over = [r.model for r in rows_in if r.pct_peak is not None and r.pct_peak > 100]
    if over:
        notes.append(
            f"% peak above 100 ({', '.join(over)}): the peaks were measured under heavier load than these "
            "points ran at, so every % peak here is overstated; hwprof doctor --peaks --force on an idle host"
        )
    for r in rows_in:
        if r.error:
            notes.append(f"{r.model} t{r.threads} b{r.batch}: {r.error}")
    notes.extend(result.notes)
    return TableSpec(
        f"sweep ({len(rows_in)} points) in {result.out_root}",
        cols,
        rows,
        notes,
        more=f"see {result.out_root}/sweep.csv",
    )


def render_sweep(result: SweepResult, console: Console) -> None:
    console.print(rich_render(sweep_spec(result), console))


def sweep_markdown(result: SweepResult) -> str:
    return markdown(sweep_spec(result))


# ----------------------------------------------------------------------------- CLI entry points

COMPARE_FORMATS = ("rich", "markdown", "json")


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
    else:
        text = comparison_markdown(c, top) if format == "markdown" else json.dumps(c.to_dict(), indent=1) + "\n"
        (console.file or sys.stdout).write(text)
    return c


def sweep(plan: SweepPlan, console: Console | None = None) -> SweepResult:
    """`hwprof sweep --models ... [--threads ...] [--batch ...]`: collect every point, print the table."""
    console = console or Console()
    with Progress(
        TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as progress:
        task = progress.add_task("sweep", total=len(plan.points()))

        def show(event: SweepEvent) -> None:
            progress.console.print(str(event), highlight=False, markup=False)
            if event.done:
                progress.advance(task)

        result = run_sweep(plan, progress=show)
    render_sweep(result, console)
    return result
