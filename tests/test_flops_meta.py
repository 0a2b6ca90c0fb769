"""The FLOP count of hwprof's own pipeline on a meta-device copy of its model (collectors/flops.py, issue 66): the
same counts, module by module, as a real forward of the real zoo models, without running the model itself; a model
whose forward reads its values falls back to a real forward."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hwprof.collectors.flops import _counted

from hwprof.workload.zoo import build_model


@pytest.mark.parametrize("name", ["yolov7-tiny", "yolov8n"])
def test_the_meta_count_is_a_real_forwards_module_by_module(name: str) -> None:
    model = build_model(name).module
    batch = torch.rand(1, 3, 192, 160)
    calls: list[Any] = []
    model.register_forward_pre_hook(lambda m, _inputs: calls.append(m))
    on_meta, words = _counted(model, batch, meta=True)
    assert "meta-device copy" in words and calls and all(m is not model for m in calls)
    on_model, plain = _counted(model, batch, meta=False)
    assert plain == "" and calls[-1] is model
    counts = {k: dict(v) for k, v in on_meta.get_flop_counts().items()}
    assert counts == {k: dict(v) for k, v in on_model.get_flop_counts().items()}
    assert on_meta.get_total_flops() == on_model.get_total_flops() > 0
    assert sum(1 for k in counts if k.count(".") == 2) > 10  # the per-layer rows, not the total alone


def test_the_meta_copy_leaves_the_model_as_it_was() -> None:
    from hwprof.workload.zoo import meta_copy

    model = build_model("yolov7-tiny").module
    before = {name: (p.device.type, p.data_ptr()) for name, p in model.named_parameters()}
    copied = meta_copy(model)
    assert all(p.device.type == "meta" for p in copied.parameters())
    assert {name: (p.device.type, p.data_ptr()) for name, p in model.named_parameters()} == before
    assert model.model[-1].stride.device.type == "cpu"  # type: ignore[index]


class ReadsItsValues(torch.nn.Module):
    """A forward whose path depends on its input's values: a meta tensor has none."""

    def __init__(self) -> None:
        super().__init__()
        self.model = torch.nn.ModuleList([torch.nn.Conv2d(3, 4, 3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.model[0](x)
        return y * 2 if float(y.mean()) > 0 else y


def test_a_forward_that_reads_its_values_is_counted_on_the_model_itself() -> None:
    model = ReadsItsValues()
    counter, words = _counted(model, torch.rand(1, 3, 16, 16), meta=True)
    assert words == "" and counter.get_total_flops() == 2 * 4 * 3 * 9 * 14 * 14
