"""A variant's output against the fp32 reference on one batch: the raw head, boxes before NMS, detections after.

Detections are matched one to one (same image, same class, IoU >= MATCH_IOU, highest confidence first), so a
variant that moves a box a little still matches, and one that drops, adds or relabels a box does not. A box is
given at least one pixel of width and height for its IoU: a box of zero area has an IoU of 0 with itself, and a
random-init head gives such boxes (7 of yolov7's 75 detections at 640 had zero width or height), so the same output
was counted as 68 of 75 matched, "changed output", for a change that left the head bit for bit the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from hwprof.analysis.advice_output import MATCH_IOU, OutputCheck

if TYPE_CHECKING:
    import torch


class Detector(Protocol):
    """What the check reads of a model's output: hwprof's Pipeline, or a program's head (advisor.program_worker)."""

    def nms(self, output: Any) -> list[Any]: ...

    def count_candidates(self, output: Any) -> int: ...


def candidates_over_conf(pipeline: Detector, output: Any) -> int:
    """Boxes whose best class score passes the confidence threshold, before NMS."""
    return pipeline.count_candidates(output)


def matched_detections(reference: list[torch.Tensor], variant: list[torch.Tensor], iou: float = MATCH_IOU) -> int:
    """One-to-one matches between two images' NMS outputs ((n, 6): x1 y1 x2 y2 conf cls), per image."""
    from ultralytics.utils.metrics import box_iou

    total = 0
    for ref, got in zip(reference, variant, strict=True):
        ref, got = ref.float().cpu(), got.float().cpu()
        if not len(ref) or not len(got):
            continue
        ious = box_iou(_at_least_one_pixel(got[:, :4]), _at_least_one_pixel(ref[:, :4]))
        same_class = got[:, 5:6] == ref[:, 5].unsqueeze(0)
        ious = ious * same_class
        taken: set[int] = set()
        for g in got[:, 4].argsort(descending=True).tolist():
            order = ious[g].argsort(descending=True).tolist()
            r = next((r for r in order if r not in taken and float(ious[g, r]) >= iou), None)
            if r is not None:
                taken.add(r)
                total += 1
    return total


def _at_least_one_pixel(boxes: torch.Tensor) -> torch.Tensor:
    """xyxy boxes with x2 >= x1 + 1 and y2 >= y1 + 1 (a box already that large is unchanged)."""
    import torch

    out = boxes.clone()
    out[:, 2] = torch.maximum(out[:, 2], out[:, 0] + 1)
    out[:, 3] = torch.maximum(out[:, 3], out[:, 1] + 1)
    return out


def check_output(
    reference: Detector, reference_out: Any, variant: Detector, variant_out: Any, reference_other: Any
) -> OutputCheck:
    """The variant's forward output against the reference's, both on the same letterboxed batch; the
    reference's output on another input (`reference_other`) says what the check can see."""
    from hwprof.workload.outputs import compare_outputs

    f = compare_outputs(reference_out, variant_out, reference_other)
    ref_nms, got_nms = reference.nms(reference_out), variant.nms(variant_out)
    return OutputCheck(
        head_max_abs=f.head_max_abs,
        head_range=f.head_range,
        candidates_reference=candidates_over_conf(reference, reference_out),
        candidates=candidates_over_conf(variant, variant_out),
        detections_reference=sum(len(d) for d in ref_nms),
        detections=sum(len(d) for d in got_nms),
        matched=matched_detections(ref_nms, got_nms),
        head_sensitivity=f.head_sensitivity,
        raw_max_abs=f.raw_max_abs,
        raw_sqnr_db=f.raw_sqnr_db,
    )
