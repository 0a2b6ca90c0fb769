"""A program whose model runs in a child process: forked with os.fork (the parent waits), or started by
multiprocessing with the fork or spawn start method (the child builds the model itself), as a serving program's
worker pool does.

    python tests/programs/model_in_child.py [--how fork|mp-fork|mp-spawn[,...]] [--calls 20] [--img-size 64]

--how: how the child is started; several, comma-separated, start one child each in turn (each waited for before
the next).
Each call's time is printed by the child as it measures it ("call i: X ms").
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time

import torch
from common import build_model


def calls(model: torch.nn.Module, n: int, size: int) -> None:
    x = torch.rand(1, 3, size, size)
    with torch.inference_mode():
        for i in range(n):
            t0 = time.perf_counter()
            model(x)
            print(f"call {i}: {(time.perf_counter() - t0) * 1e3:.3f} ms", flush=True)


def child(n: int, size: int) -> None:
    """A multiprocessing child: builds its own model and calls it."""
    torch.set_num_threads(1)
    calls(build_model("yolov8n"), n, size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--how", default="fork", help="fork, mp-fork or mp-spawn; several, comma-separated")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--img-size", type=int, default=64)
    opt = parser.parse_args()
    hows = opt.how.split(",")
    if not set(hows) <= {"fork", "mp-fork", "mp-spawn"}:
        parser.error(f"--how {opt.how}: each is fork, mp-fork or mp-spawn")
    for how in hows:
        start_child(how, opt.calls, opt.img_size)


def start_child(how: str, n: int, size: int) -> None:
    """One child that calls the model n times, started `how`, waited for."""
    if how == "fork":
        model = build_model("yolov8n")
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                torch.set_num_threads(1)  # OpenMP's pool does not survive a fork
                calls(model, n, size)
            except BaseException:
                code = 5
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(f"child {pid} exited {os.waitstatus_to_exitcode(status)}")
        return
    context = multiprocessing.get_context(how.removeprefix("mp-"))
    process = context.Process(target=child, args=(n, size), name="inference")
    process.start()
    process.join()
    print(f"child {process.pid} exited {process.exitcode}")


if __name__ == "__main__":
    main()
