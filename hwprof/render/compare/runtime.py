"""What compare and sweep show about runtimes and precisions: what executed, its output against
torch fp32 (never a reduced-precision figure without it), each run's kernel per layer, and the
runtime nodes fused from several layers."""

from __future__ import annotations

from collections.abc import Sequence

from hwprof.analysis.compare import Comparison, Row
from hwprof.analysis.run_head import RunHead
from hwprof.analysis.sweep.rows import SweepRow
from hwprof.render.fmt import ms, num
from hwprof.render.tables import MISSING, Col, TableSpec
from hwprof.schema.runtime_checks import BLIND, OutputDiff

FUSED_PER_RUN = 8
FUSED_MARK = "*"
KERNEL_WIDTH = 26
DIFF_NOTE = (
    "max |Δ| head: the largest absolute difference of the raw detection head from the fused torch model "
    "in fp32 on the same first batch (read it against the head's largest value, given beside it, and against "
    "its input sensitivity: how far the reference's head moves on the batch mirrored; pass up to a tenth of "
    "it, differs up to all of it, changed beyond, blind where the head does not depend on its input and the "
    "check could not have failed); detections: after NMS, this run's and torch fp32's"
)
RANDOM_INIT_NOTE = (
    "random-init weights ({runs}): detections are meaningless there; a seeded init scaled to unit variance "
    "(run.json model.init) lets the head and the raw maps show a precision's error (a random network "
    "amplifies it more than a trained one would), a plain one leaves the check blind; collect with "
    "--weights for a real accuracy check"
)

PEAK_NOTE = (
    "% of peak is against the measured FP32 peak: bf16 and int8 run on other units (AVX512-BF16, AMX, VNNI) "
    "whose peak was not measured, so their % of peak overstates how busy those units were"
)


def short_version(version: str | None) -> str:
    """OpenVINO's "2026.4.1-22982-e213a147257-releases/2026/4" -> "2026.4.1"; others as they are."""
    return (version or "").split()[0].split("-")[0] if version else ""


def precision_cell(asked: str, executed: str | None) -> str:
    """The executed precision, with what was asked when the runtime ran something else."""
    if not executed:
        return f"{asked} (asked; executed not recorded)"
    return executed if executed == asked else f"{executed} (asked {asked})"


def diff_cells(diff: OutputDiff | None, reference: bool, scale: bool = True) -> tuple[str, str]:
    """(max |Δ| head, detections vs torch fp32) for one run or point; scale: "of <the head's largest value>"."""
    if reference:
        return "reference", "reference"
    if not diff or diff.max_abs_head is None:
        return "not measured", "not measured"
    largest = diff.max_abs_reference
    head = f"{diff.max_abs_head:.3g}" + (f" of {largest:.3g}" if (scale and largest is not None) else "")
    if diff.verdict is not None:  # what the check could see: never a pass where it could not have failed
        head += f" ({diff.verdict}" + (f", input sens. {diff.sensitivity_head:.3g})" if diff.verdict != BLIND else ")")
    if diff.detections is None:
        return head, MISSING
    ref = diff.detections_reference
    return head, f"{diff.detections} vs {MISSING if ref is None else ref}"


def raw_cell(diff: OutputDiff | None, reference: bool) -> str:
    """Max |Δ| of the raw per-level maps before the head's decoding: the error a random-init head hides."""
    if reference:
        return "reference"
    if not diff or diff.max_abs_raw is None:
        return MISSING
    largest = diff.max_abs_raw_reference
    sqnr = f", SQNR {diff.sqnr_raw_db:.0f} dB" if diff.sqnr_raw_db is not None else ""
    return f"{diff.max_abs_raw:.3g}" + (f" of {largest:.3g}" if largest is not None else "") + sqnr


def _reduced(asked: str, executed: str | None) -> bool:
    return asked != "fp32" or bool(executed and not executed.startswith("fp32"))


def reduced_precision(row: SweepRow) -> bool:
    return _reduced(row.precision, row.executed_precision)


def shows_runtimes(heads: Sequence[RunHead]) -> bool:
    return any(not h.is_reference for h in heads)


def runtime_fields(heads: Sequence[RunHead]) -> list[tuple[str, list[str]]]:
    """The runs table's rows about what executed; none when every run is torch fp32."""
    if not shows_runtimes(heads):
        return []
    diffs = [diff_cells(h.output_diff, h.is_reference) for h in heads]
    return [
        ("runtime", [f"{h.runtime} {short_version(h.runtime_version)}".strip() for h in heads]),
        ("precision executed", [precision_cell(h.precision, h.executed_precision) for h in heads]),
        ("max |Δ| head vs torch fp32", [d[0] for d in diffs]),
        ("max |Δ| raw maps vs torch fp32", [raw_cell(h.output_diff, h.is_reference) for h in heads]),
        ("detections vs torch fp32", [d[1] for d in diffs]),
        ("model MB", [num(h.model_bytes / 2**20) if h.model_bytes else MISSING for h in heads]),
    ]


def runtime_notes(heads: Sequence[RunHead], names: Sequence[str]) -> list[str]:
    if not shows_runtimes(heads):
        return []
    notes = [
        DIFF_NOTE,
        "model MB: torch, its parameters in the executed dtype; other runtimes, the model file they loaded",
    ]
    if any(_reduced(h.precision, h.executed_precision) for h in heads):
        notes.append(PEAK_NOTE)
    random = [n for n, h in zip(names, heads, strict=True) if h.random_init and not h.is_reference]
    if random:
        notes.append(RANDOM_INIT_NOTE.format(runs=", ".join(random)))
    for name, h in zip(names, heads, strict=True):
        if h.precision_detail:
            notes.append(f"{name} precision: {h.precision_detail}")
        if h.model_file:
            notes.append(f"{name} model: {h.model_file}")
        unmeasured = h.output_diff is None or h.output_diff.max_abs_head is None
        if _reduced(h.precision, h.executed_precision) and unmeasured:
            notes.append(f"{name}: its output against torch fp32 was not measured: its speed says nothing of accuracy")
    return notes


def marked(value: str, groups: list[str]) -> str:
    """A layer's cell, marked when the layer takes part in a node fused from several layers."""
    return f"{value}{FUSED_MARK}" if groups else value


def kernels_spec(c: Comparison, rows: list[Row], names: Sequence[str]) -> TableSpec | None:
    """Each run's kernel for the layers of the layer table, in its order; None when no run has any."""
    if not any(k for row in rows for k in row.kernels):
        return None
    cols = [Col("layer", "left", max_width=16)] + [Col(f"{n} kernel", "left", max_width=KERNEL_WIDTH) for n in names]
    out = [[row.key, *(marked(k or MISSING, g) for k, g in zip(row.kernels, row.fused, strict=True))] for row in rows]
    notes = [f"{n} kernel: {h.kernel_source}" for n, h in zip(names, c.runs, strict=True)]
    if any(g for row in rows for g in row.fused):
        notes.append(f"{FUSED_MARK}: the layer also takes part in a runtime node fused from several layers (below)")
    return TableSpec("kernel per layer and run", cols, out, notes, more="see --format markdown")


def fused_spec(c: Comparison, names: Sequence[str]) -> TableSpec | None:
    """The runtime nodes fused from several layers, per run; None when no run has any."""
    if not any(c.fused):
        return None
    cols = [
        Col("run", "left"),
        Col("node", "left", max_width=40),
        Col("layers", "left", max_width=20),
        Col("kernel", "left", max_width=KERNEL_WIDTH),
        Col("ms"),
    ]
    rows = []
    notes = []
    for name, head, groups in zip(names, c.runs, c.fused, strict=True):
        if not groups:
            notes.append(f"{name} ({head.runtime}): no node fused across layers recorded")
            continue
        for g in groups[:FUSED_PER_RUN]:
            rows.append([name, g.node, ", ".join(x.removeprefix("model.") for x in g.layers), g.kernel, ms(g.time_ms)])
        total = sum(g.time_ms for g in groups)
        shown = f", the {FUSED_PER_RUN} longest shown" if len(groups) > FUSED_PER_RUN else ""
        plural = "s" if len(groups) > 1 else ""
        notes.append(f"{name} ({head.runtime}): {len(groups)} fused node{plural}, {ms(total)} ms per iteration{shown}")
    notes.append(
        "ms: median per iteration from the runtime's profiler; a fused node's time is charged to no layer, "
        f"so the layer times of the layers marked {FUSED_MARK} exclude it"
    )
    return TableSpec("runtime nodes fused from several layers", cols, rows, notes, more="see --format markdown")


# ----------------------------------------------------------------------------- sweep


def sweep_columns(rows: Sequence[SweepRow]) -> tuple[bool, bool]:
    """(runtime column, output-difference columns) for this sweep's rows: both only where a point is not
    torch fp32."""
    runtimes = any(r.runtime != "torch" or reduced_precision(r) for r in rows)
    return runtimes, any(not r.is_reference for r in rows)


def runtime_cell(row: SweepRow) -> str:
    """ "openvino bf16": what ran the forward, in the precision it executed (what was asked, where different)."""
    executed = row.executed_precision.split(" (")[0]
    if not executed or executed == row.precision:  # not recorded: a failed point, or a run from before runtimes
        return f"{row.runtime} {row.precision}"
    return f"{row.runtime} {executed} (asked {row.precision})"


def sweep_diff_cells(row: SweepRow) -> tuple[str, str]:
    if row.output_note == "reference":
        return diff_cells(None, True)
    diff = OutputDiff(
        max_abs_head=row.max_abs_head,
        max_abs_reference=row.max_abs_reference,
        sensitivity_head=row.sensitivity_head,
        detections=row.detections,
        detections_reference=row.detections_reference,
    )
    return diff_cells(diff, False, scale=False)


def sweep_notes(rows: Sequence[SweepRow]) -> list[str]:
    runtimes, diffs = sweep_columns(rows)
    notes = []
    if runtimes:
        notes.append("runtime: what ran the forward and the precision it executed (what was asked, where different)")
    for r in rows:
        if r.executed_precision and r.executed_precision != r.precision:
            notes.append(f"{r.name}: {r.precision} asked, executed {r.executed_precision}")
    if diffs:
        largest = sorted({f"{r.max_abs_reference:.3g}" for r in rows if r.max_abs_reference is not None})
        notes.append(DIFF_NOTE + (f"; torch fp32's head values reach {', '.join(largest)}" if largest else ""))
        missing = [r.name for r in rows if not r.is_reference and r.max_abs_head is None and r.status != "failed"]
        if missing:
            notes.append(
                f"output against torch fp32 not measured for {', '.join(missing)}: their speed says nothing of accuracy"
            )
        random = [r.model for r in rows if r.random_init and not r.is_reference]
        if random:
            notes.append(RANDOM_INIT_NOTE.format(runs=", ".join(dict.fromkeys(random))))
    if any(reduced_precision(r) for r in rows):
        notes.append(PEAK_NOTE)
    sources = sorted({r.size_source for r in rows if r.size_source})
    if sources and any(s.endswith("(file)") for s in sources):
        notes.append(
            "size = the model as executed: torch, its parameters in the executed dtype; ONNX Runtime and OpenVINO, "
            "the model file they loaded (OpenVINO converts an fp32 file's weights to bf16 only in memory)"
        )
    return notes
