"""An advice row from what a candidate's worker(s) measured (hwprof/advisor/paired_worker.py's JSON).

Pure. A paired result holds both sides, numbered in ABBA order; a pass-level candidate has three results,
"baseline", "variant" and "baseline-after" (the baseline again, after the variant), each with one side. Times
are per image where the variant changes the batch.

The guards: each side's paired forward against its own forward alone in the same process (side_drift); a side
that moved beyond DISTURBED means the pairing itself changed the figure, and the candidate is measured as
processes instead (pairing_note), unless other work took the paired process's CPUs: then the move may be the
load's as well as the pairing's, processes would be no cleaner, and the row is not resolved (a compile is not
paid twice for nothing). A pass-level figure has nothing to cancel other work between its processes: a process
whose CPUs others took above DISTURBED_SHARE of their time, or two baseline processes that disagree beyond
DISTURBED, make the row not resolved (disturbance).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence

from hwprof.analysis.advice.candidate import Candidate
from hwprof.analysis.advice.output import MATCH_WORDS
from hwprof.analysis.advice.speedup import Speedup, paired_speedup, pooled_speedup, process_speedup, speedup_ratios
from hwprof.analysis.advice.stages import stage_deltas
from hwprof.analysis.advice.table import (
    CHANGED_OUTPUT,
    NOT_RUN,
    AdviceBlock,
    AdviceRow,
    OutputCheck,
)
from hwprof.analysis.neighbours import DISTURBED_SHARE, others_text
from hwprof.core.runtime_names import BF16_WEIGHTS, INT8_STATIC
from hwprof.perf.neighbours import NeighbourLoad
from hwprof.schema.advise_result import AdviseResult, SideFigures

DISTURBED = 1.10
"""A side's paired forward p50 further than this factor outside its own range alone is not trusted (side_drift);
two baseline processes of a pass-level estimate whose p50s differ by more are a host whose load moved."""
BASELINE_AFTER = "baseline-after"
"""The pass-level estimate's third process: the baseline again, after the variant."""
PROCESSES = ("baseline", "variant", BASELINE_AFTER)


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


def _sides(results: Mapping[str, AdviseResult]) -> tuple[list[SideFigures], SideFigures]:
    """The baseline's side(s) and the variant's: one of each in a paired result, else one per process."""
    if "paired" in results:
        sides = results["paired"].sides
        return [sides["baseline"]], sides["variant"]
    before = [results[n].sides["baseline"] for n in ("baseline", BASELINE_AFTER) if n in results]
    return before, results["variant"].sides["variant"]


def _speedups(results: Mapping[str, AdviseResult], figures: Figures) -> Speedup | None:
    before, after = _sides(results)
    if "paired" in results:
        return paired_speedup(_per_image(before[0], figures), _per_image(after, figures))
    pooled = [ms for side in before for ms in _per_image(side, figures).values()]
    return process_speedup(pooled, list(_per_image(after, figures).values()))


def paired_forward(baseline: SideFigures, variant: SideFigures) -> Speedup | None:
    """The forward's paired speed-up of two sides of one process (per image), as a row reads it."""
    return paired_speedup(_per_image(baseline, _forward), _per_image(variant, _forward))


def _stage_p50s(sides: list[SideFigures]) -> dict[str, float]:
    """Each stage other than the forward: its p50 over the sides' iterations (ms per image)."""
    pooled: dict[str, list[float]] = {}
    for side in sides:
        for name, ms in (side.stage_ms or {}).items():
            pooled.setdefault(name, []).extend(v / side.images_per_batch for v in ms.values())
    return {name: statistics.median(v) for name, v in pooled.items() if v}


def setup_seconds(c: Candidate, variant: SideFigures, after_ms: float | None) -> tuple[float | None, str]:
    """What the variant costs before its first useful forward: compile, capture, export or conversion."""
    steady_s = (after_ms or 0.0) / 1e3 * variant.images_per_batch
    prepare_s = float(variant.setup.prepare_s or 0.0)
    extra_first = sum(
        max(0.0, float(s) - steady_s) for s in (variant.setup.first_forward_s, variant.setup.second_forward_s) if s
    )
    if c.compile_mode:
        what = "at the first forwards (a recompile at the second counts), Inductor's cache empty"
        return prepare_s + extra_first, f"torch.compile ({c.compile_mode}) {what}"
    if c.cuda_graph:
        return prepare_s + extra_first, "CUDA graph capture at the first forward"
    runtime, precision = c.variant.runtime, c.variant.precision
    if runtime:
        quantized = {"int8": ", int8 quantization", INT8_STATIC: ", static int8 quantization (calibration)"}
        what = f"ONNX export{quantized.get(precision or '', '')} and {runtime} session (model load, compilation)"
        return prepare_s + extra_first, what
    if precision == BF16_WEIGHTS:
        return prepare_s + extra_first, "the model copied and converted to bf16"
    return None, ""


def baseline_drift(paired: AdviseResult | None) -> float | None:
    """side_drift of the baseline (timed alone before the variant was built in the process)."""
    return side_drift(paired, "baseline")


def side_drift(paired: AdviseResult | None, name: str) -> float | None:
    """How far a side's forward p50 in the ABBA blocks lies outside its own range alone in the same process:
    its p50 over the solo maximum when above it, over the solo minimum when below, else 1.0; None without both.
    Far above 1 for the baseline: the variant slows the baseline beside it (threads that spin after their
    forward), which would flatter the variant; for the variant: torch's pool slows the variant's runtime beside
    it, which would hide the variant's gain. Judged against the solo range, not its median, so a host whose
    load moves between the solo and the blocks (which widens that range) is not mistaken for interference;
    with 4 or more solo times the slowest and the fastest are left out of the range (the baseline's first solo
    forwards can still be cold: yolov7-tiny at 320, solo 54.7, 45.7, 42.5, 39.8 ms, kept ONNX Runtime's
    paired baseline of 56.8 ms, 1.5x its 37 ms alone elsewhere, inside an untrimmed range)."""
    side = paired.sides.get(name) if paired is not None else None
    if side is None:
        return None
    solo, blocks = list((side.solo_forward_ms or {}).values()), list(side.forward_ms.values())
    if not solo or not blocks:
        return None
    p50 = statistics.median(blocks)
    if len(solo) >= 4:
        solo = sorted(solo)[1:-1]
    if p50 > max(solo):
        return p50 / max(solo)
    if p50 < min(solo):
        return p50 / min(solo)
    return 1.0


def _per_process(
    results: Mapping[str, AdviseResult], figure: Callable[[SideFigures], dict[str, float] | None]
) -> list[float] | None:
    """[baseline, variant] medians of a process figure per measured iteration (a side's minor faults, or its
    resident bytes at an iteration's end), the baseline's first process where there are processes; None where a
    side did not record it (resident bytes: advise files from before issue 59)."""
    before, after = _sides(results)
    counts = [figure(before[0]), figure(after)]
    return [statistics.median(c.values()) for c in counts if c] if all(counts) else None


def sides_moved(paired: AdviseResult | None) -> str:
    """The side(s) whose paired forward lay beyond DISTURBED outside its range alone, with how far; "" if none."""
    moved = []
    for name, beside in (("baseline", "the variant"), ("variant", "the baseline")):
        drift = side_drift(paired, name)
        if drift is not None and not (1 / DISTURBED <= drift <= DISTURBED):
            moved.append(f"beside {beside}, the {name}'s forward p50 lay {drift:.2f}x outside its range alone")
    return "; ".join(moved)


def pairing_note(paired: AdviseResult | None, threads: int) -> str:
    """Why a paired figure is not to be used (a side that moved beside the other, named with how far), or ""."""
    moved = sides_moved(paired)
    if not moved:
        return ""
    return (
        f"paired figure not used: {moved} in the same process (the two sides' thread pools share "
        f"{threads} CPU(s)); measured as processes instead (baseline, variant, baseline)"
    )


def busy(load: NeighbourLoad | None) -> bool:
    """Other work took more than DISTURBED_SHARE of the run's CPUs during the process."""
    return load is not None and load.share > DISTURBED_SHARE


LOADED_PAIRED_EVIDENCE = (
    "yolov7-tiny 320 beside one CPU hog on 2 CPUs: OpenVINO bf16 paired 7.64x against 2.43x on the quiet host, "
    "torch's OpenMP threads waiting at each barrier for a descheduled one"
)


def disturbance(results: Mapping[str, AdviseResult], loads: Mapping[str, NeighbourLoad | None]) -> str:
    """Why the figure is not resolved, or "". Pass-level: a process whose CPUs other work took above
    DISTURBED_SHARE of their time (named), or the two baseline processes' forward p50s more than DISTURBED
    apart. Paired: a process whose CPUs other work took above DISTURBED_SHARE of their time, whether or not a
    side moved (pairing_note): interleaving cancels a load that hits both sides alike, and a load does not hit
    every runtime alike (LOADED_PAIRED_EVIDENCE)."""
    if "paired" in results:
        load = loads.get("paired")
        if not busy(load):
            return ""
        moved = sides_moved(results["paired"])
        if moved:
            return f"{moved} in the same process while the paired process was disturbed ({others_text(load)})"
        return (
            f"the paired process was disturbed ({others_text(load)}): interleaving does not cancel a load that the "
            f"two sides bear differently ({LOADED_PAIRED_EVIDENCE}), so its ratio is the loaded host's"
        )
    why = [
        f"the {name} process was disturbed ({others_text(loads.get(name))})"
        for name in PROCESSES
        if name in results and busy(loads.get(name))
    ]
    before, _ = _sides(results)
    p50s = [statistics.median(s.forward_ms.values()) for s in before if s.forward_ms]
    if len(p50s) == 2 and max(p50s) > DISTURBED * min(p50s):
        why.append(
            f"the baseline's forward p50 moved {p50s[0]:.2f} -> {p50s[1]:.2f} ms between its processes before and "
            f"after the variant ({_why_moved(results, loads)})"
        )
    return "; ".join(why)


def _why_moved(results: Mapping[str, AdviseResult], loads: Mapping[str, NeighbourLoad | None]) -> str:
    """What moved the baseline between its processes: other work seen on the CPUs, or none seen (then the host
    itself ran at another speed: on a VM, work of other guests on the same cores is not visible from inside)."""
    watched = [loads.get(name) for name in PROCESSES if name in results]
    if watched and all(load is not None and not busy(load) for load in watched):
        return (
            "no other work was seen on the run's CPUs: the host itself ran at another speed, as a VM's cores do "
            "when other guests share them"
        )
    return "the host's load moved"


def measured_row(
    c: Candidate,
    results: Mapping[str, AdviseResult],
    blocks: list[AdviceBlock],
    loads: Mapping[str, NeighbourLoad | None] | None = None,
    built_first: SideFigures | None = None,
) -> AdviceRow:
    """The row of a candidate whose worker(s) finished; appends a paired result's iteration stamps to `blocks`
    (the trace's ABBA blocks; a pass-level row's processes have none). loads: other work on the run's CPUs
    during each worker process (None: not measured). built_first: the variant's side in the first process that
    built it, whose setup is the row's (a compile's processes after it load the Inductor cache it wrote)."""
    row = AdviceRow(c.key, c.change, c.how, c.finding, per_image=c.per_image)
    row.forward = _speedups(results, _forward)
    row.end_to_end = _speedups(results, _iteration)
    row.neighbours = {k: v for k, v in (loads or {}).items() if v is not None}
    row.disturbed = disturbance(results, loads or {})
    before, after = _sides(results)
    row.stages = stage_deltas(_stage_p50s(before), _stage_p50s([after]))
    variant_result = results.get("paired") or results["variant"]
    variant = variant_result.sides["variant"]
    after_ms = row.forward.after_ms if row.forward else None
    row.setup_s, row.setup_what = setup_seconds(c, built_first or variant, after_ms)
    if variant_result.output:
        row.output = OutputCheck.from_dict(variant_result.output)
        if not row.output.within_tolerance:
            row.status = CHANGED_OUTPUT
            row.reason = changed_reason(row.output)
    elif variant_result.output_error:
        row.reason = f"output not checked: {variant_result.output_error}"
    row.minor_faults = _per_process(results, lambda side: side.minor_faults)
    row.rss_bytes = _per_process(results, lambda side: side.rss_bytes)
    for result in results.values() if "paired" in results else ():  # two processes make no ABBA block
        append_blocks(c.key, result, blocks)
    return row


def append_blocks(key: str, result: AdviseResult, blocks: list[AdviceBlock], after: int = 0) -> None:
    """A paired result's iteration stamps as the trace's ABBA blocks, numbered on from `after` blocks (a
    contender's later process: analysis.advice.race)."""
    for name, side in result.sides.items():
        for i, (start, end, f_start, f_end) in side.stamps.items():
            index = int(i) + 2 * after
            blocks.append(AdviceBlock(key, name, index // 2, index, start, end, f_start, f_end))


def _paired_sides(results: Sequence[AdviseResult], figures: Figures) -> list[tuple[dict[int, float], dict[int, float]]]:
    """Each paired process's (baseline, variant) ms per image, numbered in ABBA order."""
    return [(_per_image(r.sides["baseline"], figures), _per_image(r.sides["variant"], figures)) for r in results]


def forward_ratios(results: Sequence[AdviseResult]) -> list[float]:
    """The forward's block ratios (before / after, per image) of a candidate's paired processes, pooled."""
    return [r for before, after in _paired_sides(results, _forward) for r in speedup_ratios(before, after)]


def pooled_speedups(results: Sequence[AdviseResult]) -> tuple[Speedup | None, Speedup | None]:
    """The forward's and the whole iteration's speed-ups over the blocks of a candidate's paired processes."""
    return pooled_speedup(_paired_sides(results, _forward)), pooled_speedup(_paired_sides(results, _iteration))


def changed_reason(check: OutputCheck) -> str:
    """Why a row's output counts as changed, in words."""
    figures = f"{check.detections_reference}->{check.detections}, {check.matched} matched"
    if check.decides:
        return f"the trained model's detections changed: {figures} ({MATCH_WORDS})"
    if check.unmatched_share > check.tolerance:
        return f"detections changed beyond the {100 * check.tolerance:.0f}% tolerance: {figures}"
    return f"the head moved more than another input moves it ({figures})"
