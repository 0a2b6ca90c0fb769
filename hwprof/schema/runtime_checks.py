"""What a pass measures of its runtime's output against the fused torch model in fp32: run.json's and
runtime.json's "output_diff" (hwprof.workload.runtime_artifacts.output_difference writes it) and
model/layer_errors.json, every layer's output (hwprof.workload.layer_error writes it).

Read as records (codec.py), so the report, compare and sweep take typed fields instead of digging into
the parsed JSON, and a damaged field gives one line naming the file and the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from hwprof.schema.bounds import Count, NonNegative
from hwprof.schema.codec import Record

BLIND_RELATIVE = 1e-4
"""An output whose change between two different inputs stays below this share of its scale does not depend on
its input: a check of it could not have failed."""
PASS_SHARE = 0.1
"""A variant's error up to this share of what another input changes is a pass; above it, up to all of it, the
output differs (shown, not a failure); beyond it the output is changed."""
PASS, DIFFERS, CHANGED, BLIND = "pass", "differs", "changed", "blind"
BLIND_WORDS = "the head does not depend on its input: the check is blind"
SENSITIVITY_METHOD = "the reference on the first batch against the reference on the same batch mirrored left to right"


def output_verdict(error: float | None, sensitivity: float | None, scale: float | None) -> str | None:
    """What an output check could see: BLIND when the reference's output barely moves between two different
    inputs (so no error could have shown), CHANGED when the variant's error exceeds what another input
    changes, DIFFERS above PASS_SHARE of it, else PASS; None when the sensitivity was not measured (a run
    made before it was)."""
    if error is None or sensitivity is None:
        return None
    if sensitivity <= BLIND_RELATIVE * abs(scale or 0.0):
        return BLIND
    if error > sensitivity:
        return CHANGED
    return DIFFERS if error > PASS_SHARE * sensitivity else PASS


def verdict_text(verdict: str | None, error: float | None, sensitivity: float | None) -> str:
    """The verdict in words, with the error read against the input sensitivity."""
    if verdict is None or error is None or sensitivity is None:
        return ""
    if verdict == BLIND:
        return f"BLIND: {BLIND_WORDS} (two inputs differ by at most {sensitivity:.2g})"
    share = f"{100 * error / sensitivity:.2g}% of" if sensitivity else "above"
    word = {PASS: "pass", DIFFERS: "DIFFERS"}.get(verdict, "CHANGED")
    return f"{word}: max |Δ| {share} what another input changes ({sensitivity:.3g})"


@dataclass(kw_only=True)
class OutputDiff(Record):
    """The runtime's raw head and detections against torch fp32 on the same first batch. The reference
    run itself holds only `reference` and `max_abs_head` 0.0; `max_abs_raw*` and `raw_maps` only where the
    raw per-level maps before the head's decoding could be paired."""

    reference: str | None = None
    """What the output was compared with, in words."""
    max_abs_head: NonNegative | None = None
    mean_abs_head: NonNegative | None = None
    max_abs_reference: NonNegative | None = None
    """The head's largest value under torch fp32: what max_abs_head is read against."""
    detections: Count | None = None
    """After NMS, this runtime's; None in the reference run (not counted there)."""
    detections_reference: Count | None = None
    max_abs_raw: NonNegative | None = None
    max_abs_raw_reference: NonNegative | None = None
    raw_maps: Count | None = None
    """How many raw maps were paired (those of the same shape)."""
    sensitivity_head: float | None = None
    """Max |Δ| of the reference's head between two different inputs (SENSITIVITY_METHOD): what max_abs_head is
    compared with. Absent in runs made before it was measured."""
    sensitivity_raw: float | None = None
    """The same for the raw maps."""
    sqnr_raw_db: float | None = None
    """Signal to error ratio of the raw maps, 10 log10(sum ref^2 / sum (got - ref)^2)."""
    sensitivity_method: str | None = None

    @property
    def verdict(self) -> str | None:
        """PASS, CHANGED or BLIND for the head (output_verdict); None for the reference or an older run."""
        return output_verdict(self.max_abs_head, self.sensitivity_head, self.max_abs_reference)


@dataclass(kw_only=True)
class ClockDoc(Record):
    """How a runtime's profiler placed its node spans on the run's clock (runtime.json's "clock", run.json's
    runtime.profiled_passes.<pass>.clock): ONNX Runtime's alignment checked against each run() call
    (hwprof.workload.rt_onnxruntime.alignment_clock), OpenVINO's spans laid end to end (rt_openvino)."""

    method: str | None = None
    start_gap_us_p50: float | None = None
    end_gap_us_p50: float | None = None
    start_gap_us_min: float | None = None
    end_gap_us_min: float | None = None
    residual_us_p50: float | None = None
    residual_us_min: float | None = None
    residual_us_max: float | None = None
    error_bound_us: NonNegative | None = None
    """How far a span can sit off the run's clock."""
    error_bound_method: str | None = None
    runs_checked: Count | None = None
    runs_squeezed: Count | None = None
    squeeze_min: float | None = None
    squeeze_method: str | None = None
    wall_to_monotonic_uncertainty_us: NonNegative | None = None


@dataclass(kw_only=True)
class ProfiledPass(Record):
    """run.json runtime.profiled_passes.<pass>: what the runtime's profiler recorded in that pass
    (hwprof.session.collection moves these keys out of the pass's runtime info)."""

    profiler: str | None = None
    clock: ClockDoc | None = None
    """The profiler's clock alignment."""
    replayed_layer_markers: Count | None = None
    profile_error: str | None = None


@dataclass(kw_only=True)
class LayerError(Record):
    """One layer's output under the runtime against torch fp32 (hwprof.workload.layer_error.layer_errors)."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("max_abs", "max_abs_reference", "relative")
    max_abs: NonNegative = 0.0
    max_abs_reference: NonNegative = 0.0
    relative: NonNegative = 0.0
    """max_abs / max_abs_reference (0 where the reference is all zeros)."""
    sensitivity: float | None = None
    """Max |Δ| of the reference layer's output between two different inputs (SENSITIVITY_METHOD)."""

    @property
    def verdict(self) -> str | None:
        return output_verdict(self.max_abs, self.sensitivity, self.max_abs_reference)


@dataclass(kw_only=True)
class LayerErrors(Record):
    """model/layer_errors.json: every top-level layer's output error of the run's runtime and precision."""

    runtime: str | None = None
    precision: str | None = None
    reference: str | None = None
    method: str | None = None
    layers: dict[str, LayerError] = field(default_factory=dict)
