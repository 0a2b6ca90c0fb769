"""A batch pipeline in the style of a benchmark script (seed 001): an image-folder Dataset whose items are read
with cv2 and letterboxed, a DataLoader that batches them, one batched forward per batch, NMS per image.

    python tests/programs/batch.py [--model yolov8n] [--img-size 96] [--batch 2] [--batches N] [--workers 0]
                                   [--source DIR]

--batches: how many batches in all, cycling through the images (default 4).
--workers: the DataLoader's num_workers; above 0 it forks that many worker processes (Linux's default start
method), which read and letterbox the images while the main process runs the model.
--source: an image folder (default: bus.jpg and zidane.jpg from the ultralytics wheel).

Under hwprof: `hwprof collect --only timing -- python tests/programs/batch.py --workers 2`.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import cv2
import torch
from common import build_model, image_paths, letterbox, nms, to_tensor
from torch.utils.data import DataLoader, Dataset


class ImageFolder(Dataset):
    """The images of a folder, cycled to `length` items, each letterboxed to size x size."""

    def __init__(self, paths: list[Path], size: int, length: int) -> None:
        self.paths, self.size, self.length = paths, size, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = cv2.imread(str(self.paths[index % len(self.paths)]))
        padded, _, _ = letterbox(image, self.size)
        return to_tensor([padded])[0], os.getpid()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="yolov8n")
    parser.add_argument("--img-size", type=int, default=96)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--source", default=None)
    return parser.parse_args()


def main(opt: argparse.Namespace) -> None:
    model = build_model(opt.model)
    dataset = ImageFolder(image_paths(opt.source), opt.img_size, opt.batch * opt.batches)
    loader = DataLoader(dataset, batch_size=opt.batch, num_workers=opt.workers)
    loaded_by: set[int] = set()
    with torch.inference_mode():
        for batch, pids in loader:
            loaded_by.update(int(p) for p in pids)
            detections = nms(model(batch), opt.model.startswith("yolov7"))
            print(f"batch of {len(batch)}: {sum(len(d) for d in detections)} boxes")
    others = sorted(loaded_by - {os.getpid()})
    print(f"loaded by {len(others)} worker process(es)" if others else "loaded in the main process")


if __name__ == "__main__":
    main(parse_args())
