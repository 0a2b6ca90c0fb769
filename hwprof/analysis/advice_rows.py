"""An advice row from what a candidate's worker(s) measured (hwprof/advise/paired_worker.py's JSON).

Pure. A paired result holds both sides, numbered in ABBA order; a pass-level candidate has two results,
"baseline" and "variant", each with one side. Times are per image where the variant changes the batch.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from hwprof.analysis.advice import (
    CHANGED_OUTPUT,
    NOT_RUN,
    AdviceBlock,
    AdviceRow,
    OutputCheck,
    Speedup,
    paired_speedup,
    process_speedup,
)
from hwprof.analysis.advice_candidates import Candidate
from hwprof.schema.advise_result import AdviseResult, SideFigures


def not_run_row(c: Candidate) -> AdviceRow:
    return AdviceRow(c.key, c.change, c.how, c.finding, status=NOT_RUN, reason=c.blocked)


Figures = Callable[[SideFigures], dict[str, float]]
"""Which of a side's ms maps: forward or iteration."""


def _forward(side: SideFigures) -> dict[str, float]:
    return side.forward_ms


def _iteration(side: SideFigures) -> dict[str, float]:
    return side.iteration_ms


def _per_image(side: SideFigures, figures: Figures) -> dict[int, float]:
    batch = side.images_per_batch
    return {int(i): ms / batch for i, ms in figures(side).items()}


def _speedups(results: dict[str, AdviseResult], figures: Figures) -> Speedup | None:
    if "paired" in results:
        sides = results["paired"].sides
        return paired_speedup(_per_image(sides["baseline"], figures), _per_image(sides["variant"], figures))
    before = _per_image(results["baseline"].sides["baseline"], figures)
    after = _per_image(results["variant"].sides["variant"], figures)
    return process_speedup(list(before.values()), list(after.values()))


def setup_seconds(c: Candidate, variant: SideFigures, after_ms: float | None) -> tuple[float | None, str]:
    """What the variant costs before its first useful forward: compile, capture, export or conversion."""
    first_s = float(variant.setup.first_forward_s or 0.0)
    prepare_s = float(variant.setup.prepare_s or 0.0)
    extra_first = max(0.0, first_s - (after_ms or 0.0) / 1e3 * variant.images_per_batch)
    if c.compile_mode:
        return prepare_s + extra_first, f"torch.compile ({c.compile_mode}) at the first forward, Inductor caches off"
    if c.cuda_graph:
        return prepare_s + extra_first, "CUDA graph capture at the first forward"
    runtime = c.variant.runtime
    if runtime:
        return prepare_s + extra_first, f"ONNX export and {runtime} session (model load, compilation)"
    return None, ""


def baseline_drift(paired: AdviseResult | None) -> float | None:
    """How far the paired baseline's forward p50 in the ABBA blocks lies outside its own range alone (timed
    before the variant was built in the process): its p50 over the solo maximum when above it, over the solo
    minimum when below, else 1.0; None without both. Far above 1: the variant slows the baseline beside it
    (threads that spin after their forward, a second pool on the same CPUs), which would flatter the variant.
    Judged against the solo range, not its median, so a host whose load moves between the solo and the
    blocks (which widens that range) is not mistaken for interference."""
    side = paired.sides.get("baseline") if paired is not None else None
    if side is None:
        return None
    solo, blocks = list((side.solo_forward_ms or {}).values()), list(side.forward_ms.values())
    if not solo or not blocks:
        return None
    p50 = statistics.median(blocks)
    if p50 > max(solo):
        return p50 / max(solo)
    if p50 < min(solo):
        return p50 / min(solo)
    return 1.0


def _faults(results: dict[str, AdviseResult]) -> list[float] | None:
    """[baseline, variant] median minor faults per measured iteration; None where a side did not count them."""
    if "paired" in results:
        sides = [results["paired"].sides.get(name) for name in ("baseline", "variant")]
    else:
        sides = [results[name].sides.get(name) for name in ("baseline", "variant")]
    counts = [s.minor_faults if s is not None and s.minor_faults else None for s in sides]
    return [statistics.median(c.values()) for c in counts if c] if all(counts) else None


def measured_row(c: Candidate, results: dict[str, AdviseResult], blocks: list[AdviceBlock]) -> AdviceRow:
    """The row of a candidate whose worker(s) finished; appends a paired result's iteration stamps to `blocks`
    (the trace's ABBA blocks; a pass-level row's two processes have none)."""
    row = AdviceRow(c.key, c.change, c.how, c.finding, per_image=c.per_image)
    row.forward = _speedups(results, _forward)
    row.end_to_end = _speedups(results, _iteration)
    variant_result = results.get("paired") or results["variant"]
    variant = variant_result.sides["variant"]
    row.setup_s, row.setup_what = setup_seconds(c, variant, row.forward.after_ms if row.forward else None)
    if variant_result.output:
        row.output = OutputCheck.from_dict(variant_result.output)
        if not row.output.within_tolerance:
            row.status = CHANGED_OUTPUT
            row.reason = (
                f"detections changed beyond the {100 * row.output.tolerance:.0f}% tolerance: "
                f"{row.output.detections_reference}->{row.output.detections}, {row.output.matched} matched"
            )
    elif variant_result.output_error:
        row.reason = f"output not checked: {variant_result.output_error}"
    row.minor_faults = _faults(results)
    for result in results.values() if "paired" in results else ():  # two processes make no ABBA block
        for name, side in result.sides.items():
            for i, (start, end, f_start, f_end) in side.stamps.items():
                blocks.append(AdviceBlock(c.key, name, int(i) // 2, int(i), start, end, f_start, f_end))
    return row
