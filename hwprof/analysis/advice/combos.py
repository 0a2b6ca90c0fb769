"""Candidates that combine levers (runtime x precision x layout), and the rule that keeps the table short.

Pure. A combination is measured in a second round, after the single levers it is made of (its parts) were
measured in the same advise. It runs when each of its parts gained (ranked: measured faster, resolved, output
within tolerance), or when the host's units make it the likely winner whatever its parts' speed (AMX-BF16 or
AVX512-BF16 for the bf16 combinations, VNNI or AMX-INT8 for static int8: on the issue's Xeon, autocast bf16 alone
gained 1.09x while OpenVINO bf16 and bf16 weights with channels_last gained 7x and 2.5x), or when `--only` asked
for it; else it is listed as not run with what its parts did ("skipped: channels_last (1.39x) gained but bf16
(0.97x) did not"). The units speak for speed only: a part whose output check changed the output (a precision
that destroys the detections) skips the combination whatever the units, unless the model has random weights
(no --weights): the scaled random init carries a rounding change through every layer almost as far as another
input would (yolov7 at 640: bf16's head error 85% of the input's, 3 of 75 detections kept), so its changed output
does not predict a trained model's, and the combination runs for its speed, its own output check deciding its row.
The combinations' units are also the ones they need at all (blocked without them), so on today's combinations
the units decide where the host has them; the parts' rule stands for a combination whose `likely` is empty. A part
the advised run already has (a channels_last run's channels_last) is no part of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hwprof.analysis.advice.candidate import Candidate, RunFacts, Variant
from hwprof.analysis.advice.candidates import BF16_UNITS, INT8_UNITS, candidates, missing_units, tie_findings
from hwprof.analysis.advice.table import CHANGED_OUTPUT, MEASURED, NOT_RUN, AdviceRow
from hwprof.analysis.finding import Finding
from hwprof.core.isa_units import advice_units
from hwprof.core.runtime_names import BF16_WEIGHTS, INT8_STATIC

ASKED = "asked for with --only"
TOPICS = ("efficiency", "below-roof")


@dataclass(frozen=True)
class Combo:
    key: str
    change: str
    how: str
    variant: Variant
    parts: tuple[str, ...]
    """The single levers' candidate keys it combines."""
    units: tuple[str, ...]
    """/proc/cpuinfo flags that make it the likely winner (and without which it is not run at all)."""
    unit_kind: str


COMBOS: tuple[Combo, ...] = (
    Combo(
        "openvino-bf16",
        "OpenVINO with INFERENCE_PRECISION_HINT=bf16 on the exported model",
        "--runtime openvino --precision bf16",
        Variant(runtime="openvino", precision="bf16"),
        ("openvino", "bf16"),
        BF16_UNITS,
        "bf16",
    ),
    Combo(
        "channels_last+bf16",
        "bf16 autocast with the model and input in channels_last (NHWC)",
        "--precision bf16 --channels-last",
        Variant(precision="bf16", channels_last=True),
        ("channels_last", "bf16"),
        BF16_UNITS,
        "bf16",
    ),
    Combo(
        "channels_last+bf16-weights",
        "the model's weights and input in bf16 (every op in bf16), channels_last (NHWC)",
        f"--precision {BF16_WEIGHTS} --channels-last",
        Variant(precision=BF16_WEIGHTS, channels_last=True),
        ("channels_last", "bf16"),
        BF16_UNITS,
        "bf16",
    ),
    Combo(
        INT8_STATIC,
        "ONNX Runtime int8, static quantization (QDQ, u8s8) calibrated on the run's own images",
        f"--runtime onnxruntime --precision {INT8_STATIC}",
        Variant(runtime="onnxruntime", precision=INT8_STATIC),
        ("onnxruntime", "int8"),
        INT8_UNITS,
        "int8",
    ),
)


def with_combinations(facts: RunFacts, findings: Iterable[Finding]) -> list[Candidate]:
    """The run's single levers, then their combinations, all tied to the findings (advice_candidates.candidates)."""
    found = list(findings)
    singles = candidates(facts, found)
    return singles + tie_findings(combo_candidates(facts, singles), found)


def combo_candidates(facts: RunFacts, singles: Sequence[Candidate]) -> list[Candidate]:
    """The combinations for a torch fp32 run on the CPU, each with the parts the run lacks (those among
    `singles`); blocked where the host lacks its units or its runtime."""
    if facts.device != "cpu" or facts.runtime != "torch" or facts.precision != "fp32":
        return []
    keys = {c.key for c in singles}
    out = []
    for combo in COMBOS:
        if combo.variant.channels_last and facts.channels_last:
            parts = tuple(p for p in combo.parts if p != "channels_last")
        else:
            parts = combo.parts
        runtime = combo.variant.runtime or ""
        out.append(
            Candidate(
                combo.key,
                combo.change,
                combo.how,
                TOPICS,
                combo.variant,
                blocked=missing_units(facts, combo.units, combo.unit_kind)
                or facts.unavailable_runtimes.get(runtime, ""),
                parts=tuple(p for p in parts if p in keys),
                likely=", ".join(advice_units([u for u in combo.units if u in (facts.isa_flags or ())])),
            )
        )
    return out


@dataclass(frozen=True)
class PartOutcome:
    """What one part did in this advise: gained (ranked advice) or not, and its figure in words."""

    key: str
    gained: bool
    text: str
    """"1.39x", "0.97x", "1.02x, not resolved", "changed output", "not run", "failed"."""
    changed: bool = False
    """Its output check changed the output (never ranked)."""


def part_outcome(key: str, row: AdviceRow | None) -> PartOutcome:
    if row is None:
        return PartOutcome(key, False, "not measured in this advise")
    if row.status == NOT_RUN:
        return PartOutcome(key, False, "not run")
    if row.status == CHANGED_OUTPUT:
        speed = f"{row.forward.ratio:.2f}x, " if row.forward is not None else ""
        return PartOutcome(key, False, speed + CHANGED_OUTPUT.lower(), changed=True)
    if row.forward is None or row.status != MEASURED:
        return PartOutcome(key, False, row.status)
    ratio = f"{row.forward.ratio:.2f}x"
    if row.ranked:
        return PartOutcome(key, True, ratio)
    if row.forward.ratio > 1.0:
        return PartOutcome(key, False, f"{ratio}, not resolved")
    return PartOutcome(key, False, ratio)


@dataclass(frozen=True)
class ComboDecision:
    run: bool
    why: str


def combo_decision(
    candidate: Candidate, parts: Mapping[str, PartOutcome], asked: bool = False, random_weights: bool = False
) -> ComboDecision:
    """Whether a combination runs, and why: `parts` holds its parts' outcomes in this advise (a part absent from
    it was not measured); `asked`: --only named it, which runs it whatever the rule says (the why keeps both);
    `random_weights`: the run's model has no trained weights, so a part's changed output says little of what a
    trained model's would do."""
    decision = _rule(
        candidate,
        [parts.get(p) or PartOutcome(p, False, "not measured in this advise") for p in candidate.parts],
        random_weights,
    )
    if asked and not decision.run:
        return ComboDecision(True, f"{ASKED} (the rule alone would have {decision.why})")
    return decision


def _rule(candidate: Candidate, outcomes: list[PartOutcome], random_weights: bool = False) -> ComboDecision:
    figures = "; ".join(f"{o.key} {o.text}" for o in outcomes)
    gained = [o for o in outcomes if o.gained]
    lost = [o for o in outcomes if not o.gained]
    changed = " and ".join(o.key for o in outcomes if o.changed)
    if changed and candidate.likely and random_weights:
        return ComboDecision(
            True,
            f"{candidate.likely} on this host make(s) it the likely winner, and {changed} changed the output of a "
            f"model of random weights, which says little of a trained one's: its own check decides its row "
            f"({figures})",
        )
    if changed:
        return ComboDecision(
            False,
            f"skipped: {changed} changed the output ({figures}); to measure it anyway: hwprof advise RUN --only "
            f"{candidate.key}",
        )
    if not lost:
        return ComboDecision(True, f"its parts each gained ({figures})" if figures else "it has no part to wait for")
    if candidate.likely:
        return ComboDecision(True, f"{candidate.likely} on this host make(s) it the likely winner ({figures})")
    did_not = ", ".join(f"{o.key} ({o.text})" for o in lost)
    if not gained:
        return ComboDecision(False, f"skipped: none of its parts gained ({did_not})")
    did = ", ".join(f"{o.key} ({o.text})" for o in gained)
    return ComboDecision(False, f"skipped: {did} gained but {did_not} did not")
