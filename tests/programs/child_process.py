"""A program that starts child processes while it runs its model: a `subprocess` child (another Python
program, busy for 0.1 s) and a forked child (os.fork) that calls the same model, as a worker pool would.

    python tests/programs/child_process.py [--frames 20] [--img-size 64] [--children-at 1] [--report FILE]

--children-at: the frame after which the children run (default 1: under `hwprof collect --warmup 1`, in the first
measured call's iteration, since ultralytics' fuse() calls the model once and the program's first frame chooses it).
--report: a JSON file the program writes once its children are done: their exit codes and pids (the forked child
exits 0 when its three model calls returned, 5 when one raised: a child must run undisturbed).

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

CHILD = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 0.1: pass\nprint('ok')"
"""The subprocess: another Python program, 0.1 s of CPU work (20 of perf's samples at 200 Hz, besides its start;
0.3 s cost each pass 0.2 CPU-s more)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--img-size", type=int, default=64)
    parser.add_argument("--children-at", type=int, default=1)
    parser.add_argument("--report", type=Path, default=None)
    opt = parser.parse_args()
    model = build_model("yolov8n")
    report: dict[str, object] = {}
    with torch.inference_mode():
        for frame in range(opt.frames):
            model(torch.rand(1, 3, opt.img_size, opt.img_size))
            if frame == opt.children_at:
                child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
                out, _ = child.communicate(timeout=120)
                report["subprocess"] = [child.returncode, out.strip()]
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
                report["pids"] = {"subprocess": child.pid, "fork": pid}
                if opt.report is not None:  # at once: a profiler may stop the program after its measured calls
                    opt.report.write_text(json.dumps(report))
                print(json.dumps(report))


if __name__ == "__main__":
    main()
