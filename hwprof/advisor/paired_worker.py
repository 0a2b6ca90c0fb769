"""The child process of one candidate: `python -P -m hwprof.advisor.paired_worker SPEC.json`.

mode "paired": the baseline (A) and the variant (B) are built side by side in this process and run on the
same images in ABBA blocks: iterations A 2b, B 2b, B 2b+1, A 2b+1 (side iteration k reads the same images on
both sides). Before the blocks: the baseline alone (before the variant is built), the variant's output against
the fp32 reference on the first batch, and each side's warm-up; after them, the variant alone (B B B B). Each
side's forward alone is what its paired forward is checked against: pairing in one process is not neutral
for every runtime (a second thread pool beside torch's can slow either side). mode "baseline" / "variant": one
side alone (a change that needs a process of its own, or a pairing that moved a side), the same iterations one
after another.

Writes the spec's "out" file (JSON): per side its forward and iteration ms by side iteration, its set-up
times and runtime info; the blocks' timestamps for the trace; the output check. Progress on stdout as JSON
lines, as the pass workers do.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.advisor.process_env import TUNABLES, mapped_preloads
from hwprof.advisor.program_failure import PROGRAM_FAILED_EXIT, ProgramFailed
from hwprof.advisor.sides import Side, build_side, reference_config
from hwprof.core.config import RunConfig
from hwprof.core.spans import measured_spans
from hwprof.rundir.advise_files import read_advise_spec, write_advise_result
from hwprof.schema.advise_result import AdviseResult, AdviseSpec, SideFigures, SideSetup
from hwprof.schema.codec import JsonObject
from hwprof.session.worker_io import progress

if TYPE_CHECKING:
    import torch

    from hwprof.analysis.advice.table import OutputCheck

PAIRED_MODE = "paired"
BASELINE_OUTPUT = "baseline-output.pt"
"""The baseline process's raw outputs on the check's batches (mode "baseline"), in the candidate's work folder: the
reference of a variant that differs by its environment only (an allocator), whose own process cannot hold a
reference free of that environment."""
CHECK_IMAGES = 16
"""The output check's detections are compared on at most this many of the run's images (each a forward of the
reference and of the variant, outside the timed blocks)."""
SOLO_ITERATIONS = 4


def side_figures(side: Side) -> SideFigures:
    """The side's measured forward and iteration ms by side iteration, and its time stamps for the trace."""
    spans = measured_spans(side.log.markers)
    forward = {s.iteration: s.dur_ns / 1e6 for s in spans if s.kind == "stage" and s.name == "forward"}
    stages: dict[str, dict[str, float]] = {}
    for s in spans:
        if s.kind == "stage" and s.name != "forward":
            stages.setdefault(s.name, {})[str(s.iteration)] = s.dur_ns / 1e6
    iteration = {s.iteration: s.dur_ns / 1e6 for s in spans if s.kind == "iteration"}
    forward_at = {s.iteration: (s.start_ns, s.end_ns) for s in spans if s.kind == "stage" and s.name == "forward"}
    stamps = {
        str(s.iteration): [s.start_ns, s.end_ns, *forward_at.get(s.iteration, (0, 0))]
        for s in spans
        if s.kind == "iteration"
    }
    return SideFigures.of(
        forward_ms=by_iteration(forward),
        iteration_ms=by_iteration(iteration),
        stamps=stamps,
        batch=side.config.batch,
        threads=side.config.threads,
        setup=SideSetup.of(**side.setup),
        minor_faults=by_iteration({k: float(v) for k, v in side.faults.items()}),
        rss_bytes=by_iteration({k: float(v) for k, v in side.rss.items()}),
        runtime={k: v for k, v in side.runtime.info.to_json().items() if isinstance(v, str | int | float | bool)},
        stage_ms=stages,
    )


def by_iteration(ms: dict[int, float]) -> dict[str, float]:
    """Figures by side iteration, keyed as the out file holds them."""
    return {str(k): v for k, v in ms.items()}


def output_check(
    variant: Side,
    images: list[Path],
    work_dir: Path,
    baseline: Side | None,
    run_dir: Path | None = None,
    saved: Path | None = None,
) -> OutputCheck:
    """The variant against the fp32 reference: the head on the first batch, the detections on each of the run's
    batches (check_batches); `saved`: the baseline process's outputs (on those batches and on the first one's
    mirror image), the reference of a variant that differs by its environment only."""
    from hwprof.advisor.output_check import check_output
    from hwprof.workload.outputs import mirrored

    batches = check_batches(variant)
    trained = variant.pipeline.built.weights is not None
    if saved is not None and saved.is_file():
        import torch

        reference_outs, other = torch.load(saved, weights_only=True)
        reader = variant.pipeline
    else:
        ref_config = reference_config(variant.config)
        if baseline is not None and baseline.config == ref_config:
            reference = baseline
        else:
            reference = build_side("reference", ref_config, images, work_dir, run_dir=run_dir)
        reference_outs, other = [reference.forward(b) for b in batches], reference.forward(mirrored(batches[0]))
        reader = reference.pipeline
    outs = [variant.forward(b) for b in batches]
    more = list(zip(reference_outs[1:], outs[1:], strict=True))
    return check_output(reader, reference_outs[0], variant.pipeline, outs[0], other, more, trained)


def check_batches(side: Side) -> list[torch.Tensor]:
    """The batches an output check compares: each of the run's images once (at most CHECK_IMAGES, whole batches),
    or a video's first batch of frames; the first is the one whose head is compared."""
    return list(side.pipeline.calibration(CHECK_IMAGES).batches())


def run(spec: AdviseSpec) -> AdviseResult:
    from hwprof.workload.images import discover

    mode = spec.mode or PAIRED_MODE
    work_dir = Path(spec.work_dir)
    run_dir = Path(spec.run_dir) if spec.run_dir else None
    base_config = RunConfig.from_dict(spec.baseline)
    images = discover(base_config.images).paths
    blocks, warmup = spec.blocks, spec.warmup
    sides: list[Side] = []
    progress(phase="build", done=0, total=1)
    solo: dict[str, float] = {}
    if mode in (PAIRED_MODE, "baseline"):
        sides.append(build_side("baseline", base_config, images, work_dir, run_dir=run_dir))
        if mode == PAIRED_MODE:
            solo = solo_forward_ms(sides[0], warmup)
    env_only = spec.variant == spec.baseline and not spec.compile_mode and not spec.cuda_graph
    saved = work_dir / BASELINE_OUTPUT if env_only and mode != PAIRED_MODE else None
    if saved is not None and mode == "baseline":
        save_output(sides[0], saved)
    if mode in (PAIRED_MODE, "variant"):
        variant_config = RunConfig.from_dict(spec.variant)
        sides.append(
            build_side("variant", variant_config, images, work_dir, spec.compile_mode, spec.cuda_graph, run_dir)
        )
    result = AdviseResult.of(mode=mode)
    variant = next((s for s in sides if s.name == "variant"), None)
    if variant is not None:
        try:
            baseline = sides[0] if len(sides) == 2 else None
            check = output_check(variant, images, work_dir, baseline, run_dir, saved)
            result.update(output=check.to_dict())
        except Exception as exc:  # the timing still stands; the row says why the output is unchecked
            result.update(output_error=f"{type(exc).__name__}: {exc}")
    for i in range(warmup):
        for side in sides:
            side.run(i - warmup, warmup=True)
    race_after = spec.first_blocks if mode == PAIRED_MODE and 0 < spec.first_blocks < blocks else 0
    _measure_blocks(sides, blocks, race_after, result, spec.race_bar)
    result.update(sides={s.name: side_figures(s) for s in sides})
    if len(sides) == 1:  # a process of its own: what of its environment took
        result.sides[sides[0].name].update(preloaded=mapped_preloads(), glibc_tunables=os.environ.get(TUNABLES))
    if solo:
        result.sides["baseline"].update(solo_forward_ms=solo)
    if mode == PAIRED_MODE and variant is not None:
        variant.log.markers.clear()  # the blocks' figures are taken: the solo block's never mix with them
        result.sides["variant"].update(solo_forward_ms=solo_forward_ms(variant, 1))
    return result


def _measure_blocks(
    sides: list[Side], blocks: int, race_after: int, result: AdviseResult, bar: JsonObject | None
) -> None:
    """The ABBA blocks (one side alone: its iterations two by two); after `race_after` of them (0: never) the
    candidate leaves where it is out of the race, and `result.stopped` says after how many and why."""
    total = 2 * blocks * len(sides)
    done = 0
    for b in range(blocks):
        if b == race_after and b and (why := _out_of_race(sides, result, bar)):
            result.update(stopped=f"after {b} of {blocks} blocks: {why}")
            return
        order = [(sides[0], 2 * b), (sides[-1], 2 * b), (sides[-1], 2 * b + 1), (sides[0], 2 * b + 1)]
        if len(sides) == 1:
            order = order[:2]
            order[1] = (sides[0], 2 * b + 1)
        for side, k in order:
            side.run(k, warmup=False)
            done += 1
            progress(phase="measure", done=done, total=total)


def _out_of_race(sides: list[Side], result: AdviseResult, bar: JsonObject | None) -> str:
    """Why this candidate stops after its first blocks (analysis.advice.race), or "" where it runs on."""
    from hwprof.analysis.advice.race import out_of_race, output_failed
    from hwprof.analysis.advice.rows import paired_forward

    speedup = paired_forward(side_figures(sides[0]), side_figures(sides[-1]))
    return out_of_race(speedup, output_failed(result), bar)


def save_output(side: Side, path: Path) -> None:
    """The side's raw outputs on the check's batches and on the first one's mirror image (the check's input
    sensitivity), for the variant's process to check against."""
    import torch

    from hwprof.workload.outputs import mirrored

    batches = check_batches(side)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(([side.forward(b) for b in batches], side.forward(mirrored(batches[0]))), path)


def solo_forward_ms(side: Side, warmup: int) -> dict[str, float]:
    """A side's forward alone, with no iteration of the other side between: the baseline's before the variant
    exists in the process, the variant's after the blocks (a warm-up iteration first, so that the last block's
    baseline is over). What each side's paired forward is checked against: a variant whose threads spin beside
    the baseline slows it, which would flatter the variant; torch's pool beside another runtime's slows the
    variant, which would hide its gain. Its markers are dropped after, so they never mix with the blocks'."""
    for i in range(warmup):
        side.run(i - warmup, warmup=True)
    for k in range(SOLO_ITERATIONS):
        side.run(k, warmup=False)
    forward = side_figures(side).forward_ms
    side.log.markers.clear()
    side.faults.clear()
    return forward


def main(argv: list[str], run_spec: Callable[[AdviseSpec], AdviseResult] | None = None) -> int:
    """Run the spec at argv[0] and write its out file; `run_spec`: another worker's run (a program's)."""
    spec = read_advise_spec(Path(argv[0]))
    out = Path(spec.out)
    try:
        result = (run_spec or run)(spec)
    except ProgramFailed as exc:  # the program's own error, its traceback above: no traceback of hwprof's
        from hwprof.session.pass_runner import ERROR_PREFIX

        print(f"{ERROR_PREFIX}{exc}", file=sys.stderr)
        write_advise_result(out, AdviseResult.of(error=str(exc)))
        return PROGRAM_FAILED_EXIT
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        write_advise_result(out, AdviseResult.of(error=f"{type(exc).__name__}: {exc}"))
        return 1
    write_advise_result(out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
