"""A program that starts child processes while it runs its model: a `subprocess` child (a Python interpreter
that itself calls a torch module) and a forked child (os.fork) that calls the same model, as a worker pool would.

    python tests/programs/child_process.py [--frames 6] [--img-size 64] [--report FILE]

--report: a JSON file the program writes at its end: the children's exit codes and whether the forked child's
model calls returned (a child must run undisturbed).

(Named child_process.py, not subprocess.py: a script's folder is first on sys.path, and a subprocess.py there
would shadow the standard library's module for the script and everything it imports.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from common import build_model

CHILD = "import torch; m = torch.nn.Conv2d(3, 3, 3); [m(torch.rand(1, 3, 32, 32)) for _ in range(5)]; print('ok')"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=6)
    parser.add_argument("--img-size", type=int, default=64)
    parser.add_argument("--report", type=Path, default=None)
    opt = parser.parse_args()
    model = build_model("yolov8n")
    report: dict[str, object] = {}
    with torch.inference_mode():
        for frame in range(opt.frames):
            model(torch.rand(1, 3, opt.img_size, opt.img_size))
            if frame == 2:
                done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
                report["subprocess"] = [done.returncode, done.stdout.strip()]
                pid = os.fork()
                if pid == 0:  # the forked child: the same model, three calls, then out without cleanup
                    try:
                        torch.set_num_threads(1)  # as a DataLoader worker: OpenMP's pool does not survive a fork
                        for _ in range(3):
                            model(torch.rand(1, 3, opt.img_size, opt.img_size))
                        os._exit(0)
                    except BaseException:
                        os._exit(5)
                _, status = os.waitpid(pid, 0)
                report["fork"] = os.waitstatus_to_exitcode(status)
    if opt.report is not None:
        opt.report.write_text(json.dumps(report))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
