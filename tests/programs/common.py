"""Helpers the test programs share, as a user's project keeps them in its own utils module (the seeds' utils/
general.py, utils/dataset.py): images, letterbox, a model built from its YAML, NMS.

Nothing here imports torchvision (it cannot be imported on this project's machines): NMS is ultralytics'
`non_max_suppression`, which needs no torchvision. The models are built from their YAML with a seeded random
init (no weights are downloaded): the compute is the real model's, the detections are meaningless.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")
PAD_VALUE = 114


def default_images() -> Path:
    """The images shipped in the ultralytics wheel (bus.jpg, zidane.jpg): the default --source."""
    import ultralytics

    return Path(ultralytics.__file__).parent / "assets"


def image_paths(source: str | None) -> list[Path]:
    """The images of a folder (or one file), sorted; the ultralytics wheel's own without a source."""
    root = Path(source) if source else default_images()
    paths = [root] if root.is_file() else sorted(p for p in root.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not paths:
        raise SystemExit(f"no images in {root}")
    return paths


def letterbox(image: np.ndarray, size: int, stride: int = 32) -> tuple[np.ndarray, float, tuple[int, int]]:
    """Resize keeping the aspect ratio, pad to size x size: (image, ratio, (left, top) padding)."""
    h, w = image.shape[:2]
    ratio = min(size / h, size / w)
    new_w, new_h = round(w * ratio), round(h * ratio)
    if (new_w, new_h) != (w, h):
        image = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    dw, dh = (size - new_w) / 2, (size - new_h) / 2
    top, bottom = round(dh - 0.1), round(dh + 0.1)
    left, right = round(dw - 0.1), round(dw + 0.1)
    image = cv2.copyMakeBorder(image, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(PAD_VALUE,) * 3)
    return image, ratio, (left, top)


def to_tensor(images: list[np.ndarray]) -> torch.Tensor:
    """BGR HWC uint8 images -> an RGB NCHW float batch in [0, 1]."""
    batch = np.stack([im[:, :, ::-1].transpose(2, 0, 1) for im in images])
    return torch.from_numpy(np.ascontiguousarray(batch)).float() / 255.0


def build_model(name: str, fuse: bool = True) -> torch.nn.Module:
    """A YOLO model from its YAML, seeded: yolov8n/yolo11n/... (ultralytics' YAMLs) or yolov7-tiny/yolov7 (the
    official cfg as hwprof packages it, since the YOLOv7 repository is no pip package)."""
    torch.manual_seed(0)
    if name.startswith("yolov7"):
        from hwprof.workload.yolov7 import build_yolov7

        model: Any = build_yolov7(name)
    else:
        from ultralytics.nn.tasks import DetectionModel

        with contextlib.redirect_stdout(io.StringIO()):
            model = DetectionModel(f"{name}.yaml", verbose=False)
    model = model.float().eval()
    if fuse:
        with contextlib.redirect_stdout(io.StringIO()):
            model = model.fuse()
    return model.eval()


def nms(prediction: Any, yolov7: bool = False, conf: float = 0.25, iou: float = 0.45) -> list[torch.Tensor]:
    """Boxes per image after NMS (ultralytics'); a YOLOv7 head's (batch, anchors, 5 + nc) output is first put in
    ultralytics' (batch, 4 + nc, anchors) layout with objectness folded into the class scores."""
    from ultralytics.utils.nms import non_max_suppression

    pred = prediction[0] if isinstance(prediction, tuple | list) else prediction
    if yolov7:
        pred = torch.cat((pred[..., :4], pred[..., 5:] * pred[..., 4:5]), dim=-1).transpose(1, 2)
    return list(non_max_suppression(pred, conf, iou))


def draw(image: np.ndarray, detections: torch.Tensor, ratio: float, pad: tuple[int, int]) -> None:
    """The boxes of a letterboxed image's detections, drawn on the original image."""
    left, top = pad
    for x1, y1, x2, y2, *_ in detections.tolist():
        p1 = (int((x1 - left) / ratio), int((y1 - top) / ratio))
        p2 = (int((x2 - left) / ratio), int((y2 - top) / ratio))
        cv2.rectangle(image, p1, p2, (0, 255, 0), 1)
