"""A program that never calls a torch module: it letterboxes images with cv2 and does numpy and torch tensor
arithmetic, but no `torch.nn.Module` is ever called.

    python tests/programs/no_model.py [--rounds 20] [--source DIR]

Under hwprof there is no model to find: timing and layer passes say so, and the whole-process passes (kernels,
trace's py-spy, Scalene) profile it to its end.
"""

from __future__ import annotations

import argparse
from itertools import cycle, islice

import cv2
from common import image_paths, letterbox, to_tensor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--source", default=None)
    opt = parser.parse_args()
    total = 0.0
    for path in islice(cycle(image_paths(opt.source)), opt.rounds):
        padded, _, _ = letterbox(cv2.imread(str(path)), 128)
        batch = to_tensor([padded])
        total += float((batch @ batch.transpose(-1, -2)).mean())
    print(f"{opt.rounds} rounds, checksum {total:.3f}")


if __name__ == "__main__":
    main()
