"""The forward's GFLOPs as the report's headline states them: at the input shapes the measured forwards had.

The FLOP count (collectors/flops.py) runs one forward of the model's sample input, which for a user's program is
its first marked call's: a warm-up call, whose shape no measured call may have had (a program that opens with a
dummy input; detect.py letterboxing each image to its own shape). Where the forwards had several shapes it counts
each shape seen too (FlopsSummary.flops_by_shape). So the headline gives its shape, and is:
- one measured shape: the forward's GFLOPs at it;
- several, each counted: the mean over the measured forwards, weighted by each shape's count in the timing pass
  (the pass whose forward times the report gives), with each shape's own figure;
- otherwise the sample's figure, saying so where no measured forward had that shape, and which measured shapes
  were not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hwprof.render.fmt import sig
from hwprof.schema.summaries_cpu import FlopsSummary

if TYPE_CHECKING:
    from hwprof.schema.run import RunDoc

COUNTS_PASS = "timing"
"""The pass whose measured forwards weigh each shape: the one whose forward times the summary gives."""


def gflops_text(gflops: float) -> str:
    """ "20.90" for a model's size, three significant digits below 1 GFLOP ("0.0874", not "0.09")."""
    return f"{gflops:,.2f}" if gflops >= 1 else sig(gflops)


@dataclass(frozen=True)
class ShapeFlops:
    """One input shape of the measured forwards: how many had it, the forward's GFLOPs at it."""

    shape: str
    forwards: int
    gflops: float | None
    """None: the run counted no FLOPs at this shape."""


@dataclass(frozen=True)
class MeasuredFlops:
    at: str
    """The sample's shape ("1x3x64x96", "" where the run did not record it): model.gflops and the layer table's
    FLOPs are at it."""
    gflops: float
    """The forward's GFLOPs at `at`."""
    measured: tuple[ShapeFlops, ...]
    """The measured forwards' shapes, in the order first seen; empty where the run recorded none (older runs)."""
    other_shapes: tuple[str, ...] = ()
    """The shapes any pass's forwards had besides `at` (warm-up and clean ones included)."""
    per_shape_table: bool = False
    """The layers pass's forwards had several shapes: the report has "layers by input shape"."""

    @property
    def at_measured(self) -> bool:
        """A measured forward had the sample's shape (or the run does not say which shapes they had)."""
        return not self.measured or any(s.shape == self.at for s in self.measured)

    @property
    def only_sample(self) -> bool:
        """Every measured forward had the sample's shape (or the run does not say)."""
        return all(s.shape == self.at for s in self.measured)

    @property
    def mean(self) -> float | None:
        """The mean GFLOPs of the measured forwards, where they had several shapes, each counted; else None."""
        if len(self.measured) < 2 or any(s.gflops is None for s in self.measured):
            return None
        return sum((s.gflops or 0.0) * s.forwards for s in self.measured) / sum(s.forwards for s in self.measured)

    def headline(self) -> str:
        """ "20.90 GFLOPs at 1x3x640x640", or the mean over the measured forwards with each shape's figure."""
        at = f" at {self.at}" if self.at else " (at an input shape not recorded)"
        if self.only_sample:
            return f"{gflops_text(self.gflops)} GFLOPs{at}"
        mean = self.mean
        n = sum(s.forwards for s in self.measured)
        if mean is not None:
            each = ", ".join(f"{s.forwards} at {s.shape}: {gflops_text(s.gflops or 0.0)} GFLOPs" for s in self.measured)
            return f"{gflops_text(mean)} GFLOPs, the mean over the {n} measured forwards ({each})"
        one = self.measured[0] if len(self.measured) == 1 else None
        if one is not None and one.gflops is not None:
            return f"{gflops_text(one.gflops)} GFLOPs at {one.shape}, the measured forwards' shape"
        parts = "; ".join(
            f"{s.forwards} at {s.shape}, "
            + (f"{gflops_text(s.gflops)} GFLOPs" if s.gflops is not None else "FLOPs not counted")
            for s in self.measured
            if s.shape != self.at
        )
        k = sum(s.forwards for s in self.measured if s.shape == self.at)
        where = (
            f"the shape of {k} of the {n} measured forwards (the others"
            if k
            else "a shape no measured forward had (they had"
        )
        return f"{gflops_text(self.gflops)} GFLOPs{at}, {where}: {parts})"

    def layer_table_note(self) -> str:
        """Where the forwards had another shape than the sample's: the layer table's FLOPs are at the sample's,
        and whether a measured forward had it; '' otherwise."""
        if not self.other_shapes:
            return ""
        where = "" if self.at_measured else ", a shape no measured forward had"
        table = ', every shape\'s in "layers by input shape"' if self.per_shape_table else ""
        return f"; the layer table's FLOPs are at {self.at or 'the sample input'}{where}{table}"


def measured_flops(run: RunDoc) -> MeasuredFlops | None:
    """The run's forward FLOPs at the measured forwards' shapes; None where the FLOPs were not counted."""
    model = run.model
    if not model.gflops:
        return None
    at = "x".join(str(n) for n in model.input_shape or [])
    summary = run.entry(FlopsSummary.NAME).summary
    by_shape = (summary.flops_by_shape if isinstance(summary, FlopsSummary) else None) or {}

    def at_shape(shape: str) -> float | None:
        flops = by_shape.get(shape)
        if isinstance(flops, int | float):
            return float(flops) / 1e9
        return float(model.gflops or 0.0) if shape == at else None

    measured = tuple(ShapeFlops(shape, n, at_shape(shape)) for shape, n in measured_forwards(run).items())
    seen = dict.fromkeys(shape for e in run.passes.values() if e.inputs is not None for shape in e.inputs.shapes)
    layers = run.passes.get("layers")
    mixed = layers is not None and layers.inputs is not None and layers.inputs.mixed
    return MeasuredFlops(at, float(model.gflops), measured, tuple(s for s in seen if s != at), mixed)


def measured_forwards(run: RunDoc) -> dict[str, int]:
    """Each input shape of the measured forwards -> how many had it, in the timing pass (another pass's where the
    timing pass recorded none); {} where no pass recorded its inputs."""
    names = [COUNTS_PASS, *(name for name in run.passes if name != COUNTS_PASS)]
    for name in names:
        entry = run.passes.get(name)
        inputs = entry.inputs if entry is not None else None
        counts = {shape: calls.measured for shape, calls in (inputs.shapes if inputs else {}).items() if calls.measured}
        if counts:
            return counts
    return {}
