"""The report's kernels per pipeline stage (perf sampling): where an iteration's native time goes outside the
model as well as in it: a video's decode and encode in FFmpeg's codecs inside OpenCV, preprocess in OpenCV and
numpy, postprocess in aten."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hwprof.analysis.stages import STAGE_ORDER
from hwprof.core.kernels import KIND_CODEC
from hwprof.render.columns import Column, GroupRow, build
from hwprof.render.fmt import pct
from hwprof.render.tables import Brief, Col, TableSpec

if TYPE_CHECKING:
    from hwprof.analysis.run_analysis import Analysis
    from hwprof.core.native_view import NativeKernel, NativeLayer

CODEC_STAGES = ("decode", "encode")
STAGE_KERNELS = 3
"""Kernels shown per stage."""
STAGE_KINDS = 2
"""Kinds of code named per stage."""


@dataclass(frozen=True)
class _StageKernel(GroupRow):
    """A row: one of a stage's kernels; the stage's own cells on its first."""

    stage: str
    table: NativeLayer
    share_of_iteration: float
    kernel: NativeKernel


def _kinds_text(table: NativeLayer) -> str:
    kinds = sorted(table.kinds.items(), key=lambda kv: -kv[1])[:STAGE_KINDS]
    return ", ".join(f"{kind} {pct(share)}" for kind, share in kinds)


STAGE_KERNEL_COLUMNS: list[Column[None, _StageKernel]] = [
    Column(Col("stage", "left", max_width=12), lambda r: r.group_cell(r.stage)),
    Column(Col("samples", priority=3), lambda r: r.group_cell(str(r.table.samples))),
    Column(Col("of iteration"), lambda r: r.group_cell(pct(r.share_of_iteration))),
    Column(Col("kinds", "left", priority=1, max_width=30), lambda r: r.group_cell(_kinds_text(r.table))),
    Column(Col("kernel", "left", max_width=46), lambda r: r.kernel.name),
    Column(Col("library", "left", priority=2, max_width=20), lambda r: r.kernel.library),
    Column(Col("share"), lambda r: pct(r.kernel.share)),
]


def _order(name: str) -> int:
    return STAGE_ORDER.index(name) if name in STAGE_ORDER else len(STAGE_ORDER)


def stage_kernels_spec(a: Analysis) -> TableSpec | None:
    """Per stage: its share of the iteration's samples, its kinds of code and its most sampled kernels."""
    view = a.layers.native
    if view is None or not view.stages:
        return None
    stages = sorted(((n, t) for n, t in view.stages.items() if t.samples), key=lambda nt: _order(nt[0]))
    total = sum(t.samples for _, t in stages)
    if not total:
        return None
    rows_src = [
        _StageKernel(first=i == 0, stage=name, table=table, share_of_iteration=table.samples / total, kernel=k)
        for name, table in stages
        for i, k in enumerate(table.kernels[:STAGE_KERNELS])
    ]
    cols, rows = build(STAGE_KERNEL_COLUMNS, None, rows_src)
    ahead = [
        f"{name} {pct(t.kinds[KIND_CODEC])}" for name, t in stages if name not in CODEC_STAGES and KIND_CODEC in t.kinds
    ]
    methods = [
        f"perf record in the kernels pass, every thread, {view.iterations} measured iterations: a sample belongs "
        "to the stage the pipeline thread was in at its time; of iteration = the stage's share of the samples; "
        "share = of the stage's sampled time; FFmpeg = its libraries inside OpenCV (a video's decode and encode: "
        "their internal functions have no symbols, so the library names the kernel)"
    ]
    notes = []
    if ahead:
        notes.append(
            f"FFmpeg outside decode and encode ({', '.join(ahead)}): its decoder threads decode the next frames "
            "while the pipeline goes on (frame threading), so part of a video's decoding overlaps the later stages "
            "and is charged to them; the decode stage's time is what the pipeline waited for a frame"
        )
    title = "kernels per pipeline stage (all threads)"
    return TableSpec(title, cols, rows, notes, methods=methods, brief=Brief(groups=len(rows), rows=1))
