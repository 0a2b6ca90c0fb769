"""A server-like loop that never ends on its own: one forward per "request", forever (Ctrl-C stops it).

    python tests/programs/forever.py [--img-size 64] [--mark FILE] [--quiet-after N]

--mark: a file written at each request with the number served so far (the tests read it to see whether the
program ran on after its measured calls). It is replaced whole (written beside, then renamed), so a signal that ends
the program mid-write never leaves it empty.
--quiet-after: after N requests, the requests come less often: it waits 0.2 s for each next one (a server between
bursts), idle, not spinning a CPU, until it is ended.

Under hwprof, `--program-end stop` (the default) ends it after the measured calls; with `--program-end run` the
pass's --timeout ends it, or a stop signal (Ctrl-C, SIGTERM), keeping what was measured.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
from common import build_model

QUIET_WAIT_S = 0.2
"""--quiet-after's wait for each next request."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--img-size", type=int, default=64)
    parser.add_argument("--mark", type=Path, default=None)
    parser.add_argument("--quiet-after", type=int, default=None)
    opt = parser.parse_args()
    model = build_model("yolov8n")
    served = 0
    with torch.inference_mode():
        while True:
            model(torch.rand(1, 3, opt.img_size, opt.img_size))
            served += 1
            if opt.mark is not None:
                _write_mark(opt.mark, served)
            if opt.quiet_after is not None and served >= opt.quiet_after:
                time.sleep(QUIET_WAIT_S)


def _write_mark(mark: Path, served: int) -> None:
    partial = mark.with_name(mark.name + ".partial")
    partial.write_text(str(served))
    os.replace(partial, mark)


if __name__ == "__main__":
    main()
