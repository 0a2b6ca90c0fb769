"""The documents a pass's worker writes into its folder besides the markers and the collectors' own files
(hwprof.rundir.pass_files writes them): model.json (the built model and its layer table), result.json (the
pass's status, each collector's result, the paired figures) and runtime.json (what executed the forward).

Read as records (codec.py): a damaged field gives one line naming the file and the field, and each file is
written back key for key, so readers take these instead of digging into the parsed JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from hwprof.schema.bounds import Count, NonNegative
from hwprof.schema.codec import Record
from hwprof.schema.detections import DetectionsDoc
from hwprof.schema.frames import FramesDoc
from hwprof.schema.inputs import InputsDoc
from hwprof.schema.model_identity import ModelIdentity
from hwprof.schema.program import ProgramOutcome
from hwprof.schema.run import CollectorEntry, RuntimeDoc
from hwprof.schema.run_passes import StoppingDoc


@dataclass(kw_only=True)
class LayerEntry(Record):
    """One row of model.json's layer table (hwprof.workload.layers.LayerInfo as written)."""

    REQUIRED: ClassVar[tuple[str, ...]] = (
        "index", "name", "type", "from", "params", "weight_bytes", "in_bytes", "out_bytes", "out_shapes",
    )  # fmt: skip
    """What the layer table's readers take from every row (a KeyError before these were checked)."""
    index: Count = 0
    name: str = ""
    """Qualified module name: "model.7", or "model.7.cv1" at depth 2."""
    type: str = ""
    qualified_type: str | None = None
    params: Count | None = None
    """None in an imported GPU run (the recording does not state it)."""
    weight_bytes: Count | None = None
    depth: Count = 1
    in_shapes: list[Any] | None = None
    out_shapes: list[Any] = field(default_factory=list)
    in_bytes: Count | None = None
    out_bytes: Count | None = None
    from_edges: list[Any] = field(default_factory=list, metadata={"key": "from"})
    """The indices of the layers this one takes its input from (-1: the previous one)."""

    @property
    def label(self) -> str:
        """How a person reads the layer: "7 Conv", or "7.cv1 Conv" at depth 2."""
        return f"{self.name.removeprefix('model.')} {self.type}"


@dataclass(kw_only=True)
class ModelInfo(ModelIdentity):
    """model.json: the model the pass built, its weights and sizes, and its layer table (to --depth)."""

    stride: Count | None = None
    output_format: str | None = None
    classes: Count | None = None
    input_shape: list[Any] | None = None
    layers: list[LayerEntry] = field(default_factory=list)

    @property
    def top_level_layers(self) -> int:
        """The model's own layers (depth 1), not the sub-modules a --depth table adds."""
        return sum(1 for row in self.layers if row.depth == 1)


@dataclass(kw_only=True)
class PairedExtension(Record):
    """ABBA blocks the pass added after the planned ones (hwprof.session.paired.Extension as written)."""

    planned_blocks: Count | None = None
    planned_s: NonNegative | None = None
    limit_s: NonNegative | None = None
    reason: str | None = None
    added_blocks: Count | None = None
    used_s: NonNegative | None = None
    stopped: str | None = None
    stopped_by: str | None = None
    """resolved, time, noise or iterations (hwprof.session.paired.Extension.stopped_by)."""
    resolved: bool | None = None
    text: str | None = None


@dataclass(kw_only=True)
class PairedInfo(Record):
    """result.json "paired": which hooks and collectors the pass switched off in its clean iterations."""

    switched: list[Any] | None = None
    always_on: list[Any] | None = None
    extension: PairedExtension | None = None


@dataclass(kw_only=True)
class PassResult(Record):
    """result.json: how the pass ended, what its runtime executed, each collector's result (typed summary)
    and its paired figures (None when it did not interleave clean iterations)."""

    pass_name: str | None = field(default=None, metadata={"key": "pass"})
    status: str | None = None
    error: str | None = None
    finished_ns: Count | None = None
    detections_per_iteration: list[Any] | None = None
    candidates_per_iteration: list[int] | None = None
    """Boxes over the confidence threshold that NMS considered, per warm-up iteration (counted outside the measured
    ones; absent in older runs)."""
    detections: DetectionsDoc | None = None
    """The boxes NMS kept in the measured iterations, per image and class (absent in older runs and a program's)."""
    runtime: RuntimeFile | None = None
    """The runtime's info as its runtime.json holds it."""
    collectors: dict[str, CollectorEntry] = field(default_factory=dict)
    paired: PairedInfo | None = None
    pid: Count | None = None
    """The worker's pid (written by older workers; run.json's passes.<pass>.pid now)."""
    program: ProgramOutcome | None = None
    """A program's pass: the model found and how the program ended (None for the built-in pipeline)."""
    frames: FramesDoc | None = None
    """A video input's frames read, and the annotated frames written (None: images, no --annotate)."""
    inputs: InputsDoc | None = None
    """The input shapes the pass's forwards were given (hwprof.core.input_shapes)."""
    stopping: StoppingDoc | None = None
    """The pass's stopping rule, where it applied (hwprof.session.timing_stop, hwprof.session.pass_stop)."""

    @classmethod
    def read(cls, doc: Any, where: str) -> PassResult:
        """result.json's value `doc`, read from `where`: each collector's summary read as its collector's type."""
        result = cls.from_json(doc, where)
        if result.collectors:
            result.collectors = {name: CollectorEntry.read(name, e, where) for name, e in doc["collectors"].items()}
        return result


@dataclass(kw_only=True)
class RuntimeFile(RuntimeDoc):
    """runtime.json: the runtime's info (run.json's "runtime" holds the same), with what its profiler added
    when the pass profiled it."""

    profiler: str | None = None
    replayed_layer_markers: Count | None = None
    profile_error: str | None = None
    trace_iterations: Count | None = None
    nodes_executed: Count | None = None
    fused_across_layers: Count | None = None
