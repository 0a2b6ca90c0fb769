"""A script that names its model `m`, as ultralytics' own code names each layer it calls (`for m in self.model` in
DetectionModel's forward, which the model's constructor runs once to find its strides): `--program-model m` means
the script's m, the whole model, not the layer ultralytics' frame calls m. `--program-model first` names the
script's own name for that layer: a part of the model, which hwprof refuses to measure as the model.

    python tests/programs/named_m.py [--calls 20] [--img-size 96]

Each call's time is printed as the script measures it ("call i: X ms"): the figure a user compares hwprof's
forward with.
"""

from __future__ import annotations

import argparse
import time

import torch
from ultralytics import YOLO


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--img-size", type=int, default=96)
    opt = parser.parse_args()
    torch.manual_seed(0)
    m = YOLO("yolov8n.yaml").model.eval()
    first = m.model[0]  # the script's own name for a part: `--program-model first` measures a layer, refused
    print(f"model {type(m).__name__}, first layer {type(first).__name__}")
    x = torch.rand(1, 3, opt.img_size, opt.img_size)
    with torch.inference_mode():
        for i in range(opt.calls):
            t0 = time.perf_counter()
            m(x)
            print(f"call {i}: {(time.perf_counter() - t0) * 1e3:.3f} ms", flush=True)


if __name__ == "__main__":
    main()
