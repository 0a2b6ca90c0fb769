"""A measured forward of a traced model whose ops are not the warm-up forward's (another input shape, or
TorchScript's unoptimised graph at a shape's first call) takes the warm-up's module hierarchies as aligned by
op name (collectors/torch_profiler/module_layers.py): the official YOLOv7 detect.py's images of two shapes."""

from __future__ import annotations

from dataclasses import dataclass

from hwprof.collectors.torch_profiler.kineto import KEvent
from hwprof.collectors.torch_profiler.module_layers import borrow_hierarchies

TOP, L1, L2 = "TOP(M)::forward.", "TOP(M)::forward.1(Conv)::forward.", "TOP(M)::forward.2(Conv)::forward."


@dataclass
class FakeOp:
    event: KEvent
    start: int
    layer: str | None = None
    stage: str | None = "forward"
    iteration: int | None = 0
    hierarchy: str | None = None


def _ops(rows: list[tuple[str, int, int, str | None]], iteration: int | None) -> list[FakeOp]:
    """(name, start, duration, hierarchy) in start order."""
    return [FakeOp(KEvent(n, "cpu_op", 1, s, d, {}), s, iteration=iteration, hierarchy=h) for n, s, d, h in rows]


# the warm-up forward: TorchScript's `forward` around layer 1 (a convolution through oneDNN, then a narrow the
# unoptimised graph runs) and layer 2 (cat, convolution)
WARM = [
    ("forward", 0, 100, TOP),
    ("aten::_convolution", 1, 20, L1),
    ("aten::mkldnn_convolution", 2, 10, L1),
    ("aten::narrow", 22, 2, L1),
    ("aten::leaky_relu_", 25, 3, L1),
    ("aten::cat", 40, 5, L2),
    ("aten::_convolution", 46, 20, L2),
    ("aten::mkldnn_convolution", 47, 10, L2),
]


def test_same_ops_borrow_one_for_one_and_another_shapes_ops_are_aligned() -> None:
    warm = _ops(WARM, None)
    same = _ops([(n, s + 1000, d, None) for n, s, d, _ in WARM], 0)
    # another shape: layer 1's convolution runs thnn_conv2d, no narrow, and an op between the layers
    other = _ops(
        [
            ("forward", 2000, 100, None),
            ("aten::_convolution", 2001, 20, None),
            ("aten::thnn_conv2d", 2002, 10, None),
            ("aten::leaky_relu_", 2025, 3, None),
            ("aten::view", 2030, 1, None),
            ("aten::cat", 2040, 5, None),
            ("aten::_convolution", 2046, 20, None),
            ("aten::empty", 2047, 1, None),
            ("aten::mkldnn_convolution", 2048, 10, None),
        ],
        1,
    )
    done = borrow_hierarchies([*same, *other], warm)
    assert (done.unmatched, done.aligned, done.ops_unaligned) == (0, 1, 3)
    assert [op.hierarchy for op in same] == [h for *_, h in WARM]
    # thnn_conv2d: between two ops of layer 1; view: between the layers, so TorchScript's forward's; empty:
    # between two ops of layer 2
    assert [op.hierarchy for op in other] == [TOP, L1, L1, L1, TOP, L2, L2, L2, L2]


def test_a_forward_with_no_op_in_common_borrows_nothing() -> None:
    warm = _ops(WARM, None)
    other = _ops([("aten::addmm", 10, 5, None), ("aten::relu", 20, 1, None)], 0)
    done = borrow_hierarchies(other, warm)
    assert (done.unmatched, done.aligned) == (1, 0)
    assert all(op.hierarchy is None for op in other)
