"""A model's outputs as tensors: every tensor in export order, and the detection head."""

from __future__ import annotations

import math
from dataclasses import dataclass
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


def mirrored(batch: torch.Tensor) -> torch.Tensor:
    """The batch mirrored left to right: a second, different input of the same statistics, for the input
    sensitivity of an output check (hwprof.schema.runtime_checks.SENSITIVITY_METHOD)."""
    return batch.flip(-1)


@dataclass
class OutputFigures:
    """A variant's output against the reference's on one batch, and the reference's own change on another input."""

    head_max_abs: float
    head_mean_abs: float
    head_range: float
    head_max_abs_reference: float
    head_sensitivity: float
    raw_maps: int = 0
    raw_max_abs: float | None = None
    raw_max_abs_reference: float | None = None
    raw_sensitivity: float | None = None
    raw_sqnr_db: float | None = None
    """None where the maps are equal (no error to set the signal against) or the signal is zero."""


def sqnr_db(reference: list[torch.Tensor], got: list[torch.Tensor]) -> float | None:
    """10 log10(sum ref^2 / sum (got - ref)^2) over all the tensors; None where either sum is zero."""
    signal = sum(float(r.double().pow(2).sum()) for r in reference)
    noise = sum(float((g.double() - r.double()).pow(2).sum()) for r, g in zip(reference, got, strict=True))
    return 10 * math.log10(signal / noise) if signal > 0 and noise > 0 else None


def compare_outputs(reference: Any, got: Any, reference_other: Any) -> OutputFigures:
    """The head (and the raw per-level maps where their shapes pair) of `got` against `reference`, with the
    reference's output on another input (`reference_other`) as the scale of what an input changes."""
    ref_head = head_of(reference).float().cpu()
    got_head = head_of(got).float().cpu()
    other_head = head_of(reference_other).float().cpu()
    if ref_head.shape != got_head.shape:
        raise ValueError(
            f"the variant's head has shape {tuple(got_head.shape)}, the reference's {tuple(ref_head.shape)}"
        )
    diff = (got_head - ref_head).abs()
    figures = OutputFigures(
        head_max_abs=float(diff.max()),
        head_mean_abs=float(diff.mean()),
        head_range=float(ref_head.max() - ref_head.min()),
        head_max_abs_reference=float(ref_head.abs().max()),
        head_sensitivity=float((other_head - ref_head).abs().max()),
    )
    triples = [
        (r.float().cpu(), g.float().cpu(), o.float().cpu())
        for r, g, o in zip(
            flat_outputs(reference)[1:], flat_outputs(got)[1:], flat_outputs(reference_other)[1:], strict=False
        )
        if r.shape == g.shape == o.shape
    ]
    if triples:
        refs, gots = [t[0] for t in triples], [t[1] for t in triples]
        figures.raw_maps = len(triples)
        figures.raw_max_abs = max(float((g - r).abs().max()) for r, g, _ in triples)
        figures.raw_max_abs_reference = max(float(r.abs().max()) for r in refs)
        figures.raw_sensitivity = max(float((o - r).abs().max()) for r, _, o in triples)
        figures.raw_sqnr_db = sqnr_db(refs, gots)
    return figures
