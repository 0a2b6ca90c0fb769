"""`torchvision.ops.nms` and `box_iou` in plain torch (greedy NMS, as torchvision's CPU kernel does it)."""

from __future__ import annotations

import torch


def box_iou(boxes1: torch.Tensor, boxes2: torch.Tensor) -> torch.Tensor:
    area1 = (boxes1[:, 2] - boxes1[:, 0]) * (boxes1[:, 3] - boxes1[:, 1])
    area2 = (boxes2[:, 2] - boxes2[:, 0]) * (boxes2[:, 3] - boxes2[:, 1])
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    inter = (rb - lt).clamp(min=0).prod(2)
    return inter / (area1[:, None] + area2 - inter)


def nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    order = scores.argsort(descending=True)
    keep: list[int] = []
    suppressed = torch.zeros(len(order), dtype=torch.bool)
    iou = box_iou(boxes[order], boxes[order]) if len(order) else boxes.new_zeros((0, 0))
    for i in range(len(order)):
        if suppressed[i]:
            continue
        keep.append(int(order[i]))
        suppressed |= iou[i] > iou_threshold
    return torch.tensor(keep, dtype=torch.long)


def _not_here(*_args: object, **_kwargs: object) -> None:
    raise NotImplementedError("the test shim of torchvision has no such operator")


roi_pool = roi_align = ps_roi_pool = ps_roi_align = _not_here
