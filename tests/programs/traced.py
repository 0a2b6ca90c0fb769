"""A detect loop over a traced model, as YOLOv7's detect.py runs by default (its TracedModel; `--no-trace` turns
it off there): the model is passed through torch.jit.trace once, and the traced module is called per image.

    python tests/programs/traced.py [--model yolov8n] [--img-size 96] [--frames 6] [--style whole|yolov7]
                                    [--no-trace] [--source DIR]

--style whole: `torch.jit.trace(model, example)` and the traced module is the program's model (a ScriptModule).
--style yolov7: YOLOv7's TracedModel: an nn.Module whose `model` is the traced model (its forward runs every layer
but the head) and whose `detect_layer` is the eager head, called one after the other.
--no-trace: the eager model, as detect.py --no-trace.

Under hwprof: `hwprof collect --only timing -- python tests/programs/traced.py`.
"""

from __future__ import annotations

import argparse
from itertools import cycle, islice
from typing import Any

import cv2
import torch
from common import build_model, image_paths, letterbox, nms, to_tensor


class Body(torch.nn.Module):
    """A YOLO model whose forward runs its layers but the head, as its own forward does: what YOLOv7 traces
    (`model.traced = True`). Its layer list keeps the head, whose TorchScript copy never runs."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model, self.save = model.model, set(model.save)
        self.head_from = model.model[-1].f

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        outputs: list[Any] = []
        for m in self.model[:-1]:
            if m.f != -1:
                x = outputs[m.f] if isinstance(m.f, int) else [x if j == -1 else outputs[j] for j in m.f]
            x = m(x)
            outputs.append(x if m.i in self.save else None)
        return [x if j == -1 else outputs[j] for j in self.head_from]


class TracedModel(torch.nn.Module):
    """YOLOv7's utils.torch_utils.TracedModel: the traced body, then the eager Detect head."""

    def __init__(self, model: Any, img_size: int) -> None:
        super().__init__()
        self.stride, self.names = model.stride, model.names
        self.detect_layer = model.model[-1]
        self.model = torch.jit.trace(Body(model), torch.rand(1, 3, img_size, img_size), strict=False)

    def forward(self, x: torch.Tensor) -> Any:
        return self.detect_layer(self.model(x))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="yolov8n")
    parser.add_argument("--img-size", type=int, default=96)
    parser.add_argument("--frames", type=int, default=6)
    parser.add_argument("--style", choices=("whole", "yolov7"), default="whole")
    parser.add_argument("--no-trace", action="store_true")
    parser.add_argument("--source", default=None)
    return parser.parse_args()


def main(opt: argparse.Namespace) -> None:
    model: Any = build_model(opt.model)
    if not opt.no_trace and opt.style == "whole":
        head = model.model[-1]
        if hasattr(head, "export"):  # ultralytics' head returns its boxes alone, as its own exporter sets it
            head.export = True
        example = torch.rand(1, 3, opt.img_size, opt.img_size)
        with torch.no_grad():
            model(example)  # a dry run, as ultralytics' exporter does: the head caches its anchors for this size
            model = torch.jit.trace(model, example, strict=False, check_trace=False)
    elif not opt.no_trace:
        model = TracedModel(model, opt.img_size)
    print(f"model: {type(model).__name__}")
    yolov7 = opt.model.startswith("yolov7")
    with torch.no_grad():
        for path in islice(cycle(image_paths(opt.source)), opt.frames):
            padded, _, _ = letterbox(cv2.imread(str(path)), opt.img_size)
            print(f"{path.name}: {len(nms(model(to_tensor([padded])), yolov7)[0])} boxes")


if __name__ == "__main__":
    main(parse_args())
