"""A program that fails: it calls its model for some frames, then raises (a bad frame, say).

    python tests/programs/fails.py [--after 3] [--img-size 64] [--exit-code N]

--after: the forwards before the failure (default 3).
--exit-code: end with sys.exit(N) instead of raising.
"""

from __future__ import annotations

import argparse
import sys

import torch
from common import build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--after", type=int, default=3)
    parser.add_argument("--img-size", type=int, default=64)
    parser.add_argument("--exit-code", type=int, default=None)
    opt = parser.parse_args()
    model = build_model("yolov8n")
    with torch.inference_mode():
        for frame in range(opt.after):
            model(torch.rand(1, 3, opt.img_size, opt.img_size))
            print(f"frame {frame} done")
    if opt.exit_code is not None:
        sys.exit(opt.exit_code)
    raise RuntimeError(f"frame {opt.after} is corrupt (a failure of the program itself)")


if __name__ == "__main__":
    main()
