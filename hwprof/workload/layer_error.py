"""Each layer's output under the run's runtime and precision against the fp32 torch model.

The head alone says little on a random-init model (its scores saturate to constants), and says
nothing of where a precision loses accuracy. So the first pass of a run also compares every
top-level layer's output: torch's from forward hooks, ONNX Runtime's and OpenVINO's from a probe
copy of the model file they run, with each layer's output tensor added as a graph output (found
as the one tensor a layer's nodes pass to another layer's). Written to `model/layer_errors.json`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.schema.codec import JsonObject
from hwprof.schema.runtime_checks import SENSITIVITY_METHOD
from hwprof.workload.node_layers import scope_of

if TYPE_CHECKING:
    import torch


def layer_output_tensors(onnx_path: Path) -> dict[str, str]:
    """layer ("model.7") -> the one tensor its nodes hand to other layers (layers with several are left out)."""
    import onnx

    graph = onnx.load(str(onnx_path), load_external_data=False).graph
    produced: dict[str, str] = {}
    for node in graph.node:
        scope = scope_of(node.name)
        if scope is not None:
            for tensor in node.output:
                produced[tensor] = scope.layer
    escaping: dict[str, set[str]] = {}
    for node in graph.node:
        scope = scope_of(node.name)
        here = scope.layer if scope else None
        for tensor in node.input:
            if tensor in produced and produced[tensor] != here:
                escaping.setdefault(produced[tensor], set()).add(tensor)
    for out in graph.output:
        if out.name in produced:
            escaping.setdefault(produced[out.name], set()).add(out.name)
    return {layer: next(iter(tensors)) for layer, tensors in escaping.items() if len(tensors) == 1}


def probe_model(source: Path, target: Path, tensors: list[str]) -> list[str]:
    """A copy of source with these tensors as extra graph outputs; returns those it really has."""
    import onnx
    from onnx import helper

    model = onnx.load(str(source))
    present = {t for node in model.graph.node for t in node.output}
    existing = {o.name for o in model.graph.output}
    added = [t for t in tensors if t in present and t not in existing]
    model.graph.output.extend(helper.make_empty_tensor_value_info(t) for t in added)
    onnx.save(model, str(target))
    return added


def probe_layer_outputs(
    export: Path, model: Path, work_dir: Path, run: Callable[[Path, list[str]], JsonObject]
) -> dict[str, torch.Tensor]:
    """Every layer's output from a probe copy of `model` (the file the runtime runs), named from the
    fp32 `export`; `run(probe, names)` runs the probe in the runtime and returns the named outputs."""
    import numpy as np
    import torch

    tensors = layer_output_tensors(export)
    probe = work_dir / "probe.onnx"
    names = probe_model(model, probe, list(tensors.values()))
    try:
        values = run(probe, names)
    finally:
        probe.unlink(missing_ok=True)
    return {layer: torch.from_numpy(np.array(values[t])) for layer, t in tensors.items() if t in values}


def torch_layer_outputs(module: torch.nn.Module, batch: torch.Tensor, bf16: bool = False) -> dict[str, torch.Tensor]:
    """Every top-level layer's output (its first tensor) from forward hooks, in fp32 or under bf16 autocast."""
    import contextlib

    import torch

    from hwprof.workload.outputs import head_of

    outputs: dict[str, torch.Tensor] = {}
    handles = []
    for i, layer in enumerate(module.model):  # type: ignore[arg-type]

        def keep(_m: Any, _inputs: Any, output: Any, name: str = f"model.{i}") -> None:
            outputs[name] = head_of(output).detach().float().clone()

        handles.append(layer.register_forward_hook(keep))
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    try:
        with torch.inference_mode(), autocast:
            module(batch)
    finally:
        for handle in handles:
            handle.remove()
    return outputs


def layer_errors(
    reference: dict[str, torch.Tensor], got: dict[str, torch.Tensor], other: dict[str, torch.Tensor] | None = None
) -> dict[str, dict[str, float]]:
    """layer -> max |Δ|, the reference's max |value| and their ratio, for layers of equal shape; with `other`
    (the reference on another input), the layer's input sensitivity: what its error is read against."""
    out = {}
    for name, ref in reference.items():
        value = got.get(name)
        if value is None or tuple(value.shape) != tuple(ref.shape):
            continue
        diff = float((value.float() - ref).abs().max())
        scale = float(ref.abs().max())
        out[name] = {"max_abs": diff, "max_abs_reference": scale, "relative": diff / scale if scale else 0.0}
        moved = (other or {}).get(name)
        if moved is not None and tuple(moved.shape) == tuple(ref.shape):
            out[name]["sensitivity"] = float((moved - ref).abs().max())
    return out


def layer_errors_doc(runtime: str, precision: str, errors: dict[str, dict[str, float]]) -> JsonObject:
    """model/layer_errors.json's content (hwprof.rundir.pass_files.write_layer_errors writes it)."""
    return {
        "runtime": runtime,
        "precision": precision,
        "reference": "the fused torch model in fp32, same first batch",
        "method": "each top-level layer's output (torch: forward hooks; ONNX Runtime / OpenVINO: the layer's "
        "output tensor added as a graph output of a probe copy of the model they run); sensitivity: "
        + SENSITIVITY_METHOD,
        "layers": errors,
    }
