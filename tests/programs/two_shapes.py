"""A program whose model sees more than one input shape, as YOLOv7's detect.py does with its stride-aligned
letterbox (bus.jpg 1x3x320x256, zidane.jpg 1x3x192x320): one forward per frame, the frames' shapes in turn.

    python tests/programs/two_shapes.py [--shapes 64x64,64x96] [--frames 20] [--runs 1] [--first HxW]

--shapes: the H x W of each frame in turn (cycled); --runs: how many frames in a row keep one shape; --first: the
H x W of the first --first-calls frames, a shape no later frame has, as a program that warms its model up on a
dummy input does. Its default, 2, is the frames up to hwprof's one warm-up call (--warmup 1): the finder chooses the
model at the first frame, its second call (the first is the model's own, at build, as ultralytics finds its
strides), and the second frame is the warm-up, the sample the FLOPs are counted at.
"""

from __future__ import annotations

import argparse

import torch
from common import build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="64x64,64x96")
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--first", default=None, help="HxW of the first --first-calls frames")
    parser.add_argument("--first-calls", type=int, default=2)
    opt = parser.parse_args()
    sizes = [_size(s) for s in opt.shapes.split(",")]
    first = [_size(opt.first)] * opt.first_calls if opt.first else []
    model = build_model("yolov8n")
    with torch.inference_mode():
        for frame in range(opt.frames):
            h, w = first[frame] if frame < len(first) else sizes[(frame // opt.runs) % len(sizes)]
            model(torch.rand(1, 3, h, w))
    print(f"{opt.frames} frames done")


def _size(text: str) -> tuple[int, int]:
    h, w = (int(n) for n in text.split("x"))
    return h, w


if __name__ == "__main__":
    main()
