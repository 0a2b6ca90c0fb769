"""How a model without --weights was initialised: model.json's and run.json's model "init"."""

from __future__ import annotations

from dataclasses import dataclass

from hwprof.schema.codec import Record


@dataclass(kw_only=True)
class InitDoc(Record):
    """How a model without --weights was initialised (hwprof.workload.init_scale): model.json's and run.json's
    model "init". Absent in runs made before it existed (their seeded init kept no signal: see the module)."""

    method: str | None = None
    """"unit variance": each convolution scaled so its output has unit variance."""
    text: str | None = None
    """What the report says, e.g. "seeded (seed 0), convolutions scaled to unit variance on the run's first
    batch (bus.jpg, letterboxed to 320x320)"."""
    calibrated_on: str | None = None
    model: str | None = None
    seed: int | None = None
    convolutions: int | None = None
    file: str | None = None
    """The saved scales, relative to the run directory (every process of the run applies the same)."""
    sha256: str | None = None
    not_saved: str | None = None
    """Why the scales could not be saved (a full disk, the file-size limit): each later process of the run
    computed its own."""
    computed_here: bool | None = None
    """True in the process that computed the scales; False where they were read from the run's file."""
    compute_seconds: float | None = None
    """What computing the scales took (one forward with a scaling per convolution)."""
    seconds: float | None = None
    """What the scaling took in this process (computing or loading and applying)."""
