"""ONNX Runtime (CPU execution provider) running the run's exported model, with its own profiler.

ORT's profile is a Chrome-trace JSON written at end_profiling(): `cat: "Session"` events named
`model_run` (one per run() call, in order) and `cat: "Node"` events named `<node>_kernel_time`
with `args.op_name` and `args.provider`. `ts` counts microseconds from the profiling start, which
`get_profiling_start_time_ns()` gives on the wall clock; it is moved to CLOCK_MONOTONIC with an
offset read in-process, and each model_run is checked against the run() call timed around it
(the alignment error recorded in runtime.json).
"""

from __future__ import annotations

import gzip
import json
import shutil
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.core.atomic import atomic_path
from hwprof.core.runtime_names import INT8_STATIC
from hwprof.schema.codec import JsonObject
from hwprof.schema.runtime_checks import ClockDoc
from hwprof.workload.node_layers import NodeSpan, RunSpans, charge_inserted, layers_of, scope_of
from hwprof.workload.onnx_export import INPUT_NAME, ExportedModel, quantize_int8, quantize_int8_static
from hwprof.workload.runtime import (
    NodeInfo,
    Profile,
    RunRecord,
    Runtime,
    RuntimeUnavailable,
    adopt_inserted_layers,
    monotonic_offset_ns,
    register,
)

if TYPE_CHECKING:
    import numpy as np
    import torch

KERNEL_SUFFIX = "_kernel_time"
PROFILE_PREFIX = "onnxruntime_profile"
OPTIMIZED_FILE = "onnxruntime_optimized.onnx"
_TYPE_PRECISION = {"float": "fp32", "float16": "fp16", "bfloat16": "bf16", "uint8": "int8", "int8": "int8"}
_INT8_OPS = {"ConvInteger", "MatMulInteger", "QLinearConv", "QLinearMatMul", "DynamicQuantizeMatMul"}
_QDQ_OPS = {"QuantizeLinear", "DequantizeLinear"}
QUANTIZE_METHODS = {
    "int8": "onnxruntime.quantization.quantize_dynamic, QUInt8",
    INT8_STATIC: "onnxruntime.quantization.quantize_static, QDQ, QUInt8 activations, QInt8 per-channel weights, "
    "min-max calibration on the run's own images; the detection head (last layer) kept fp32",
}


@register
class OnnxRuntime(Runtime):
    name = "onnxruntime"
    profiler_name = "ONNX Runtime profiler (SessionOptions.enable_profiling)"

    def _prepare(self, sample: torch.Tensor) -> None:
        ort = self._import("onnxruntime")
        exported = self._export(sample, "CPUExecutionProvider", ort.__version__)
        model = self._quantized(exported)
        self.use_model(model)
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.config.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        if self.profile:
            options.enable_profiling = True
            options.profile_file_prefix = str(self.out_dir / PROFILE_PREFIX)
            options.optimized_model_filepath = str(self.out_dir / OPTIMIZED_FILE)
        self.session = ort.InferenceSession(str(self.run_dir / model.path), options, providers=["CPUExecutionProvider"])
        self.offset_ns, self.offset_uncertainty_ns = monotonic_offset_ns()
        # the timing pass is not profiled: its record comes from the graph ORT loaded (integer ops or not)
        self.info.update(
            executed_precision=executed_precision(graph_ops(self.run_dir / model.path), self.config.precision)
        )
        if model is not exported:
            self.info.update(quantized=model.to_dict() | {"method": QUANTIZE_METHODS[self.config.precision]})

    def _quantized(self, exported: ExportedModel) -> ExportedModel:
        """The file this precision runs: the export, its dynamic int8 model, or its static one (calibrated on the
        run's own batches)."""
        if self.config.precision == "int8":
            return quantize_int8(exported, self.run_dir)
        if self.config.precision == INT8_STATIC:
            if self.calibration is None:
                raise RuntimeUnavailable("int8-static needs the run's images to calibrate on; none were given")
            return quantize_int8_static(exported, self.run_dir, self.calibration.batches, self.calibration.what)
        return exported

    def _execute(self, batch: torch.Tensor) -> Any:
        import torch

        # Every output: the head first, then the raw per-level maps that the output check also compares.
        return tuple(torch.from_numpy(out) for out in self.session.run(None, {INPUT_NAME: batch.numpy()}))

    def layer_outputs(self, batch: torch.Tensor) -> dict[str, torch.Tensor]:
        from hwprof.workload.layer_error import probe_layer_outputs

        ort = self._import("onnxruntime")
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.config.threads
        options.log_severity_level = 3

        def run(probe: Path, names: list[str]) -> dict[str, np.ndarray]:
            session = ort.InferenceSession(str(probe), options, providers=["CPUExecutionProvider"])
            return dict(zip(names, session.run(names, {INPUT_NAME: batch.numpy()}), strict=True))

        assert self.exported is not None and self.executed_model is not None  # _prepare ran
        export = self.run_dir / self.exported.path
        return probe_layer_outputs(export, self.run_dir / self.executed_model.path, self.out_dir, run)

    def _profile(self) -> Profile | None:
        path = Path(self.session.end_profiling())
        events = json.loads(path.read_text())
        start_wall = int(self.session.get_profiling_start_time_ns())
        optimized = self.out_dir / OPTIMIZED_FILE
        assert self.executed_model is not None  # _prepare ran
        fused = fused_layers(self.run_dir / self.executed_model.path, optimized) if optimized.exists() else {}
        profile = profile_from_events(parse_ort_profile(events), start_wall - self.offset_ns, self.records, fused)
        if optimized.exists():
            optimized.unlink()  # as large as the model; what it told is in runtime_nodes.json
        profile.clock.update(wall_to_monotonic_uncertainty_us=self.offset_uncertainty_ns / 1e3)
        packed = path.with_suffix(".json.gz")
        with atomic_path(packed) as tmp, open(path, "rb") as raw, gzip.open(tmp, "wb") as out:
            shutil.copyfileobj(raw, out)
        path.unlink()
        self.info.update(
            executed_precision=executed_precision((n.op for n in profile.nodes.values()), self.config.precision)
        )
        return profile


@dataclass
class OrtEvent:
    """A `model_run` or node event of ORT's profile: ts and dur in us since the profiling start."""

    name: str
    ts: float
    dur: float
    op_name: str = ""
    provider: str = ""
    input_type: str | None = None
    """The first input's element type ("float", "uint8", ...), where the event lists its inputs."""


@dataclass
class OrtProfile:
    """What hwprof reads of ORT's profile: the model_run events and the node kernel events, in time order."""

    runs: list[OrtEvent]
    nodes: list[OrtEvent]


def _first_input_type(args: JsonObject) -> str | None:
    for shape in args.get("input_type_shape", [])[:1]:
        for type_name in shape:
            return str(type_name)
    return None


def _event_from_json(e: JsonObject) -> OrtEvent:
    args = e.get("args", {})
    return OrtEvent(
        str(e["name"]),
        e["ts"],
        e["dur"],
        str(args.get("op_name", "")),
        str(args.get("provider", "")),
        _first_input_type(args),
    )


def parse_ort_profile(events: list[JsonObject]) -> OrtProfile:
    """ORT's profile (its JSON list of events): the Session `model_run` events and the Node kernel events."""
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    nodes = [e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith(KERNEL_SUFFIX)]
    return OrtProfile(
        sorted((_event_from_json(e) for e in runs), key=lambda e: e.ts),
        sorted((_event_from_json(e) for e in nodes), key=lambda e: e.ts),
    )


def node_precision(input_type: str | None) -> str:
    return "" if input_type is None else _TYPE_PRECISION.get(input_type, input_type)


def kernel_name(node: str, op: str) -> str:
    return f"{op} (nchwc)" if "_nchwc" in node else op


def graph_ops(path: Path) -> set[str]:
    import onnx

    return {node.op_type for node in onnx.load(str(path), load_external_data=False).graph.node}


def executed_precision(ops: Iterable[str], asked: str) -> str:
    """int8 only where integer kernels ran (profiled) or are in the graph ORT loaded; else fp32. A QDQ file
    (int8-static) holds QuantizeLinear/DequantizeLinear pairs, which ORT fuses into integer kernels when it loads
    it: the profile's kernels say whether it did."""
    if asked in ("int8", INT8_STATIC):
        found = set(ops)
        if found & _INT8_OPS:
            return "int8"
        if asked == INT8_STATIC and found & _QDQ_OPS:
            return "int8 (QDQ graph; the profile's kernels confirm the integer ones)"
        return "fp32 (no integer kernel ran)"
    return asked


def fused_layers(original: Path, optimized: Path) -> dict[str, tuple[str, ...]]:
    """Optimized node name -> layers of the original nodes whose output tensors it produces.

    ORT names a fused node after its first original node, but the fused node produces the last
    one's output tensor: where that tensor came from another layer, the node spans both.
    """
    import onnx

    producer: dict[str, str] = {}
    for node in onnx.load(str(original), load_external_data=False).graph.node:
        scope = scope_of(node.name)
        if scope is not None:
            for tensor in node.output:
                producer[tensor] = scope.layer
    out: dict[str, tuple[str, ...]] = {}
    for node in onnx.load(str(optimized), load_external_data=False).graph.node:
        layers = [producer[t] for t in node.output if t in producer]
        if layers:
            out[node.name] = tuple(dict.fromkeys(layers))
    return out


def profile_from_events(
    events: OrtProfile,
    origin_ns: int,
    records: list[RunRecord],
    fused: dict[str, tuple[str, ...]] | None = None,
) -> Profile:
    """Node spans per run, on CLOCK_MONOTONIC (origin_ns: the profile's ts 0 on that clock).

    fused: optimized node name -> layers of the original outputs it produces (see fused_layers).

    The n-th `model_run` event is the n-th recorded run() call: runs must match one to one.
    """
    runs_ev, node_ev = events.runs, events.nodes
    if len(runs_ev) != len(records):
        raise ValueError(f"ONNX Runtime profiled {len(runs_ev)} runs but {len(records)} were made")
    reader = _NodeEvents(node_ev, origin_ns, fused or {})
    runs: list[RunSpans] = []
    gaps_start: list[float] = []
    gaps_end: list[float] = []
    for event, record in zip(runs_ev, records, strict=True):
        t0, t1 = event.ts, event.ts + event.dur
        spans = reader.spans_in(t0, t1)
        if record.iteration is None:
            continue
        gaps_start.append((reader.to_ns(t0) - record.start_ns) / 1e3)
        gaps_end.append((record.end_ns - reader.to_ns(t1)) / 1e3)
        charge_inserted(spans)
        runs.append(RunSpans(record.iteration, record.warmup, spans))
    adopt_inserted_layers(runs, reader.nodes)
    return Profile(runs, reader.nodes, alignment_clock(gaps_start, gaps_end))


@dataclass
class _NodeEvents:
    """The profile's node events in time order, read run by run; each node described once, at its first event."""

    events: list[OrtEvent]
    origin_ns: int
    """The profile's ts 0 on CLOCK_MONOTONIC."""
    fused: dict[str, tuple[str, ...]]
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    k: int = 0
    """The next event to read."""

    def to_ns(self, ts_us: float) -> int:
        return self.origin_ns + round(ts_us * 1000)

    def spans_in(self, t0: float, t1: float) -> list[NodeSpan]:
        """The spans of the node events in [t0, t1] (profile us); events before t0 are skipped."""
        events = self.events
        while self.k < len(events) and events[self.k].ts < t0:
            self.k += 1
        spans: list[NodeSpan] = []
        while self.k < len(events) and events[self.k].ts <= t1:
            e = events[self.k]
            self.k += 1
            raw = e.name.removesuffix(KERNEL_SUFFIX)
            name = raw.removesuffix("/")
            info = self.nodes.get(name)
            if info is None:
                info = self.nodes[name] = self._describe(name, raw, e)
            spans.append(NodeSpan(name, self.to_ns(e.ts), self.to_ns(e.ts + e.dur), info.layers, info.children))
        return spans

    def _describe(self, name: str, raw: str, event: OrtEvent) -> NodeInfo:
        op = event.op_name
        layers, children = layers_of([name])
        layers = tuple(dict.fromkeys(layers + self.fused.get(raw, ())))
        return NodeInfo(
            name,
            op,
            kernel_name(name, op),
            event.provider,
            node_precision(event.input_type),
            layers,
            children,
        )


def alignment_clock(gaps_start_us: list[float], gaps_end_us: list[float]) -> ClockDoc:
    """How each aligned model_run sits inside the run() call timed around it (both should be >= 0)."""
    if not gaps_start_us:
        return ClockDoc.of(method="no profiled run to check")
    worst = max(0.0, -min(gaps_start_us), -min(gaps_end_us))
    return ClockDoc.of(
        method=(
            "ts (us since ORT's profiling start, a wall-clock time) + wall-to-monotonic offset read in-process; "
            "checked against each run() call timed on CLOCK_MONOTONIC around it"
        ),
        start_gap_us_p50=statistics.median(gaps_start_us),
        end_gap_us_p50=statistics.median(gaps_end_us),
        start_gap_us_min=min(gaps_start_us),
        end_gap_us_min=min(gaps_end_us),
        error_bound_us=worst,
        error_bound_method="largest amount by which an aligned model_run leaves its run() call (0: none did)",
        runs_checked=len(gaps_start_us),
    )
