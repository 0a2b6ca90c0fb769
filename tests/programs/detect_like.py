"""A detect.py in the style of YOLOv7's and YOLOv5's: images read with cv2 from a folder, letterboxed, one
forward each, NMS, the boxes drawn and the image written.

    python tests/programs/detect_like.py [--model yolov8n] [--img-size 128] [--source DIR] [--frames N]
                                         [--save-dir DIR] [--no-fuse] [--conf 0.25] [--device cpu]

--model: an ultralytics YAML name (yolov8n, yolo11n, yolov5nu, ...) or yolov7-tiny / yolov7 (built from the cfg
hwprof packages, as the YOLOv7 repository's `Model(cfg)` builds it); random weights, seeded.
--source: an image folder or file (default: bus.jpg and zidane.jpg from the ultralytics wheel).
--frames: how many images to run in all, cycling through the source (default: each image once).
--save-dir: where the annotated images go (default: none are written).
--device: where the model runs (cpu, cuda, cuda:N or N); on a GPU host: `hwprof collect --device cuda -- python
tests/programs/detect_like.py --model yolov8n --img-size 640 --device cuda`.

Under hwprof: `hwprof collect --only timing -- python tests/programs/detect_like.py --model yolov8n`.
"""

from __future__ import annotations

import argparse
import time
from itertools import cycle, islice
from pathlib import Path

import cv2
import torch
from common import build_model, draw, image_paths, letterbox, nms, to_tensor


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="yolov8n")
    parser.add_argument("--img-size", type=int, default=128)
    parser.add_argument("--source", default=None)
    parser.add_argument("--frames", type=int, default=None)
    parser.add_argument("--save-dir", default=None)
    parser.add_argument("--no-fuse", action="store_true")
    parser.add_argument("--conf", type=float, default=0.25)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda[:N] as YOLOv7's detect.py --device takes it")
    return parser.parse_args()


def detect(opt: argparse.Namespace) -> int:
    device = torch.device(f"cuda:{opt.device}" if opt.device.isdigit() else opt.device)
    model = build_model(opt.model, fuse=not opt.no_fuse).to(device)
    yolov7 = opt.model.startswith("yolov7")
    stride = int(max(model.stride))
    paths = image_paths(opt.source)
    frames = opt.frames or len(paths)
    save_dir = Path(opt.save_dir) if opt.save_dir else None
    if save_dir is not None:
        save_dir.mkdir(parents=True, exist_ok=True)
    seen = 0
    with torch.no_grad():
        for path in islice(cycle(paths), frames):
            image = cv2.imread(str(path))
            padded, ratio, pad = letterbox(image, opt.img_size, stride)
            batch = to_tensor([padded]).to(device)
            t0 = time.perf_counter()
            prediction = model(batch)
            t1 = time.perf_counter()
            detections = nms(prediction, yolov7, conf=opt.conf)[0]
            t2 = time.perf_counter()
            draw(image, detections, ratio, pad)
            if save_dir is not None:
                cv2.imwrite(str(save_dir / path.name), image)
            seen += 1
            print(
                f"{path.name}: {len(detections)} boxes, Done. ({(t1 - t0) * 1e3:.1f}ms) Inference, "
                f"({(t2 - t1) * 1e3:.1f}ms) NMS"
            )
    return seen


if __name__ == "__main__":
    done = detect(parse_args())
    print(f"{done} images done")
