"""A TorchScript model's eager parts (hwprof/program/eager_parts.py): YOLOv7's TracedModel traces its Model, whose
forward stops before the head, and runs the eager head (`detect_layer`) itself; that head is the table's last
layer, found by the tensors torch.jit.trace shares with it, and gets live layer markers."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from test_traced_layers import Yolo

from hwprof.core.markers import MarkerBus, attach_markers
from hwprof.program.eager_parts import describe, eager_layers
from hwprof.program.finder import layer_root

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.trace")
X = torch.randn(1, 3, 32, 32)


class Traceable(Yolo):
    """A YOLO-like model with YOLOv7's `traced` switch: its forward then leaves out its head."""

    traced = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for m in self.model[:-1] if self.traced else self.model:
            x = m(x)
        return x


class TracedModel(torch.nn.Module):
    """YOLOv7's utils.torch_utils.TracedModel, as it builds itself."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model
        self.detect_layer = self.model.model[-1]
        self.model.traced = True
        with torch.no_grad():
            self.model = torch.jit.trace(self.model, X, strict=False, check_trace=False)

    def forward(self, x: torch.Tensor) -> Any:
        return self.detect_layer(self.model(x))


def test_the_eager_head_is_the_tables_last_layer() -> None:
    wrapper = TracedModel(Traceable().eval())
    root, _ = layer_root(wrapper)
    assert root is wrapper.model  # the traced Model: its layer list holds the head's TorchScript copy
    eager = eager_layers(wrapper, root, 1)
    assert [(name, index) for name, index, _ in eager] == [("model.2", 2)]
    assert eager[0][2] is wrapper.detect_layer
    deeper = eager_layers(wrapper, root, 2)
    assert [name for name, _, _ in deeper] == ["model.2", "model.2.cv2", "model.2.cv3"]
    assert describe(eager).startswith("model.2 (Head): run eagerly")
    assert eager_layers(wrapper.model, root, 1) == []  # a model that is TorchScript itself runs no eager part


def test_the_eager_heads_markers_bracket_its_call() -> None:
    wrapper = TracedModel(Traceable().eval())
    bus = MarkerBus()
    seen: list[tuple[str, str, str]] = []
    bus.subscribe(lambda m: seen.append((m.kind, m.phase, m.name)), True)
    remove = attach_markers(eager_layers(wrapper, layer_root(wrapper)[0], 1), bus)
    with torch.no_grad():
        wrapper(X)
    remove()
    with torch.no_grad():
        wrapper(X)
    assert seen == [("layer", "B", "model.2"), ("layer", "E", "model.2")]
