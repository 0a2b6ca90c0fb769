"""A variant's output against the fp32 reference: the advice table's output check (hwprof.analysis.advice).

Its verdict reads the head's error against the reference's own input sensitivity (how far the head moves on
another input), so a check that could not have failed is shown as blind, never as a pass.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from hwprof.schema.advice_file import OutputCheckDoc
from hwprof.schema.runtime_checks import CHANGED, output_verdict, verdict_text

DETECTION_TOLERANCE = 0.01
"""A variant whose detections after NMS differ from the fp32 reference's in more than this share of them
(unmatched boxes, either side, over the reference's count) has changed the output: it is never advice."""
MATCH_IOU = 0.5


@dataclass
class OutputCheck:
    """The variant's output against the fp32 reference (the fused torch model) on the first batch."""

    head_max_abs: float
    head_range: float
    """max - min of the reference head: the scale against which head_max_abs is read."""
    candidates_reference: int
    """Boxes above the confidence threshold before NMS."""
    candidates: int
    detections_reference: int
    """After NMS."""
    detections: int
    matched: int
    """Variant detections with a reference detection of the same class at IoU >= MATCH_IOU (one to one)."""
    tolerance: float = DETECTION_TOLERANCE
    head_sensitivity: float | None = None
    """Max |Δ| of the reference's head between two different inputs: what head_max_abs is read against
    (hwprof.schema.runtime_checks.output_verdict); None in advice made before it was measured."""
    raw_max_abs: float | None = None
    """Max |Δ| of the raw per-level maps before the head's decoding."""
    raw_sqnr_db: float | None = None
    """The raw maps' signal to error ratio (None where equal)."""

    @property
    def unmatched_share(self) -> float:
        unmatched = (self.detections_reference - self.matched) + (self.detections - self.matched)
        return unmatched / max(self.detections_reference, 1)

    @property
    def verdict(self) -> str | None:
        """ "pass", "changed" or "blind" for the head against its input sensitivity (None: not measured)."""
        return output_verdict(self.head_max_abs, self.head_sensitivity, self.head_range)

    @property
    def within_tolerance(self) -> bool:
        """Detections matched within the tolerance and a head error no larger than another input's change. A
        blind check is not a failure here (nothing was seen); it is shown as blind, never as a pass."""
        return self.unmatched_share <= self.tolerance and self.verdict != CHANGED

    @property
    def head_relative(self) -> float:
        return self.head_max_abs / self.head_range if self.head_range > 0 else 0.0

    def text(self) -> str:
        seen = verdict_text(self.verdict, self.head_max_abs, self.head_sensitivity)
        # an environment change (threads, malloc) runs the same code: a bit-identical head is what it should give,
        # and is said as such rather than as a 0% error (a rounding change from another thread split would show)
        head = (
            "head bit-identical"
            if self.head_max_abs == 0
            else f"head max|d| {self.head_max_abs:.3g} ({100 * self.head_relative:.2g}% of range)"
        )
        return (
            head + (f", {seen}" if seen else "") + f"; before NMS {self.candidates_reference}->{self.candidates}; "
            f"detections {self.detections_reference}->{self.detections} ({self.matched} matched)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "unmatched_share": self.unmatched_share,
            "within_tolerance": self.within_tolerance,
            "head_relative": self.head_relative,
            **({"verdict": self.verdict} if self.verdict is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OutputCheck:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

    @classmethod
    def from_doc(cls, doc: OutputCheckDoc) -> OutputCheck:
        """From advice.json's record of it."""
        tolerance = doc.tolerance if doc.tolerance is not None else DETECTION_TOLERANCE
        figures = (doc.candidates_reference, doc.candidates, doc.detections_reference, doc.detections, doc.matched)
        seen = (doc.head_sensitivity, doc.raw_max_abs, doc.raw_sqnr_db)
        return cls(doc.head_max_abs, doc.head_range, *figures, tolerance, *seen)
