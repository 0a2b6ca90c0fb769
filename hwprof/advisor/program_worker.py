"""The child process of one candidate on a user's program: `python -P -m hwprof.advisor.program_worker SPEC.json`.

It runs the program unmodified in this process (hwprof.program.launch), finds its model as a collect's pass does
(hwprof.program.finder), and gives each of the program's calls of it to the unchanged or the changed model by a
schedule (hwprof.program.advise_calls):
- mode "paired": the baseline and the variant alternate over the program's own calls in ABBA blocks, with each
  side's calls alone before and after (as the built-in pipeline's paired worker); the output check runs after
  the program stopped: the unchanged model on the inputs of the variant's first measured calls, against what the
  variant returned on them;
- mode "baseline": the unchanged program; it saves the inputs and raw outputs of its first measured calls
  (BASELINE_OUTPUT), and the model's output on each input mirrored (the check's input sensitivity);
- mode "timed": the unchanged program's calls timed, and nothing more (the paired gate of two programs);
- mode "variant": the changed program (its environment, or the change at its model's call); its outputs of the
  same measured calls are checked against the baseline's saved ones, where the program gave the model the same
  inputs in both runs (a program whose inputs differ between runs cannot be checked so, and the row says so).

The output check is the built-in's (hwprof.advisor.output_check): the head against the reference's, detections
after NMS matched one to one, the same tolerance and CHANGED OUTPUT rule; of the checked calls the worst is kept.
"""

from __future__ import annotations

import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from hwprof.advisor.output_check import check_output
from hwprof.advisor.process_env import TUNABLES, mapped_preloads, minor_faults, resident_bytes
from hwprof.advisor.program_budget import COUNT_MODE
from hwprof.advisor.program_failure import ProgramFailed, failure_line
from hwprof.analysis.advice.output import OutputCheck
from hwprof.core.config import RunConfig
from hwprof.core.program_spec import ProgramSpec
from hwprof.program.advise_calls import (
    BASELINE,
    VARIANT,
    AdviseCalls,
    Change,
    SideCalls,
    Step,
    count_steps,
    paired_steps,
    single_steps,
)
from hwprof.program.finder import ModelFinder, ProgramAbort
from hwprof.program.launch import ProgramEnd, run_program
from hwprof.schema.advise_result import AdviseResult, AdviseSpec, SideFigures, SideSetup
from hwprof.workload.outputs import head_of, mirrored
from hwprof.workload.zoo import OUTPUT_XYWH_CLS_T, OUTPUT_XYWH_OBJ_CLS

PAIRED_MODE = "paired"
TIMED_MODE = "timed"
"""The unchanged program's calls timed, nothing saved: one side of the gate's process-paired blocks
(hwprof.api.gate_paired, two programs that cannot share one process)."""
BASELINE_OUTPUT = "program-baseline-output.pt"


def change_of(spec: AdviseSpec) -> Change:
    """What the spec's variant changes against its baseline."""
    base, var = RunConfig.from_dict(spec.baseline), RunConfig.from_dict(spec.variant)
    return Change(
        channels_last=var.channels_last and not base.channels_last,
        bf16=var.precision == "bf16" and base.precision != "bf16",
        compile_mode=spec.compile_mode,
        threads=var.threads if var.threads != base.threads else None,
    )


@dataclass
class HeadReader:
    """NMS and candidates of a YOLO head as hwprof's pipeline reads them (check_output's `Detector`), for a
    program's model: its head's layout is read from its shape."""

    output_format: str
    conf: float
    iou: float

    def nms(self, output: Any) -> list[Any]:
        from ultralytics.utils.nms import non_max_suppression

        from hwprof.workload.pipeline import to_yolo_layout

        prediction = to_yolo_layout(head_of(output).float().cpu(), self.output_format)
        return list(non_max_suppression(prediction, self.conf, self.iou))

    def count_candidates(self, output: Any) -> int:
        from hwprof.workload.pipeline import to_yolo_layout

        prediction = to_yolo_layout(head_of(output).float().cpu(), self.output_format)
        return int((prediction[:, 4:, :].amax(dim=1) > self.conf).sum())


def head_reader(output: Any, config: RunConfig) -> HeadReader:
    """The output's YOLO head layout: (batch, 4 + classes, boxes) as ultralytics', or (batch, boxes, 5 + classes)
    as YOLOv7's (fewer rows than boxes in the first); ValueError for an output that is neither."""
    import torch

    head = head_of(output)
    if not isinstance(head, torch.Tensor) or head.dim() != 3:
        shape = tuple(head.shape) if isinstance(head, torch.Tensor) else type(head).__name__
        raise ValueError(
            f"the model's output {shape} is not a YOLO head ((batch, 4+classes, boxes) or (batch, boxes, 5+classes)):"
            " its detections cannot be compared"
        )
    layout = OUTPUT_XYWH_CLS_T if head.shape[1] < head.shape[2] else OUTPUT_XYWH_OBJ_CLS
    return HeadReader(layout, config.conf, config.iou)


def worst(checks: list[OutputCheck]) -> OutputCheck:
    """The check furthest from a pass: out of tolerance first, then unmatched detections, then the head's error
    against what another input changes."""

    def key(c: OutputCheck) -> tuple[bool, float, float]:
        seen = c.head_sensitivity or 0.0
        return (not c.within_tolerance, c.unmatched_share, c.head_max_abs / seen if seen else c.head_max_abs)

    return max(checks, key=key)


def check_calls(
    reference: list[tuple[Any, Any, Any]], variant: list[tuple[Any, Any]], config: RunConfig
) -> OutputCheck:
    """The variant's (input, output) of its measured calls against the reference's (input, output, output on the
    input mirrored) of the same calls; ValueError where the inputs differ or there is none."""
    import torch

    checks = []
    for k, ((x_ref, out_ref, other), (x, out)) in enumerate(zip(reference, variant, strict=False)):
        if x_ref.shape != x.shape or not torch.equal(x_ref, x):
            raise ValueError(
                f"the program gave its model another input in measured call {k} of the baseline's run and the "
                "variant's: its output cannot be compared (a program whose input differs from run to run)"
            )
        reader = head_reader(out_ref, config)
        checks.append(check_output(reader, out_ref, reader, out, other))
    if not checks:
        raise ValueError("no measured call of the model to check")
    return worst(checks)


def reference_outputs(module: Any, calls: list[tuple[Any, Any]]) -> list[tuple[Any, Any, Any]]:
    """The unchanged model's (input, output, output on the input mirrored) on each call's input."""
    import torch

    from hwprof.program.advise_calls import detached

    with torch.no_grad():
        return [(x, detached(module(x)), detached(module(mirrored(x)))) for x, _ in calls]


def side_figures(side: SideCalls, solo: bool) -> SideFigures:
    def keyed(ms: dict[int, float]) -> dict[str, float]:
        return {str(k): v for k, v in sorted(ms.items())}

    figures = SideFigures.of(
        forward_ms=keyed(side.forward_ms),
        iteration_ms=keyed(side.iteration_ms),
        stamps={str(k): v for k, v in side.stamps.items()},
        batch=side.batch,
        threads=max(side.threads) if side.threads else None,
        setup=SideSetup.of(**side.setup),
        minor_faults=keyed(side.faults),
        rss_bytes=keyed(side.rss),
        runtime={"runtime": "torch", "program": True},
    )
    if solo:
        figures.update(solo_forward_ms=keyed(side.solo_ms))
    return figures


class Progress:
    """Progress lines on the worker's own stdout (the program's stdout goes to its log)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def __call__(self, done: int, total: int) -> None:
        import json

        print(json.dumps({"phase": "measure", "done": done, "total": total}), file=self.stream, flush=True)


def run(spec: AdviseSpec) -> AdviseResult:
    mode = spec.mode or PAIRED_MODE
    base = RunConfig.from_dict(spec.baseline)
    config = base if mode in ("baseline", TIMED_MODE) else RunConfig.from_dict(spec.variant)
    program: ProgramSpec | None = base.program
    if program is None:
        raise ValueError("the advised run is not a program's")
    change = change_of(spec) if mode not in ("baseline", TIMED_MODE) else Change()
    steps = schedule(mode, spec)
    calls = AdviseCalls(steps, change, Progress(sys.stdout), minor_faults, resident_bytes)
    module = program_calls(program, config, calls, mode)
    if mode == COUNT_MODE:  # advise's count of the program's calls (hwprof.advisor.program_budget)
        return AdviseResult.of(mode=mode, calls=calls.index)
    if not calls.done:
        raise ValueError(
            f"the program ended after {calls.index} calls of its model once found; advise's schedule needs "
            f"{len(steps)} (warm-up {max(1, spec.warmup)}, {max(1, spec.blocks)} blocks): give it more input (more "
            "frames), or fewer --blocks"
        )
    result = AdviseResult.of(mode=mode)
    result.update(sides={n: side_figures(s, mode == PAIRED_MODE) for n, s in calls.sides.items()})
    threads_error = threads_taken(change, calls)
    if threads_error:
        raise ValueError(threads_error)
    if mode == TIMED_MODE:
        return result
    if mode != PAIRED_MODE:
        result.sides[mode].update(preloaded=mapped_preloads(), glibc_tunables=os.environ.get(TUNABLES))
    check_outputs(result, Path(spec.work_dir) / BASELINE_OUTPUT, module, calls, base)
    return result


def program_calls(program: ProgramSpec, config: RunConfig, calls: AdviseCalls, mode: str) -> Any:
    """The program run unmodified in this process, its model's calls given to `calls` by their schedule; the model
    found (its module). ProgramFailed or ValueError where the program failed (program_failure) or never called a
    model."""
    import torch

    torch.set_num_threads(config.threads)
    finder = ModelFinder(on_found=calls.adopt, model_path=program.model_path)
    calls.on_first_call = finder.close
    finder.install()
    try:
        end = run_program(program)
    except ProgramAbort as exc:
        raise ValueError(str(exc)) from None
    finally:
        finder.close()
        calls.finish()
    failure = program_failure(end, calls, mode)
    if failure is not None:
        raise failure
    if calls.found is None:
        raise ValueError(finder.never_found())
    return calls.found.module


def check_outputs(result: AdviseResult, saved: Path, module: Any, calls: AdviseCalls, base: RunConfig) -> None:
    """The output check's part of the result (mode "paired" and "variant"), or the reference a variant's run checks
    against saved at `saved` (mode "baseline"). Where it fails, the timing still stands: the result says why the
    output is unchecked (output_error)."""
    import torch

    try:
        if result.mode == "baseline":
            saved.parent.mkdir(parents=True, exist_ok=True)
            torch.save(reference_outputs(module, calls.side(BASELINE).checked), saved)
        else:
            if result.mode == PAIRED_MODE:
                reference = reference_outputs(module, calls.side(VARIANT).checked)
            elif saved.is_file():
                reference = torch.load(saved, weights_only=False)
            else:
                raise ValueError(f"the baseline's run saved no outputs ({saved})")
            result.update(output=check_calls(reference, calls.side(VARIANT).checked, base).to_dict())
    except Exception as exc:  # the timing still stands; the row says why the output is unchecked
        traceback.print_exc(file=sys.stderr)
        result.update(output_error=f"{type(exc).__name__}: {exc}")


def program_failure(end: ProgramEnd, calls: AdviseCalls, mode: str) -> ValueError | None:
    """The program's own failure (it raised, or exited non-zero) before the schedule was done, in its own words
    (hwprof.advisor.program_failure); None where it did not fail. ProgramFailed where nothing of its run had
    changed yet (advise then stops), else a ValueError: the candidate's failure, the change having run."""
    if end.ok or (calls.found is not None and calls.done):  # done: its figures are whole, whatever came after
        return None
    where = "before it called its model" if calls.found is None else f"after {calls.index} calls of its model"
    line = failure_line(end.error, end.exit_code)
    unchanged = mode in ("baseline", TIMED_MODE, COUNT_MODE) or (
        mode == PAIRED_MODE and calls.change.threads is None and VARIANT not in calls.sides
    )
    if unchanged:
        return ProgramFailed(f"the program failed {where}: {line}")
    return ValueError(f"the program failed with the change, {where}: {line}")


def schedule(mode: str, spec: AdviseSpec) -> list[Step]:
    """The worker's steps: paired, one side alone, or (mode "count") the unchanged model up to spec.calls calls."""
    warmup, blocks = max(1, spec.warmup), max(1, spec.blocks)
    if mode == COUNT_MODE:
        return count_steps(spec.calls)
    if mode == TIMED_MODE:
        return single_steps(BASELINE, warmup, blocks)
    return paired_steps(warmup, blocks) if mode == PAIRED_MODE else single_steps(mode, warmup, blocks)


def threads_taken(change: Change, calls: AdviseCalls) -> str:
    """Why the variant's thread count did not hold at its measured calls ("" when it did): the program sets its
    own, which cannot be changed from outside its code."""
    if change.threads is None:
        return ""
    seen = calls.side(VARIANT).threads
    if seen and seen != {change.threads}:
        return (
            f"the program sets its own thread count (torch.get_num_threads() was {sorted(seen)} at its measured "
            f"calls, not {change.threads}): it cannot be changed from outside the program's code; change its "
            "torch.set_num_threads call"
        )
    return ""


if __name__ == "__main__":
    from hwprof.advisor.paired_worker import main

    sys.exit(main(sys.argv[1:], run))
