"""A program that changes torch's thread count between its calls (1, then 2, in turn), as a program tuning
itself or sharing the CPU with another would: the run must say the counts its calls ran with, not hwprof's.

    python tests/programs/thread_counts.py [--calls 20] [--img-size 64] [--counts 1,2]
"""

from __future__ import annotations

import argparse

import torch
from common import build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--img-size", type=int, default=64)
    parser.add_argument("--counts", default="1,2")
    opt = parser.parse_args()
    counts = [int(n) for n in opt.counts.split(",")]
    model = build_model("yolov8n")
    x = torch.rand(1, 3, opt.img_size, opt.img_size)
    with torch.inference_mode():
        for i in range(opt.calls):
            torch.set_num_threads(counts[i % len(counts)])
            model(x)
    print(f"{opt.calls} calls done")


if __name__ == "__main__":
    main()
