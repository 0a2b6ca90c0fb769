"""advice.json as typed records: the candidate changes `hwprof advise` ran against a run (or a recording gave),
each row's speed-ups, output check and layer deltas, and the ABBA blocks for the trace
(hwprof.analysis.advice.table.Advice.to_dict writes it; Advice.from_dict reads it through AdviceFile).

Records (codec.py): a damaged field gives one line naming advice.json and the field; the computed keys the
writer adds (resolved, ranked, breakeven_inferences, methods, ...) are known, so the file round-trips key for key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from hwprof.schema.bounds import Count, NonNegative
from hwprof.schema.check import RunDirError, found
from hwprof.schema.codec import JsonObject, Record
from hwprof.schema.run_passes import NeighboursDoc

ADVICE_SCHEMA = 1
"""advice.json's "schema": the version this hwprof writes and reads."""


@dataclass(kw_only=True)
class SpeedupDoc(Record):
    """Baseline time / variant time, its spread and method (hwprof.analysis.advice.table.Speedup as written)."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("method", "ratio")
    method: str = ""
    ratio: NonNegative = 0.0
    q1: NonNegative | None = None
    q3: NonNegative | None = None
    low: NonNegative | None = None
    high: NonNegative | None = None
    blocks: Count | None = None
    before_ms: NonNegative | None = None
    after_ms: NonNegative | None = None
    resolved: bool | None = None


@dataclass(kw_only=True)
class OutputCheckDoc(Record):
    """The variant's output against the fp32 reference (hwprof.analysis.advice.table.OutputCheck as written)."""

    REQUIRED: ClassVar[tuple[str, ...]] = (
        "head_max_abs", "head_range", "candidates_reference", "candidates", "detections_reference", "detections",
        "matched",
    )  # fmt: skip
    head_max_abs: NonNegative = 0.0
    head_range: NonNegative = 0.0
    candidates_reference: Count = 0
    candidates: Count = 0
    detections_reference: Count = 0
    detections: Count = 0
    matched: Count = 0
    tolerance: NonNegative | None = None
    unmatched_share: NonNegative | None = None
    """Unmatched detections (either side) over the reference's count: above 1 where the variant finds more."""
    within_tolerance: bool | None = None
    head_relative: float | None = None
    head_sensitivity: float | None = None
    """The reference head's max |Δ| between two different inputs (absent in advice made before it was measured)."""
    raw_max_abs: float | None = None
    raw_sqnr_db: float | None = None
    verdict: str | None = None
    """"pass", "changed" or "blind" (hwprof.schema.runtime_checks.output_verdict)."""
    trained: bool | None = None
    """The model had trained weights: its detections decide (absent in advice made before issue 46)."""
    images: Count | None = None
    score_max_abs: NonNegative | None = None
    score_tolerance: NonNegative | None = None
    decides: bool | None = None


@dataclass(kw_only=True)
class LayerDeltaDoc(Record):
    """One layer's time in the baseline's and the variant's layers pass (ms per forward, p50)."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("index", "type", "before_ms", "after_ms")
    index: Count = 0
    type: str = ""
    before_ms: NonNegative = 0.0
    after_ms: NonNegative = 0.0


@dataclass(kw_only=True)
class StageDeltaDoc(Record):
    """A stage other than the forward, p50 before and after (hwprof.analysis.advice.stages.StageDelta)."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("name", "before_ms", "after_ms")
    name: str = ""
    before_ms: float = 0.0
    after_ms: float = 0.0


@dataclass(kw_only=True)
class AdviceRowDoc(Record):
    """One candidate change (hwprof.analysis.advice.table.AdviceRow as written)."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("key", "change", "how", "finding")
    key: str = ""
    change: str = ""
    how: str = ""
    finding: str = ""
    status: str | None = None
    reason: str | None = None
    forward: SpeedupDoc | None = None
    end_to_end: SpeedupDoc | None = None
    per_image: bool | None = None
    setup_s: NonNegative | None = None
    setup_what: str | None = None
    output: OutputCheckDoc | None = None
    layers: list[LayerDeltaDoc] = field(default_factory=list)
    layers_note: str | None = None
    pairing_note: str | None = None
    variant_run: str | None = None
    stages: list[StageDeltaDoc] = field(default_factory=list)
    stages_note: str | None = None
    neighbours: dict[str, NeighboursDoc] | None = None
    """Worker process -> hwprof.perf.neighbours.NeighbourLoad as written."""
    disturbed: str | None = None
    minor_faults: list[float] | None = None
    combination: str | None = None
    """A combination of levers: why it ran and what its parts did (since issue 41)."""
    rss_bytes: list[float] | None = None
    """[baseline, variant] resident bytes at a measured iteration's end, medians (since issue 59)."""
    race: str | None = None
    """How far its paired blocks ran where advise's race cut or extended them, and why (since issue 66)."""
    resolved: bool | None = None
    """The forward's figure is resolved: its spread excludes 1.00 and no process was disturbed (since issue 45)."""
    ranked: bool | None = None
    breakeven_inferences: NonNegative | None = None


@dataclass(kw_only=True)
class AdviceBlockDoc(Record):
    """One side's iteration inside an ABBA block (CLOCK_MONOTONIC ns), for the trace."""

    REQUIRED: ClassVar[tuple[str, ...]] = (
        "key", "side", "block", "iteration", "start_ns", "end_ns", "forward_start_ns", "forward_end_ns",
    )  # fmt: skip
    key: str = ""
    side: str = ""
    block: int = 0
    iteration: int = 0
    start_ns: int = 0
    end_ns: int = 0
    forward_start_ns: int = 0
    forward_end_ns: int = 0


@dataclass(kw_only=True)
class AdviceFile(Record):
    """advice.json (see the module's docstring)."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("baseline", "rows")
    schema: int | None = None
    baseline: str = ""
    device: str | None = None
    source: str | None = None
    started_ns: int | None = None
    ended_ns: int | None = None
    wall_s: NonNegative | None = None
    notes: list[Any] | None = None
    methods: JsonObject | None = None
    """Method -> how it measures (hwprof.analysis.advice.table.METHOD_TEXT, written for readers of the file)."""
    rows: list[AdviceRowDoc] = field(default_factory=list)
    blocks: list[AdviceBlockDoc] = field(default_factory=list)

    @classmethod
    def read(cls, doc: Any, where: str) -> AdviceFile:
        """advice.json's value `doc`, checked and typed; the schema version is checked first (a file of another
        version is named as such: ValueError), then every field (RunDirError naming the field)."""
        if not isinstance(doc, dict):
            raise RunDirError(f"{where}: must be a JSON object, found {found(doc)}")
        if doc.get("schema") != ADVICE_SCHEMA:
            raise ValueError(f"{where}: schema {doc.get('schema')!r}, this hwprof reads {ADVICE_SCHEMA}")
        return cls.from_json(doc, where)
