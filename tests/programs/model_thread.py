"""A program that calls its model from a worker thread (a capture/inference split, as a video app has) while its
main thread waits, then goes on with work of its own: hwprof's stop after the measured calls must end the whole
program, not the worker thread alone.

    python tests/programs/model_thread.py [--calls 20] [--img-size 64] [--after FILE]

Each call's time is printed as the program measures it ("call i: X ms"). --after: a file the main thread writes
once the worker thread is done (its "main thread went on" mark).
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import torch
from common import build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--img-size", type=int, default=64)
    parser.add_argument("--after", type=Path, default=None)
    opt = parser.parse_args()
    model = build_model("yolov8n")
    x = torch.rand(1, 3, opt.img_size, opt.img_size)

    def infer() -> None:
        with torch.inference_mode():
            for i in range(opt.calls):
                t0 = time.perf_counter()
                model(x)
                print(f"call {i}: {(time.perf_counter() - t0) * 1e3:.3f} ms", flush=True)

    worker = threading.Thread(target=infer, name="inference")
    worker.start()
    worker.join()
    if opt.after is not None:
        opt.after.write_text("the main thread went on after the worker thread\n")
    print("main thread done")


if __name__ == "__main__":
    main()
