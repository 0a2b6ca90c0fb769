"""A release-format YOLOv7 checkpoint made by the official code's own `models/yolo.py` (the `yolov7detect`
sdist), with a seeded init: what `attempt_load` in the official detect.py reads.

    python tests/official/make_checkpoint.py OUT.pt [--model yolov7|yolov7-tiny] [--seed 0]

The layer list is hwprof's packaged copy of the official deploy config with its head set to `IDetect`, the
head class of the released training checkpoints (yolov7.pt). Run with tests/official/shim on PYTHONPATH.
"""

from __future__ import annotations

import argparse
from importlib import resources

import torch
import yaml


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--model", default="yolov7-tiny", choices=["yolov7", "yolov7-tiny", "yolov7x"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from yolov7.models.yolo import Model  # the official class, pickled by name into the checkpoint

    cfg = yaml.safe_load(resources.files("hwprof.workload").joinpath(f"cfg/{args.model}.yaml").read_text())
    head = cfg["head"][-1]
    head[2] = "IDetect"
    torch.manual_seed(args.seed)
    model = Model(cfg, ch=3, nc=cfg.get("nc", 80))
    model.eval()
    torch.save({"model": model.half(), "optimizer": None, "training_results": None, "epoch": -1}, args.out)


if __name__ == "__main__":
    main()
