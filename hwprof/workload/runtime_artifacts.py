"""The runtime's output against fp32 torch, checked before a pass measures (its files: hwprof.rundir.pass_files)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwprof.schema.runtime_checks import SENSITIVITY_METHOD, OutputDiff

if TYPE_CHECKING:
    import torch

    from hwprof.workload.pipeline import Pipeline
    from hwprof.workload.runtime import Runtime


def output_difference(pipeline: Pipeline, runtime: Runtime, batch: torch.Tensor) -> OutputDiff:
    """The runtime's raw head and detections against the fp32 torch model on the same input, read against
    what the torch model's output changes on another input (its input sensitivity)."""
    import torch

    from hwprof.workload.outputs import compare_outputs, mirrored

    if runtime.name == "torch" and runtime.config.precision == "fp32":
        return OutputDiff.of(reference="this run is the reference (the fused torch model in fp32)", max_abs_head=0.0)
    with torch.inference_mode():
        reference_out = pipeline.model(batch)
        other_out = pipeline.model(mirrored(batch))
    output = runtime.run(batch)
    f = compare_outputs(reference_out, output, other_out)
    result = OutputDiff.of(
        reference="the fused torch model in fp32 on the same input (the first batch)",
        max_abs_head=f.head_max_abs,
        mean_abs_head=f.head_mean_abs,
        max_abs_reference=f.head_max_abs_reference,
        detections=pipeline.count_detections(output),
        detections_reference=pipeline.count_detections(reference_out),
    )
    # The raw per-level maps before the head's sigmoid and box decoding: a saturated head hides what these show.
    if f.raw_maps:
        result.update(max_abs_raw=f.raw_max_abs, max_abs_raw_reference=f.raw_max_abs_reference, raw_maps=f.raw_maps)
    result.update(sensitivity_head=f.head_sensitivity, sensitivity_method=SENSITIVITY_METHOD)
    if f.raw_maps:
        result.update(sensitivity_raw=f.raw_sensitivity, sqnr_raw_db=f.raw_sqnr_db)
    return result
