"""A video pipeline in the style of seed 004: frames read with cv2.VideoCapture, letterboxed, one forward each,
NMS, boxes drawn, the frame written with cv2.VideoWriter.

    python tests/programs/video.py CLIP [--out OUT.mp4] [--model yolov8n] [--img-size 96] [--max-frames N]

CLIP: any video OpenCV reads. The tests write their own: `python tests/programs/video.py --make CLIP [--frames
N] [--size WxH]` writes a clip of N frames (default 12, 160x120) with the mp4v codec and exits.
--out: the annotated video (default: CLIP with "-detected" before its suffix).

Under hwprof: `hwprof collect --only timing -- python tests/programs/video.py clip.mp4`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np


def make_clip(path: Path, frames: int, width: int, height: int) -> None:
    """A clip of moving coloured boxes, written with mp4v."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (width, height))
    for k in range(frames):
        frame = np.full((height, width, 3), 40, np.uint8)
        x = (k * 7) % max(width - 30, 1)
        cv2.rectangle(frame, (x, 20), (x + 30, 70), (0, 200, 255), -1)
        writer.write(frame)
    writer.release()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("clip", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--model", default="yolov8n")
    parser.add_argument("--img-size", type=int, default=96)
    parser.add_argument("--max-frames", type=int, default=None)
    parser.add_argument("--make", action="store_true", help="write a test clip to CLIP and exit")
    parser.add_argument("--frames", type=int, default=12)
    parser.add_argument("--size", default="160x120")
    return parser.parse_args()


def main(opt: argparse.Namespace) -> None:
    if opt.make:  # before torch is imported: writing a clip needs OpenCV alone (torch's import is 1.5-2 CPU-s)
        width, height = (int(v) for v in opt.size.split("x"))
        make_clip(opt.clip, opt.frames, width, height)
        return
    detect(opt)


def detect(opt: argparse.Namespace) -> None:
    import torch
    from common import build_model, draw, letterbox, nms, to_tensor

    model = build_model(opt.model)
    yolov7 = opt.model.startswith("yolov7")
    capture = cv2.VideoCapture(str(opt.clip))
    if not capture.isOpened():
        raise SystemExit(f"cannot open {opt.clip}")
    fps = capture.get(cv2.CAP_PROP_FPS) or 10
    size = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)), int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
    out = opt.out or opt.clip.with_name(f"{opt.clip.stem}-detected{opt.clip.suffix}")
    writer = cv2.VideoWriter(str(out), cv2.VideoWriter_fourcc(*"mp4v"), fps, size)
    frames = 0
    try:
        with torch.inference_mode():
            while opt.max_frames is None or frames < opt.max_frames:
                ok, frame = capture.read()
                if not ok:
                    break
                padded, ratio, pad = letterbox(frame, opt.img_size)
                draw(frame, nms(model(to_tensor([padded])), yolov7)[0], ratio, pad)
                writer.write(frame)
                frames += 1
    finally:
        capture.release()
        writer.release()
    print(f"{frames} frames written to {out}")


if __name__ == "__main__":
    main(parse_args())
