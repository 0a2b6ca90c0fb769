"""A program that ends itself in the middle of its loop, after some calls of its model, as a program with its own
stop condition (a frame limit, a watchdog) would: `os._exit` (no cleanup, no atexit), `sys.exit`, or a signal it
sends itself.

    python tests/programs/ends_itself.py [--how os_exit|sys_exit|sigterm|sigkill] [--after 4] [--code 0]
                                         [--frames 40] [--img-size 64] [--from-thread]

--after: the calls of the model before it ends itself; --code: the exit status of os._exit / sys.exit.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

import torch
from common import build_model


def end_itself(how: str, code: int) -> None:
    if how == "os_exit":
        os._exit(code)
    if how == "sys_exit":
        sys.exit(code)
    os.kill(os.getpid(), signal.SIGTERM if how == "sigterm" else signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--how", choices=["os_exit", "sys_exit", "sigterm", "sigkill"], default="os_exit")
    parser.add_argument("--after", type=int, default=4)
    parser.add_argument("--code", type=int, default=0)
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--img-size", type=int, default=64)
    parser.add_argument("--from-thread", action="store_true", help="end itself from another thread (a watchdog)")
    opt = parser.parse_args()
    model = build_model("yolov8n")
    with torch.inference_mode():
        for frame in range(opt.frames):
            model(torch.rand(1, 3, opt.img_size, opt.img_size))
            if frame + 1 == opt.after and opt.from_thread:
                threading.Thread(target=end_itself, args=(opt.how, opt.code)).start()
            elif frame + 1 == opt.after:
                end_itself(opt.how, opt.code)
    print(f"{opt.frames} frames done")


if __name__ == "__main__":
    main()
