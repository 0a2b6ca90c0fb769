"""A variant's output against the fp32 reference: the raw head on the first batch, boxes before NMS and detections
after on each of the run's batches (its images, each once, or a video's first frames).

Detections are matched one to one (same image, same class, IoU >= MATCH_IOU, score within SCORE_TOLERANCE,
highest confidence first), so a variant that moves a box a little still matches, and one that drops, adds,
relabels or rescores a box does not. A box is
given at least one pixel of width and height for its IoU: a box of zero area has an IoU of 0 with itself, and a
random-init head gives such boxes (7 of yolov7's 75 detections at 640 had zero width or height), so the same output
was counted as 68 of 75 matched, "changed output", for a change that left the head bit for bit the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from hwprof.analysis.advice.output import MATCH_IOU, SCORE_TOLERANCE, OutputCheck

if TYPE_CHECKING:
    import torch


class Detector(Protocol):
    """What the check reads of a model's output: hwprof's Pipeline, or a program's head (advisor.program_worker)."""

    def nms(self, output: Any) -> list[Any]: ...

    def count_candidates(self, output: Any) -> int: ...


def candidates_over_conf(pipeline: Detector, output: Any) -> int:
    """Boxes whose best class score passes the confidence threshold, before NMS."""
    return pipeline.count_candidates(output)


@dataclass
class DetectionMatch:
    matched: int
    score_max_abs: float | None
    """The largest |Δ score| of a matched pair (None: none matched)."""


def match_detections(
    reference: list[torch.Tensor],
    variant: list[torch.Tensor],
    iou: float = MATCH_IOU,
    score_tolerance: float = SCORE_TOLERANCE,
) -> DetectionMatch:
    """One-to-one matches between images' NMS outputs ((n, 6): x1 y1 x2 y2 conf cls), per image: same class, IoU
    >= `iou` and scores within `score_tolerance`, the variant's most confident box first."""
    from ultralytics.utils.metrics import box_iou

    total, score_max = 0, None
    for ref, got in zip(reference, variant, strict=True):
        ref, got = ref.float().cpu(), got.float().cpu()
        if not len(ref) or not len(got):
            continue
        ious = box_iou(_at_least_one_pixel(got[:, :4]), _at_least_one_pixel(ref[:, :4]))
        ious = ious * (got[:, 5:6] == ref[:, 5].unsqueeze(0))
        scores = (got[:, 4:5] - ref[:, 4].unsqueeze(0)).abs()
        ious = ious * (scores <= score_tolerance)
        taken: set[int] = set()
        for g in got[:, 4].argsort(descending=True).tolist():
            order = ious[g].argsort(descending=True).tolist()
            r = next((r for r in order if r not in taken and float(ious[g, r]) >= iou), None)
            if r is not None:
                taken.add(r)
                total += 1
                score_max = max(score_max or 0.0, float(scores[g, r]))
    return DetectionMatch(total, score_max)


def matched_detections(reference: list[torch.Tensor], variant: list[torch.Tensor], iou: float = MATCH_IOU) -> int:
    """How many detections match one to one (match_detections)."""
    return match_detections(reference, variant, iou).matched


def _at_least_one_pixel(boxes: torch.Tensor) -> torch.Tensor:
    """xyxy boxes with x2 >= x1 + 1 and y2 >= y1 + 1 (a box already that large is unchanged)."""
    import torch

    out = boxes.clone()
    out[:, 2] = torch.maximum(out[:, 2], out[:, 0] + 1)
    out[:, 3] = torch.maximum(out[:, 3], out[:, 1] + 1)
    return out


def check_output(
    reference: Detector,
    reference_out: Any,
    variant: Detector,
    variant_out: Any,
    reference_other: Any,
    more: Sequence[tuple[Any, Any]] = (),
    trained: bool | None = None,
) -> OutputCheck:
    """The variant's forward output against the reference's, both on the same letterboxed batch; the
    reference's output on another input (`reference_other`) says what the head's check can see. `more`: the
    (reference, variant) outputs of the run's further batches, whose detections are matched too; `trained`: the
    model has trained weights (its detections decide the check)."""
    from hwprof.workload.outputs import compare_outputs

    f = compare_outputs(reference_out, variant_out, reference_other)
    pairs = [(reference_out, variant_out), *more]
    ref_nms = [d for out, _ in pairs for d in reference.nms(out)]
    got_nms = [d for _, out in pairs for d in variant.nms(out)]
    match = match_detections(ref_nms, got_nms)
    return OutputCheck(
        head_max_abs=f.head_max_abs,
        head_range=f.head_range,
        candidates_reference=sum(candidates_over_conf(reference, out) for out, _ in pairs),
        candidates=sum(candidates_over_conf(variant, out) for _, out in pairs),
        detections_reference=sum(len(d) for d in ref_nms),
        detections=sum(len(d) for d in got_nms),
        matched=match.matched,
        head_sensitivity=f.head_sensitivity,
        raw_max_abs=f.raw_max_abs,
        raw_sqnr_db=f.raw_sqnr_db,
        trained=trained,
        images=len(ref_nms),
        score_max_abs=match.score_max_abs,
        score_tolerance=SCORE_TOLERANCE,
    )
