"""A program that closes its standard output before anything else (a daemon-like start: `os.close(1)`, or its
output sent elsewhere with dup2), then calls its model: what it prints later is its own affair.

    python tests/programs/closes_stdout.py [--how close|devnull] [--frames 12] [--img-size 64]
"""

from __future__ import annotations

import argparse
import os

import torch
from common import build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--how", choices=["close", "devnull"], default="close")
    parser.add_argument("--frames", type=int, default=12)
    parser.add_argument("--img-size", type=int, default=64)
    opt = parser.parse_args()
    if opt.how == "close":
        os.close(1)
    else:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    model = build_model("yolov8n")
    with torch.inference_mode():
        for _ in range(opt.frames):
            model(torch.rand(1, 3, opt.img_size, opt.img_size))


if __name__ == "__main__":
    main()
