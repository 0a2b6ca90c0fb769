"""A program that runs inference with grad mode on (no torch.no_grad or torch.inference_mode around its calls, as
a script that forgot them would): its forwards record autograd graphs, and no backward ever uses them. hwprof must
say that grad mode was on, not call the figure an inference's.

    python tests/programs/grad_on.py [--calls 20] [--img-size 64]
"""

from __future__ import annotations

import argparse

import torch
from common import build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--img-size", type=int, default=64)
    opt = parser.parse_args()
    model = build_model("yolov8n", fuse=False)
    for p in model.parameters():
        p.requires_grad_(True)
    x = torch.rand(1, 3, opt.img_size, opt.img_size)
    for _ in range(opt.calls):
        model(x)
    print(f"{opt.calls} calls done")


if __name__ == "__main__":
    main()
