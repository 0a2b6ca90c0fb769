"""A variant's output against the fp32 reference on one batch: the raw head, boxes before NMS, detections after.

Detections are matched one to one (same image, same class, IoU >= MATCH_IOU, highest confidence first), so a
variant that moves a box a little still matches, and one that drops, adds or relabels a box does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hwprof.analysis.advice import MATCH_IOU, OutputCheck

if TYPE_CHECKING:
    import torch

    from hwprof.workload.pipeline import Pipeline


def candidates_over_conf(pipeline: Pipeline, output: Any) -> int:
    """Boxes whose best class score passes the confidence threshold, before NMS."""
    from hwprof.workload.outputs import head_of
    from hwprof.workload.pipeline import to_yolo_layout

    prediction = to_yolo_layout(head_of(output).float().cpu(), pipeline.built.output_format)
    return int((prediction[:, 4:, :].amax(dim=1) > pipeline.config.conf).sum())


def matched_detections(reference: list[torch.Tensor], variant: list[torch.Tensor], iou: float = MATCH_IOU) -> int:
    """One-to-one matches between two images' NMS outputs ((n, 6): x1 y1 x2 y2 conf cls), per image."""
    from ultralytics.utils.metrics import box_iou

    total = 0
    for ref, got in zip(reference, variant, strict=True):
        ref, got = ref.float().cpu(), got.float().cpu()
        if not len(ref) or not len(got):
            continue
        ious = box_iou(got[:, :4], ref[:, :4])
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


def check_output(reference: Pipeline, reference_out: Any, variant: Pipeline, variant_out: Any) -> OutputCheck:
    """The variant's forward output against the reference's, both on the same letterboxed batch."""
    from hwprof.workload.outputs import head_of

    ref_head = head_of(reference_out).float().cpu()
    got_head = head_of(variant_out).float().cpu()
    if ref_head.shape != got_head.shape:
        raise ValueError(
            f"the variant's head has shape {tuple(got_head.shape)}, the reference's {tuple(ref_head.shape)}"
        )
    ref_nms, got_nms = reference.nms(reference_out), variant.nms(variant_out)
    return OutputCheck(
        head_max_abs=float((got_head - ref_head).abs().max()),
        head_range=float(ref_head.max() - ref_head.min()),
        candidates_reference=candidates_over_conf(reference, reference_out),
        candidates=candidates_over_conf(variant, variant_out),
        detections_reference=sum(len(d) for d in ref_nms),
        detections=sum(len(d) for d in got_nms),
        matched=matched_detections(ref_nms, got_nms),
    )
