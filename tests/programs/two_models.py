"""Two root models called in turn on each frame (a detector, then a second model on its output): hwprof cannot
tell which is "the" model and asks for --program-model.

    python tests/programs/two_models.py [--frames 6] [--img-size 64]

The program names them `detector` and `refiner`: `--program-model detector` or `--program-model refiner`.
"""

from __future__ import annotations

import argparse

import torch
from common import build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=6)
    parser.add_argument("--img-size", type=int, default=64)
    opt = parser.parse_args()
    detector = build_model("yolov8n")
    refiner = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 3, 1))
    refiner.eval()
    with torch.inference_mode():
        for frame in range(opt.frames):
            image = torch.rand(1, 3, opt.img_size, opt.img_size)
            detector(refiner(image))
            print(f"frame {frame} done")


if __name__ == "__main__":
    main()
