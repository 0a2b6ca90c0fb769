"""A pass's model and runtime, in the worker (hwprof.session.worker): model.json from the built model, the
runtime prepared and its output checked against fp32 torch (once per run, every layer's), and at the pass's
end the runtime's profile read, its layer spans replayed into the markers and its files written."""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.rundir.pass_files import MODEL_FILE, write_layer_errors, write_model_json, write_runtime_files
from hwprof.rundir.reader import read_layer_errors

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig
    from hwprof.core.markers import MarkerLog
    from hwprof.workload.layers import LayerInfo
    from hwprof.workload.pipeline import Pipeline


def write_model_info(pipeline: Pipeline, out_dir: Path, depth: int) -> None:
    """model.json of the pass (out_dir), its layer table that of an earlier pass of the run where one built the same
    model at the same input shape, else the one the model's build recorded at this shape (the init's scaling
    forward: hwprof.workload.init_scale.build_for_run), else from a forward with hooks."""
    from hwprof.workload.layers import layer_table

    built = pipeline.built
    shape = list(pipeline.sample_batch().shape)
    layers = _earlier_layers(out_dir, built.name, shape)
    recorded = built.layers
    if layers is None and recorded is not None and (recorded.input_shape, recorded.depth) == (shape, depth):
        layers = recorded.rows
    if layers is None:
        layers = layer_table(built.module, pipeline.sample_batch(), depth)
    write_model_json(out_dir, built, shape, layers)


def _earlier_layers(out_dir: Path, name: str, shape: list[int]) -> list[LayerInfo] | None:
    """The layer table of another pass's model.json (a sibling of out_dir: a pass of the same run, whose config,
    --depth included, is this one's) for this model and input shape. Why: its forward with hooks ran in every
    pass (yolov7 at 640: a second of each pass's build on the 2-vCPU Xeon), and a pass's later forwards do not
    need it to warm up (hwprof.session.warmup checks that they are warm)."""
    from hwprof.workload.layers import LayerInfo

    for path in sorted(out_dir.parent.glob(f"*/{MODEL_FILE}")):
        if path.parent == out_dir:
            continue
        try:
            doc = json.loads(path.read_text())
            if doc.get("name") != name or doc.get("input_shape") != shape:
                continue
            return [LayerInfo.from_dict(row) for row in doc["layers"]]
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def prepare_runtime(pipeline: Pipeline, run_dir: Path, config: RunConfig) -> None:
    """Export/compile for the runtime and check its output against fp32 torch on the first batch."""
    from hwprof.workload.runtime_artifacts import output_difference

    assert pipeline.runtime is not None
    batch = pipeline.sample_batch()
    pipeline.runtime.prepare(batch, pipeline.calibration())
    pipeline.runtime.info.update(output_diff=output_difference(pipeline, pipeline.runtime, batch))
    _layer_errors(pipeline, batch, run_dir, config)


def _layer_errors(pipeline: Pipeline, batch: Any, run_dir: Path, config: RunConfig) -> None:
    """Once per run (the first pass): every layer's output against fp32 torch. Failing here is not fatal."""
    from hwprof.workload.layer_error import layer_errors, layer_errors_doc, torch_layer_outputs
    from hwprof.workload.outputs import mirrored

    runtime = pipeline.runtime
    assert runtime is not None
    if (runtime.name == "torch" and config.precision == "fp32") or read_layer_errors(run_dir) is not None:
        return
    try:
        reference = torch_layer_outputs(pipeline.model, batch)
        other = torch_layer_outputs(pipeline.model, mirrored(batch))
        errors = layer_errors(reference, runtime.layer_outputs(batch), other)
        write_layer_errors(run_dir, layer_errors_doc(runtime.name, config.precision, errors))
    except Exception as exc:
        print(f"per-layer output check failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        runtime.info.update(layer_errors_failed=f"{type(exc).__name__}: {exc}")


def finish_runtime(pipeline: Pipeline | None, log: MarkerLog, depth: int, out_dir: Path) -> None:
    """End the runtime's profiler, replay its layer spans into the marker log (never to collectors)
    and write runtime.json and its node table. A failure here is reported, not raised."""
    from hwprof.workload.node_layers import replay_markers

    runtime = pipeline.runtime if pipeline is not None else None
    if runtime is None or runtime.info.executed_precision is None:  # never prepared
        return
    try:
        profile = runtime.finish()
        if profile is not None:
            for run in profile.runs:
                for marker in replay_markers(run, depth):
                    log(marker)
            runtime.info.update(replayed_layer_markers=sum(1 for m in log.markers if m.replayed))
        write_runtime_files(out_dir, runtime, profile)
    except Exception as exc:
        print(f"runtime {runtime.name}: its profile could not be read: {exc}", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        runtime.info.update(profile_error=f"{type(exc).__name__}: {exc}")
        write_runtime_files(out_dir, runtime, None)
