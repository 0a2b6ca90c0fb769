"""FLOPs per layer with torch.utils.flop_counter, and the minimum bytes each layer must move.

One extra forward of the run's input under FlopCounterMode, outside the measured iterations: in prepare for
hwprof's own pipeline, on a meta-device copy of its model (shapes only: no compute), after the program
(after_workload) for a user's program, whose loop is its own, on its model itself.
FLOPs follow torch's convention (a multiply-add is 2 FLOPs). Minimum bytes per layer are its input
and output activations plus its weights, from tensor sizes: the traffic a layer cannot avoid,
so FLOPs / minimum bytes is an upper bound on its arithmetic intensity.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hwprof.collectors.base import Capability, Collector, CollectorResult, PassContext

from hwprof.core.input_shapes import shape_text
from hwprof.schema.check import RunDirError
from hwprof.schema.pass_files import LayerEntry, ModelInfo
from hwprof.schema.records import MetricTables, metrics_path
from hwprof.schema.summaries_cpu import FlopsSummary
from hwprof.workload.script_scopes import UNTRACED_FIX

SCRIPTED = (
    "the model is a TorchScript module: FlopCounterMode charges FLOPs to layers through module hooks, which "
    "never fire inside TorchScript"
)


def _layer_key(module_path: str) -> str | None:
    """ "DetectionModel.model.7.cv1" -> "model.7.cv1"; None for the root and "Global"."""
    parts = module_path.split(".", 1)
    return parts[1] if len(parts) == 2 and parts[1].startswith("model.") else None


class FlopsCollector(Collector):
    name = "flops"
    title = "FLOPs and minimum bytes per layer (torch.utils.flop_counter)"
    pass_name = "layers"
    switchable = True

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        self.tables: MetricTables | None = None
        self.summary = FlopsSummary()

    @classmethod
    def probe(cls, config: Any) -> Capability:
        """torch's flop_counter module is there, looked up without importing torch: collect's own process runs
        no model, and the import cost every collect's plan 1.3 s on a 2-CPU VM (the worker imports it)."""
        import importlib.util

        spec = importlib.util.find_spec("torch")
        folder = Path(spec.origin).parent if spec is not None and spec.origin else None
        if folder is None or not (folder / "utils" / "flop_counter.py").is_file():
            where = "torch is not installed" if folder is None else f"{folder}/utils/flop_counter.py is missing"
            return Capability.unavailable(f"torch.utils.flop_counter: {where}", "pip install torch==2.13.0")
        return Capability.ok()

    def prepare(self, ctx: PassContext) -> None:
        if ctx.layer_scopes is not None:
            return  # a TorchScript model: close() says why there is no count
        assert ctx.pipeline is not None
        if ctx.pipeline.own_forwards_in_loop:
            self._count(ctx)

    def after_workload(self, ctx: PassContext) -> None:
        if ctx.layer_scopes is None and self.tables is None:
            self._count(ctx)
        if self.summary is not None and ctx.layer_scopes is None:
            self._count_other_shapes(ctx)

    def _count_other_shapes(self, ctx: PassContext) -> None:
        """A program's forwards at more than one input shape (detect.py letterboxes each image to its own): the
        forward's FLOPs at each other shape too, and each top-level layer's, counted on zeros of that shape
        (FLOPs depend on shapes alone)."""
        import torch
        from torch.utils.flop_counter import FlopCounterMode

        assert ctx.pipeline is not None and self.summary is not None and self.tables is not None
        sample = ctx.pipeline.sample_batch()
        at = shape_text(sample.shape)
        by_shape = {at: int(self.summary.total_flops or 0)}
        top_level = {k: int(v["flops"]) for k, v in self.tables.layers.items() if k.count(".") == 1 and "flops" in v}
        by_layer: dict[str, dict[str, int]] = {at: top_level}
        for shape in ctx.bus.inputs.calls:
            if shape in by_shape:
                continue
            dims = [int(n) for n in shape.split("x")]
            counter = FlopCounterMode(display=False, depth=3)  # Root.model.N
            with counter, torch.inference_mode():
                ctx.pipeline.model(torch.zeros(dims, dtype=sample.dtype, device=sample.device))
            by_shape[shape] = int(counter.get_total_flops())
            by_layer[shape] = {
                key: int(sum(ops.values()))
                for path, ops in counter.get_flop_counts().items()
                if (key := _layer_key(path)) is not None and key.count(".") == 1
            }
        if len(by_shape) > 1:
            self.summary.update(flops_by_shape=by_shape, layer_flops_by_shape=by_layer)

    def _count(self, ctx: PassContext) -> None:
        """One forward of the sample under FlopCounterMode; the per-layer tables from model.json's rows."""
        pipeline = ctx.pipeline
        assert pipeline is not None
        batch = pipeline.sample_batch()
        counter, on = _counted(pipeline.model, batch, meta=pipeline.own_forwards_in_loop)
        per_module = counter.get_flop_counts()
        model_json = ctx.out_dir / "model.json"
        layers = ModelInfo.from_json(json.loads(model_json.read_text()), str(model_json)).layers
        flops_by_layer = {}
        for module_path, ops in per_module.items():
            key = _layer_key(module_path)
            if key is not None:
                flops_by_layer[key] = int(sum(ops.values()))
        tables = _tables(layers, flops_by_layer)
        total = int(counter.get_total_flops())
        ops_total: dict[str, int] = {}
        for op, count in per_module.get("Global", {}).items():
            ops_total[str(op)] = int(count)
        self.tables = tables
        self.summary = FlopsSummary.of(
            total_flops=total,
            gflops=total / 1e9,
            gflops_per_image=total / 1e9 / batch.shape[0],
            input_shape=list(batch.shape),
            by_op=ops_total,
            layers_sum_flops=sum(v for k, v in flops_by_layer.items() if k.count(".") == 1),
            method="torch.utils.flop_counter.FlopCounterMode over one forward of the run's input"
            + ("" if pipeline.own_forwards_in_loop else " (the program's first marked call's), after the program")
            + on,
        )

    def close(self, ctx: PassContext) -> CollectorResult:
        if ctx.layer_scopes is not None:
            return CollectorResult("unavailable", reason=SCRIPTED, fix=UNTRACED_FIX)
        if self.tables is None:
            return CollectorResult("failed", reason="the FLOP count did not run")
        path = metrics_path(ctx.out_dir, self.name)
        self.tables.save(path)
        return CollectorResult("ok", summary=self.summary, artifacts=[ctx.relpath(path)])


COLLECTOR = FlopsCollector


def _counted(model: Any, batch: Any, meta: bool) -> tuple[Any, str]:
    """A FlopCounterMode that saw one forward of `batch`, on a meta-device copy of `model` where `meta` (hwprof's own
    pipeline: the same counts without the compute; the layers pass's build 1.06 -> 0.58 s at yolov7 640 on the
    2-vCPU EPYC) and that forward runs there, else on the model itself; with the words that say which."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    if meta:
        from hwprof.workload.zoo import meta_copy

        counter = FlopCounterMode(display=False, depth=64)
        try:
            with counter, torch.inference_mode():
                meta_copy(model)(torch.zeros(batch.shape, dtype=batch.dtype, device="meta"))
            return counter, " (shapes only: on a meta-device copy of the model, which computes nothing)"
        except Exception:  # a forward that reads its values (it cannot on meta): counted on the model itself
            pass
    counter = FlopCounterMode(display=False, depth=64)
    with counter, torch.inference_mode():
        model(batch)
    return counter, ""


def _sizes(row: LayerEntry) -> tuple[int, int, int, int]:
    """The row's params, in, out and weight bytes: a layers pass's model.json holds them all."""
    params, in_bytes, out_bytes, weight_bytes = row.params, row.in_bytes, row.out_bytes, row.weight_bytes
    if params is None or in_bytes is None or out_bytes is None or weight_bytes is None:
        raise RunDirError(f"model.json: layer {row.name} has no params or byte sizes")
    return params, in_bytes, out_bytes, weight_bytes


def _tables(layers: list[LayerEntry], flops_by_layer: dict[str, int]) -> MetricTables:
    """Per layer (model.json's rows): FLOPs, parameters, the activations' and weights' bytes, intensity."""
    tables = MetricTables(
        units={
            "flops": "FLOP",
            "params": "count",
            "in_bytes": "B",
            "out_bytes": "B",
            "weight_bytes": "B",
            "min_bytes": "B",
            "intensity": "FLOP/B",
        },
        methods={
            "flops": "torch.utils.flop_counter.FlopCounterMode (multiply-add = 2 FLOPs)",
            "min_bytes": "input + output activations + weights, from tensor sizes",
            "intensity": "flops / min_bytes (upper bound: real traffic is at least min_bytes)",
        },
    )
    for row in layers:
        flops = flops_by_layer.get(row.name, 0)
        params, in_bytes, out_bytes, weight_bytes = _sizes(row)
        min_bytes = in_bytes + out_bytes + weight_bytes
        metrics = {
            "flops": float(flops),
            "params": float(params),
            "in_bytes": float(in_bytes),
            "out_bytes": float(out_bytes),
            "weight_bytes": float(weight_bytes),
            "min_bytes": float(min_bytes),
        }
        if min_bytes:
            metrics["intensity"] = flops / min_bytes
        tables.layers[row.name] = metrics
    return tables
