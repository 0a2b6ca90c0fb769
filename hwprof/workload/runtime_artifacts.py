"""The runtime's output against fp32 torch, checked before a pass measures (its files: hwprof.rundir.pass_files)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwprof.schema.runtime_checks import OutputDiff

if TYPE_CHECKING:
    import torch

    from hwprof.workload.pipeline import Pipeline
    from hwprof.workload.runtime import Runtime


def output_difference(pipeline: Pipeline, runtime: Runtime, batch: torch.Tensor) -> OutputDiff:
    """The runtime's raw head and detections against the fp32 torch model on the same input."""
    import torch

    from hwprof.workload.outputs import flat_outputs, head_of

    if runtime.name == "torch" and runtime.config.precision == "fp32":
        return OutputDiff.of(reference="this run is the reference (the fused torch model in fp32)", max_abs_head=0.0)
    with torch.inference_mode():
        reference_out = pipeline.model(batch)
    output = runtime.run(batch)
    reference = head_of(reference_out).float()
    got = head_of(output).float().to(reference.device)  # a CUDA runtime answers on its device
    if reference.shape != got.shape:
        raise ValueError(f"{runtime.name} returned shape {tuple(got.shape)}, torch {tuple(reference.shape)}")
    diff = (got - reference).abs()
    result = OutputDiff.of(
        reference="the fused torch model in fp32 on the same input (the first batch)",
        max_abs_head=float(diff.max()),
        mean_abs_head=float(diff.mean()),
        max_abs_reference=float(reference.abs().max()),
        detections=pipeline.count_detections(output),
        detections_reference=pipeline.count_detections(reference_out),
    )
    # The raw per-level maps before the head's sigmoid and box decoding: a random-init head saturates
    # (constant scores), so these show a precision's error even without trained weights.
    raw_ref, raw_got = flat_outputs(reference_out)[1:], flat_outputs(output)[1:]
    pairs = [(r.float(), g.float().to(r.device)) for r, g in zip(raw_ref, raw_got, strict=False) if r.shape == g.shape]
    if pairs:
        result.update(
            max_abs_raw=max(float((g - r).abs().max()) for r, g in pairs),
            max_abs_raw_reference=max(float(r.abs().max()) for r, _ in pairs),
            raw_maps=len(pairs),
        )
    return result
