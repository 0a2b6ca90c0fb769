"""A program whose model sees more than one input shape, as YOLOv7's detect.py does with its stride-aligned
letterbox (bus.jpg 1x3x320x256, zidane.jpg 1x3x192x320): one forward per frame, the frames' shapes in turn.

    python tests/programs/two_shapes.py [--shapes 64x64,64x96] [--frames 20] [--runs 1]

--shapes: the H x W of each frame in turn (cycled); --runs: how many frames in a row keep one shape.
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
    opt = parser.parse_args()
    sizes = [tuple(int(n) for n in s.split("x")) for s in opt.shapes.split(",")]
    model = build_model("yolov8n")
    with torch.inference_mode():
        for frame in range(opt.frames):
            h, w = sizes[(frame // opt.runs) % len(sizes)]
            model(torch.rand(1, 3, h, w))
    print(f"{opt.frames} frames done")


if __name__ == "__main__":
    main()
