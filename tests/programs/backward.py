"""A program that trains: grad enabled, a loss on the model's output and `.backward()` after every call (a
fine-tuning loop without its optimizer step): hwprof must measure a forward + backward, not an inference.

    python tests/programs/backward.py [--calls 20] [--img-size 64]

Each step's time is printed as the program measures it ("step i: forward X ms, backward Y ms").
"""

from __future__ import annotations

import argparse
import time

import torch
from common import build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--img-size", type=int, default=64)
    opt = parser.parse_args()
    model = build_model("yolov8n", fuse=False)  # eval mode (its inference head), grad on
    for p in model.parameters():
        p.requires_grad_(True)
    x = torch.rand(1, 3, opt.img_size, opt.img_size)
    for i in range(opt.calls):
        t0 = time.perf_counter()
        out = model(x)
        t1 = time.perf_counter()
        pred = out[0] if isinstance(out, list | tuple) else out
        loss = pred.float().square().mean()
        loss.backward()
        model.zero_grad(set_to_none=True)
        t2 = time.perf_counter()
        print(f"step {i}: forward {(t1 - t0) * 1e3:.3f} ms, backward {(t2 - t1) * 1e3:.3f} ms", flush=True)


if __name__ == "__main__":
    main()
