"""OpenVINO (CPU plugin) compiling the run's exported ONNX file, with PERF_COUNT per node.

`get_profiling_info()` gives each executed node's real time, averaged over every inference of
the request (so a profiled pass uses a fresh request per run, see _after_run), and no
timestamps: the node spans are laid end to end, in the runtime model's execution order, from
the start of the infer() call (the plugin runs one node at a time, each on all threads). That
placement is an estimate; the residual (call time minus the nodes' sum) is recorded as its error.
The runtime model's rt_info names the original ONNX nodes fused into each executed node
(`originalLayersNames`), its primitive (`brgconv_avx512_bf16`) and the precision it ran in.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.core.host_facts import current
from hwprof.schema.runtime_checks import ClockDoc
from hwprof.workload.node_layers import NodeSpan, RunSpans, charge_inserted, layers_of
from hwprof.workload.runtime import NodeInfo, Profile, Runtime, adopt_inserted_layers, register

if TYPE_CHECKING:
    import numpy as np
    import torch

HINTS = {"fp32": "f32", "bf16": "bf16"}
_PRECISION = {
    "f32": "fp32",
    "bf16": "bf16",
    "f16": "fp16",
    "i8": "int8",
    "u8": "int8",
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
}
INSERTED_TYPES = ("Reorder", "Convert")
NO_BF16 = "fp32 (this CPU has no BF16 capability)"


def executed_precision(requested: str, hint: str, capabilities: Sequence[str]) -> str:
    """What OpenVINO runs a forward in: the compiled model's precision hint, except bf16 asked of a CPU whose
    OPTIMIZATION_CAPABILITIES hold no BF16, which runs fp32."""
    if requested == "bf16" and "BF16" not in capabilities:
        return NO_BF16
    return hint


def precision_name(value: object) -> str:
    """ "bf16"/"fp32"/"int8" for an OpenVINO element type or its text ("bf16", "f32", "<Type: 'bfloat16'>")."""
    text = value.to_string() if hasattr(value, "to_string") else str(value)
    text = text.strip().lower().removeprefix("<type: '").removesuffix("'>")
    return _PRECISION.get(text, text)


@register
class OpenVinoRuntime(Runtime):
    name = "openvino"
    profiler_name = "OpenVINO PERF_COUNT (get_profiling_info)"

    def _prepare(self, sample: torch.Tensor) -> None:
        ov = self._import("openvino")
        exported = self._export(sample, "OpenVINO CPU plugin", ov.__version__)
        core = ov.Core()
        capabilities = current().openvino_capabilities()
        options: dict[str, int | str] = {
            "INFERENCE_NUM_THREADS": self.config.threads,
            "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_PRECISION_HINT": HINTS[self.config.precision],
            "PERF_COUNT": "YES" if self.profile else "NO",
        }
        self.options = options
        self.compiled = core.compile_model(str(self.run_dir / exported.path), "CPU", options)
        self.request = self.compiled.create_infer_request()
        self.nodes = runtime_nodes(self.compiled.get_runtime_model())
        self.per_run: list[list[tuple[str, float]]] = []
        hint = precision_name(self.compiled.get_property("INFERENCE_PRECISION_HINT"))
        by_precision: dict[str, int] = {}
        for node in self.nodes.values():
            by_precision[node.precision] = by_precision.get(node.precision, 0) + 1
        self.info.update(
            executed_precision=executed_precision(self.config.precision, hint, capabilities),
            precision_detail=(
                f"INFERENCE_PRECISION_HINT={hint}; runtime precision of executed nodes: "
                + ", ".join(f"{p} {n}" for p, n in sorted(by_precision.items(), key=lambda kv: -kv[1]))
                + f"; CPU capabilities: {', '.join(capabilities)}"
            ),
            compile_options={k: str(v) for k, v in options.items()},
        )

    def layer_outputs(self, batch: torch.Tensor) -> dict[str, torch.Tensor]:
        from hwprof.workload.layer_error import probe_layer_outputs

        ov = self._import("openvino")
        options = {k: v for k, v in self.options.items() if k != "PERF_COUNT"}

        def run(probe: Path, names: list[str]) -> dict[str, np.ndarray]:
            compiled = ov.Core().compile_model(str(probe), "CPU", options)
            results = compiled.create_infer_request().infer({0: batch.numpy()})
            return {name: results[compiled.output(name)] for name in names}

        assert self.exported is not None  # _prepare ran
        export = self.run_dir / self.exported.path
        return probe_layer_outputs(export, export, self.out_dir, run)

    def _execute(self, batch: torch.Tensor) -> Any:
        import torch

        self.request.infer({0: batch.numpy()})
        outputs = range(len(self.compiled.outputs))
        return tuple(torch.from_numpy(self.request.get_output_tensor(i).data.copy()) for i in outputs)

    def _after_run(self) -> None:
        if not self.profile:
            return
        self.per_run.append(
            [
                (p.node_name, p.real_time.total_seconds() * 1e6)
                for p in self.request.get_profiling_info()
                if p.node_name in self.nodes and p.real_time.total_seconds() > 0
            ]
        )
        # A request's counters are the running mean over all its inferences (checked: a run slowed 3x
        # moved every later reading), so each run gets a fresh request: its reading is that run's alone.
        # Paired on yolov8n at 320, a fresh request per run cost nothing (p50 14.40 ms either way).
        self.request = self.compiled.create_infer_request()

    def _profile(self) -> Profile | None:
        return profile_from_runs(self.per_run, self.records, self.nodes)


def runtime_nodes(runtime_model: Any) -> dict[str, NodeInfo]:
    """Executed node name -> what it is, from the runtime model's rt_info, in execution order."""
    rows: list[tuple[int, NodeInfo]] = []
    for op in runtime_model.get_ordered_ops():
        rt = op.get_rt_info()
        info = {k: rt[k].astype(str) for k in rt.keys()}  # noqa: SIM118 (an RTMap, not a dict)
        layer_type = info.get("layerType", "")
        if layer_type in ("Input", "Output", "Parameter", "Result", "Const", "Constant"):
            continue
        name = op.get_friendly_name()
        originals = [n for n in info.get("originalLayersNames", "").split(",") if n]
        layers, children = layers_of(originals or [name])
        inserted = layer_type in INSERTED_TYPES and name not in originals
        node = NodeInfo(
            name,
            layer_type,
            info.get("primitiveType", ""),
            "CPU",
            precision_name(info.get("runtimePrecision", "")),
            layers,
            children,
        )
        if inserted:
            node.layers, node.children = (), ()
        rows.append((int(info.get("execOrder", len(rows))), node))
    rows.sort(key=lambda r: r[0])
    return {node.name: node for _, node in rows}


def profile_from_runs(
    per_run: list[list[tuple[str, float]]], records: list[Any], nodes: dict[str, NodeInfo]
) -> Profile:
    """Spans laid end to end from each infer() call's start; the residual is the placement error."""
    if len(per_run) != len(records):
        raise ValueError(f"OpenVINO gave {len(per_run)} profiles for {len(records)} runs")
    order = {name: i for i, name in enumerate(nodes)}
    runs: list[RunSpans] = []
    residuals: list[float] = []
    squeezed: list[float] = []
    for timings, record in zip(per_run, records, strict=True):
        if record.iteration is None:
            continue
        t = record.start_ns
        call_us = (record.end_ns - record.start_ns) / 1e3
        total_us = sum(us for _, us in timings)
        residuals.append(call_us - total_us)
        # A sum over the call's time (seen here: up to 1 ms) is squeezed into the call so that layer
        # spans stay inside their forward stage; how often, and by how much, is recorded.
        squeeze = min(1.0, call_us / total_us) if total_us > 0 else 1.0
        if squeeze < 1.0:
            squeezed.append(squeeze)
        spans: list[NodeSpan] = []
        for name, us in sorted(timings, key=lambda nt: order[nt[0]]):
            info = nodes[name]
            end = t + round(us * squeeze * 1000)
            spans.append(NodeSpan(name, t, end, info.layers, info.children))
            t = end
        charge_inserted(spans)
        runs.append(RunSpans(record.iteration, record.warmup, spans))
    adopt_inserted_layers(runs, nodes)
    return Profile(runs, nodes, _placement_clock(residuals, squeezed))


def _placement_clock(residuals: list[float], squeezed: list[float]) -> ClockDoc:
    """How the spans were placed (runtime.json's clock): the residual of each run and the squeezed runs."""
    if not residuals:
        return ClockDoc.of(method="no profiled run")
    return ClockDoc.of(
        method=(
            "OpenVINO reports node durations, not timestamps: spans laid end to end in execution order "
            "from the infer() call's start on CLOCK_MONOTONIC (an estimate of placement)"
        ),
        residual_us_p50=statistics.median(residuals),
        residual_us_min=min(residuals),
        residual_us_max=max(residuals),
        error_bound_us=max(abs(r) for r in residuals),
        error_bound_method="infer() call time minus the sum of its nodes' real_time: how far a span can sit off",
        runs_checked=len(residuals),
        runs_squeezed=len(squeezed),
        squeeze_min=min(squeezed, default=1.0),
        squeeze_method="where the nodes' times sum past the infer() call, they are scaled to fit it",
    )
