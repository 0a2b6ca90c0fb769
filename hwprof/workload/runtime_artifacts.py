"""What a pass leaves about its runtime: runtime.json, runtime_nodes.json and node spans for the trace."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.core.atomic import atomic_write_text
from hwprof.schema.records import NODES_FILE, RUNTIME_FILE, NodeRow, Span, records_path, write_records

if TYPE_CHECKING:
    import torch

    from hwprof.workload.pipeline import Pipeline
    from hwprof.workload.runtime import Profile, Runtime

RECORDS_NAME = "runtime"
TRACE_ITERATIONS = 20
"""Node spans go to the trace for the first measured iterations only (the kernels pass runs hundreds)."""


def output_difference(pipeline: Pipeline, runtime: Runtime, batch: torch.Tensor) -> dict[str, Any]:
    """The runtime's raw head and detections against the fp32 torch model on the same input."""
    import torch

    from hwprof.workload.outputs import flat_outputs, head_of

    if runtime.name == "torch" and runtime.config.precision == "fp32":
        return {"reference": "this run is the reference (the fused torch model in fp32)", "max_abs_head": 0.0}
    with torch.inference_mode():
        reference_out = pipeline.model(batch)
    output = runtime.run(batch)
    reference = head_of(reference_out).float()
    got = head_of(output).float().to(reference.device)  # a CUDA runtime answers on its device
    if reference.shape != got.shape:
        raise ValueError(f"{runtime.name} returned shape {tuple(got.shape)}, torch {tuple(reference.shape)}")
    diff = (got - reference).abs()
    result: dict[str, Any] = {
        "reference": "the fused torch model in fp32 on the same input (the first batch)",
        "max_abs_head": float(diff.max()),
        "mean_abs_head": float(diff.mean()),
        "max_abs_reference": float(reference.abs().max()),
        "detections": pipeline.count_detections(output),
        "detections_reference": pipeline.count_detections(reference_out),
    }
    # The raw per-level maps before the head's sigmoid and box decoding: a random-init head saturates
    # (constant scores), so these show a precision's error even without trained weights.
    raw_ref, raw_got = flat_outputs(reference_out)[1:], flat_outputs(output)[1:]
    pairs = [(r.float(), g.float().to(r.device)) for r, g in zip(raw_ref, raw_got, strict=False) if r.shape == g.shape]
    if pairs:
        result["max_abs_raw"] = max(float((g - r).abs().max()) for r, g in pairs)
        result["max_abs_raw_reference"] = max(float(r.abs().max()) for r, _ in pairs)
        result["raw_maps"] = len(pairs)
    return result


def write_runtime_artifacts(out_dir: Path, runtime: Runtime, profile: Profile | None) -> None:
    """runtime.json always; node table and trace spans when the runtime was profiled."""
    info = runtime.info
    if profile is not None:
        info["profiler"] = runtime.profiler_name
        info["clock"] = profile.clock
        measured = [run for run in profile.runs if not run.warmup]
        per_node: dict[str, list[float]] = defaultdict(list)
        for run in measured:
            seen: dict[str, float] = defaultdict(float)
            for span in run.nodes:
                seen[span.name] += (span.end_ns - span.start_ns) / 1e3
            for name, us in seen.items():
                per_node[name].append(us)
        rows = [
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
        info["trace_iterations"] = min(len(measured), TRACE_ITERATIONS)
        write_records(records_path(out_dir, RECORDS_NAME), spans)
        info["nodes_executed"] = len(rows)
        info["fused_across_layers"] = sum(1 for r in rows if len(r.layers) > 1)
    atomic_write_text(out_dir / RUNTIME_FILE, json.dumps(info, indent=1, default=str))
