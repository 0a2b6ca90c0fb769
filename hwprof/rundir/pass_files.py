"""What a pass's worker writes into its pass folder besides the markers and the collectors' own files:
model.json (the built model and its layer table), the runtime's files (runtime.json always; its node table
and node spans for the trace when it was profiled) and result.json (the pass's status and each collector's
result). The worker (hwprof.session.worker) decides what happened; this module owns the files' names and
shapes, so the run directory's writers are in one place, next to its reader.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.core.atomic import atomic_write_text
from hwprof.core.program_spec import PROGRAM_FAMILY
from hwprof.rundir.names import LAYER_ERRORS_FILE, MODEL_DIR
from hwprof.schema.codec import JsonObject
from hwprof.schema.records import NODES_FILE, RUNTIME_FILE, NodeRow, Span, records_path, write_records

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hwprof.schema.pass_files import PassResult
    from hwprof.workload.layers import LayerInfo
    from hwprof.workload.runtime import Profile, RunSpans, Runtime
    from hwprof.workload.zoo import BuiltModel

MODEL_FILE = "model.json"
RESULT_FILE = "result.json"
RUNTIME_RECORDS = "runtime"
"""The node spans' records file (runtime.jsonl)."""
TRACE_ITERATIONS = 20
"""Node spans go to the trace for the first measured iterations only (the kernels pass runs hundreds)."""


def _weights_entry(built: BuiltModel) -> Any:
    """What model.json says of the weights: what was loaded, the program's own, or the seeded init."""
    if built.weights is not None:
        return built.weights.to_dict()
    return "the program's own" if built.family == PROGRAM_FAMILY else "random init"


def write_model_json(out_dir: Path, built: BuiltModel, input_shape: Sequence[int], layers: Sequence[LayerInfo]) -> None:
    """The built model as the report and the trace read it: its name, weights, sizes and layer table."""
    info = {
        "name": built.name,
        "family": built.family,
        "weights": _weights_entry(built),
        "random_init": built.weights is None and built.family != PROGRAM_FAMILY,
        **({"init": built.init.to_json()} if built.init is not None else {}),
        "params": built.params,
        "params_fused": built.params_fused,
        "stride": built.stride,
        "output_format": built.output_format,
        "classes": len(built.class_names),
        "input_shape": list(input_shape),
        "layers": [row.to_dict() for row in layers],
    }
    atomic_write_text(out_dir / MODEL_FILE, json.dumps(info, indent=1))


def write_runtime_files(out_dir: Path, runtime: Runtime, profile: Profile | None) -> None:
    """runtime.json always; node table and trace spans when the runtime was profiled (the figures they add
    to runtime.info are written into runtime.json too)."""
    info = runtime.info
    if profile is not None:
        info.update(profiler=runtime.profiler_name, clock=profile.clock)
        measured = [run for run in profile.runs if not run.warmup]
        rows = _node_rows(profile, measured)
        doc = {"runtime": runtime.name, "iterations": len(measured), "nodes": [asdict(r) for r in rows]}
        atomic_write_text(out_dir / NODES_FILE, json.dumps(doc, indent=1))
        spans = [
            Span(
                span.name,
                span.start_ns,
                span.end_ns - span.start_ns,
                track=f"{runtime.name} nodes",
                category=profile.nodes[span.name].kernel,
                args={"op": profile.nodes[span.name].op, "layers": ",".join(span.layers), "iteration": run.iteration},
            )
            for run in measured[:TRACE_ITERATIONS]
            for span in run.nodes
        ]
        info.update(trace_iterations=min(len(measured), TRACE_ITERATIONS))
        write_records(records_path(out_dir, RUNTIME_RECORDS), spans)
        info.update(nodes_executed=len(rows), fused_across_layers=sum(1 for r in rows if len(r.layers) > 1))
    atomic_write_text(out_dir / RUNTIME_FILE, json.dumps(info.to_json(), indent=1, default=str))


def _node_rows(profile: Profile, measured: list[RunSpans]) -> list[NodeRow]:
    """Each node that ran in a measured iteration, with its median time per iteration."""
    per_node: dict[str, list[float]] = defaultdict(list)
    for run in measured:
        seen: dict[str, float] = defaultdict(float)
        for span in run.nodes:
            seen[span.name] += (span.end_ns - span.start_ns) / 1e3
        for name, us in seen.items():
            per_node[name].append(us)
    return [
        NodeRow(
            name,
            node.op,
            node.kernel,
            node.provider,
            node.precision,
            list(node.layers),
            list(node.children),
            node.inserted,
            statistics.median(per_node[name]),
            len(per_node[name]),
        )
        for name, node in profile.nodes.items()
        if per_node.get(name)
    ]


def write_pass_result(out_dir: Path, result: PassResult) -> None:
    """result.json: the pass's status, error, runtime info, paired figures and each collector's result. A value
    that is not JSON is written as its text (default=str), as run.json's are."""
    atomic_write_text(out_dir / RESULT_FILE, json.dumps(result.to_json(), indent=1, default=str))


def write_layer_errors(run_dir: Path, doc: JsonObject) -> Path:
    """model/layer_errors.json (hwprof.workload.layer_error.layer_errors_doc), written once per run by the
    first pass; RunData.layer_errors reads it."""
    path = run_dir / MODEL_DIR / LAYER_ERRORS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(doc, indent=1))
    return path
