"""A model's outputs as tensors: every tensor in export order, and the detection head."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def flat_outputs(output: Any) -> list[torch.Tensor]:
    """Every tensor of a model's output in the order torch.onnx.export lists them."""
    import torch

    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, tuple | list):
        return [t for part in output for t in flat_outputs(part)]
    return [output] if isinstance(output, torch.Tensor) else []


def head_of(output: Any) -> torch.Tensor:
    """The raw prediction tensor of a model's output (the first element of a tuple)."""
    while isinstance(output, tuple | list):
        output = output[0]
    return output
