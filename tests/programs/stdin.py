"""A program that reads its frames' count from stdin (`echo 5 | python stdin.py`), as a pipeline fed by
another process would; with nothing on stdin (end of file) it says so and uses --default.

    python tests/programs/stdin.py [--default 6] [--img-size 64] [--strict]

--strict: end of file on stdin is an error (the program exits 3), as a program that needs its input would.

Under hwprof the program's stdin is /dev/null (every pass runs it anew, so a stream could feed one pass only):
it reads end of file.
"""

from __future__ import annotations

import argparse
import sys

import torch
from common import build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--default", type=int, default=6)
    parser.add_argument("--img-size", type=int, default=64)
    parser.add_argument("--strict", action="store_true")
    opt = parser.parse_args()
    line = sys.stdin.readline()
    if not line:
        print("stdin: end of file", file=sys.stderr)
        if opt.strict:
            sys.exit(3)
    frames = int(line) if line.strip() else opt.default
    model = build_model("yolov8n")
    with torch.inference_mode():
        for _ in range(frames):
            model(torch.rand(1, 3, opt.img_size, opt.img_size))
    print(f"{frames} frames done")


if __name__ == "__main__":
    main()
