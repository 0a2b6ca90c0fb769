"""What a run's workload says of itself: the one place that tells hwprof's own pipeline from a user's program.

hwprof measures two workloads: its own pipeline (`collect --model`: it owns the loop, the batch and the image
size) and a user's program (`collect -- python SCRIPT`: the program owns its loop and its input; hwprof finds its
model). Both leave the same run directory. The analysis, the report, the trace and the advisor ask this
description what they need (the input's shape, the words for the measured loop, the header's lines about the
workload, the problems the exit status names, the note under the stages table, whether time no stage claims is a
stage of its own) and never ask which workload ran: `workload_view` is the only branch, and a third workload is
one more function here. Pure: built from run.json alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hwprof.analysis.program.command import program_command
from hwprof.analysis.workload_program import STAGES_NOTE, program_lines, program_problems
from hwprof.schema.run import ModelDoc, RunDoc


@dataclass(frozen=True)
class WorkloadView:
    """The run's workload as the layers above it need it."""

    kind: str
    """"pipeline" or "program": a label for people (run.json, the summary), never a branch."""
    batch: int | None
    """Images per forward as the workload ran it; None where the run does not say."""
    imgsz: int | None
    """The input's longest side as the workload ran it; None where the run does not say."""
    sizes: str
    """"batch 1, imgsz 640" where the workload chose its input's sizes (the pipeline); "" where the program did
    (its own input, shown on the model line)."""
    measured: str
    """What one measured unit is: "measured iterations" or "measured calls of the model"."""
    compared_name: str | None
    """The model's name as runs are matched by (compare); None where the model has no name of hwprof's (a
    program's: matched by its layer table alone)."""
    weights: str | None = None
    """The report's weights line where the workload says it ("the program's own"); None: from model.json."""
    header: list[tuple[str, str]] = field(default_factory=list)
    """The report header's lines about the workload (a program's command, the model found and why, its calls)."""
    problems: list[str] = field(default_factory=list)
    """The exit status's lines beyond the passes' own (a program that called no model)."""
    stages_note: str = ""
    """What the stages table's rows are, where the workload's stages need saying."""
    unclaimed_stage: bool = False
    """The time inside an iteration that no stage claims is a stage of its own ("other") in the trace: the
    workload's own code between its stages (a program), where the pipeline's stages fill the iteration."""
    command: str | None = None
    """The command the user gave, for the first screen (a program's `python detect.py --source img/`); None where
    hwprof's own options say what ran (the pipeline: its model line)."""
    own_input: bool = False
    """The workload chose its input's shapes (a program): the first screen gives its forwards' input shapes, one
    shape too; the pipeline's follow from --imgsz and --batch (its run line), so only several are said."""
    backward_stage: bool = False
    """A stage named "backward" is the workload's backward pass after its forward (a program's training step:
    hwprof.program.known_stages); the pipeline only infers."""
    unnamed_model: str = "?"
    """What a list of runs (`hwprof runs`) calls a model without a name: "program" for a program's (found in it,
    never named); "?" for the pipeline's (a run that does not say)."""


def workload_view(run: RunDoc) -> WorkloadView:
    """The description of the workload `run` measured."""
    return _program_view(run) if run.config.program is not None else _pipeline_view(run)


def _pipeline_view(run: RunDoc) -> WorkloadView:
    cfg = run.config
    return WorkloadView(
        kind="pipeline",
        batch=cfg.batch,
        imgsz=cfg.imgsz,
        sizes=f"batch {cfg.batch}, imgsz {cfg.imgsz}",
        measured="measured iterations",
        compared_name=run.model.name or cfg.model,
    )


def _program_view(run: RunDoc) -> WorkloadView:
    batch, imgsz = _input_shape(run.model)  # the program's own input (its first, as model.json has it)
    return WorkloadView(
        kind="program",
        batch=batch,
        imgsz=imgsz,
        sizes="",
        measured="measured calls of the model",
        compared_name=None,
        weights="the program's own",
        header=program_lines(run),
        problems=program_problems(run),
        stages_note=STAGES_NOTE,
        unclaimed_stage=True,
        command=program_command(run.config.program) if run.config.program is not None else None,
        own_input=True,
        backward_stage=True,
        unnamed_model="program",
    )


def _input_shape(model: ModelDoc) -> tuple[int | None, int | None]:
    """(batch, longest side) of the model's sample input as model.json has it (NCHW); (None, None) otherwise."""
    shape = [int(x) for x in model.input_shape or [] if isinstance(x, int)]
    return (shape[0], max(shape[2:])) if len(shape) == 4 else (None, None)
