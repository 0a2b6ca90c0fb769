"""The input shapes a pass's forwards were given: part of the measurement, since a forward's time and FLOPs
depend on it. The workload (the built-in pipeline, or a program's driver) tells the marker bus each forward's
input shape as the forward ends; the bus's tally files it under the iteration's kind (warm-up, measured or clean)
and its index, so that the report can say each shape with its calls, and a paired pass's ABBA blocks can be
compared like with like (hwprof.analysis.paired_cost)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KINDS = ("warmup", "measured", "clean")


def shape_text(shape: Any) -> str:
    """ "1x3x320x256" for a tensor's shape (any sequence of ints)."""
    return "x".join(str(int(n)) for n in shape)


def input_shape(args: Any) -> str | None:
    """The shape of the first tensor in a call's arguments (nested in lists, tuples or dicts), None without one."""
    stack = [args]
    while stack:
        item = stack.pop(0)
        shape = getattr(item, "shape", None)
        if shape is not None and hasattr(item, "dtype"):
            return shape_text(shape)
        if isinstance(item, list | tuple):
            stack = [*item, *stack]
        elif isinstance(item, dict):
            stack = [*item.values(), *stack]
    return None


@dataclass
class InputTally:
    """Each shape's forwards by kind, and the shape of each measured and clean iteration (by its index)."""

    calls: dict[str, dict[str, int]] = field(default_factory=dict)
    """shape -> {"warmup": n, "measured": n, "clean": n}, shapes in the order first seen."""
    measured: dict[int, str] = field(default_factory=dict)
    clean: dict[int, str] = field(default_factory=dict)

    def record(self, shape: str | None, iteration: int, warmup: bool, clean: bool) -> None:
        if shape is None:
            return
        kind = "warmup" if warmup else "clean" if clean else "measured"
        counts = self.calls.setdefault(shape, dict.fromkeys(KINDS, 0))
        counts[kind] += 1
        if kind != "warmup":
            (self.clean if clean else self.measured)[iteration] = shape
