"""hwprof's own forwards (the timing reference, the FLOP count, the layer table's) never run inside a user's
program's call of its model: the workload says whether they may run inside its loop
(`own_forwards_in_loop`), and for a program they run after it or not at all. Real torch modules and collectors,
no child process."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from hwprof.collectors.base import PassContext
from hwprof.collectors.flops import FlopsCollector
from hwprof.collectors.timing import REFERENCES, TimingCollector

from hwprof.core.config import RunConfig
from hwprof.core.markers import MarkerBus
from hwprof.program.pipeline import OWN_FORWARDS_WHY, ProgramPipeline, built_model
from hwprof.rundir.pass_files import write_model_json
from hwprof.workload.layers import layer_table, record_layers
from hwprof.workload.pipeline import Pipeline


class Counted(torch.nn.Module):
    """A YOLO-like model (its layers in `.model`) that counts its calls."""

    def __init__(self) -> None:
        super().__init__()
        self.model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.model(x)


def _program_pipeline(model: Counted, config: RunConfig, bus: MarkerBus) -> ProgramPipeline:
    found: Any = SimpleNamespace(module=model, layers_module=model)
    sample = torch.zeros(1, 3, 8, 8)
    return ProgramPipeline(config, bus, built_model(found), found, sample, contextlib.nullcontext)


def _measured_iteration(bus: MarkerBus, collector: TimingCollector, ctx: PassContext, i: int) -> None:
    bus.iteration, bus.warmup = i, False
    bus.emit("iteration", "B", "iteration")
    bus.emit("stage", "B", "forward")
    bus.emit("stage", "E", "forward")
    bus.emit("iteration", "E", "iteration")
    collector.after_iteration(ctx, i)


def _timing(pipeline: Any, tmp_path: Path, iterations: int = 3) -> tuple[Any, TimingCollector]:
    config = RunConfig()
    bus = MarkerBus()
    ctx = PassContext(config, tmp_path, "timing", bus, pipeline=pipeline)
    ctx.out_dir.mkdir(parents=True)
    collector = TimingCollector(config)
    bus.subscribe(collector.on_marker, False)
    for i in range(iterations):
        _measured_iteration(bus, collector, ctx, i)
    return collector.close(ctx), collector


def test_the_timing_reference_is_unavailable_for_a_program_and_runs_no_forward(tmp_path: Path) -> None:
    model = Counted()
    pipeline = _program_pipeline(model, RunConfig(), MarkerBus())
    result, collector = _timing(pipeline, tmp_path)
    assert result.status == "ok" and model.calls == 0 and not collector.reference_s
    assert result.summary.forward_reference is None and result.summary.forward_vs_reference is None
    assert result.summary.forward_reference_unavailable == OWN_FORWARDS_WHY
    assert "inside the program's call of its model" in OWN_FORWARDS_WHY


def test_the_timing_reference_runs_after_every_other_measured_iteration_of_hwprofs_own_pipeline(tmp_path: Path) -> None:
    model = Counted()
    assert Pipeline.own_forwards_in_loop  # the built-in pipeline owns its loop
    pipeline = SimpleNamespace(
        own_forwards_in_loop=True, sample_batch=lambda: torch.zeros(1, 3, 8, 8), forward=lambda batch: model(batch)
    )
    result, _ = _timing(pipeline, tmp_path)
    assert model.calls == 2 and result.summary.forward_reference is not None  # after iterations 0 and 2 of 3
    assert result.summary.forward_reference_unavailable is None
    model.calls = 0
    result, _ = _timing(pipeline, tmp_path / "longer", 4 * REFERENCES)
    assert model.calls == REFERENCES and result.summary.forward_reference.n == REFERENCES  # the first ones only


def test_the_flop_count_of_a_program_waits_for_the_end_of_the_program(tmp_path: Path) -> None:
    model = Counted()
    config, bus = RunConfig(), MarkerBus()
    pipeline = _program_pipeline(model, config, bus)
    ctx = PassContext(config, tmp_path, "layers", bus, pipeline=pipeline)  # type: ignore[arg-type]
    ctx.out_dir.mkdir(parents=True)
    rows = layer_table(model, pipeline.sample_batch())
    write_model_json(ctx.out_dir, pipeline.built, (1, 3, 8, 8), rows)
    collector = FlopsCollector(config)
    calls_before = model.calls
    collector.prepare(ctx)  # inside the program's first call: no forward
    assert model.calls == calls_before and collector.tables is None
    collector.after_workload(ctx)  # the program ended
    assert model.calls == calls_before + 1
    result = collector.close(ctx)
    assert result.status == "ok" and result.summary.total_flops and "after the program" in result.summary.method


def test_the_layer_table_is_recorded_from_the_next_forward_by_hooks_that_only_record() -> None:
    model = Counted()
    recorder = record_layers(model)
    assert not recorder.seen and [r.name for r in recorder.rows] == ["model.0", "model.1"]
    model(torch.zeros(1, 3, 8, 8))  # the program's own call
    assert recorder.seen and model.calls == 1
    recorder.remove()
    assert recorder.rows[0].in_shapes == [[1, 3, 8, 8]] and recorder.rows[0].out_shapes == [[1, 4, 6, 6]]
    assert [r.to_dict() for r in recorder.rows] == [r.to_dict() for r in layer_table(model, torch.zeros(1, 3, 8, 8))]
    model(torch.zeros(1, 3, 16, 16))  # hooks removed: the table keeps the recorded call's shapes
    assert recorder.rows[0].in_shapes == [[1, 3, 8, 8]]


def test_a_later_pass_takes_the_layer_table_of_an_earlier_one_without_a_forward(tmp_path: Path) -> None:
    """The first pass's table comes from a forward with hooks; a later pass of the run (the same model at the same
    input shape) reads it from the earlier pass's model.json; another input shape gets a forward of its own."""
    from hwprof.session.worker_model import write_model_info

    model = Counted()
    built = SimpleNamespace(
        module=model, name="counted", family="test", weights=None, init=None, params=1, params_fused=1, stride=1,
        output_format="test", class_names=[], layers=None,
    )  # fmt: skip
    passes = tmp_path / "passes"

    for name in ("timing", "layers", "kernels", "trace"):
        (passes / name).mkdir(parents=True)

    def pipeline(side: int) -> Any:
        return SimpleNamespace(built=built, sample_batch=lambda: torch.zeros(1, 3, side, side))

    write_model_info(pipeline(8), passes / "timing", 1)
    assert model.calls == 1
    write_model_info(pipeline(8), passes / "layers", 1)
    assert model.calls == 1, "the timing pass's table, read back"
    first, later = (json.loads((passes / p / "model.json").read_text())["layers"] for p in ("timing", "layers"))
    assert later == first and first[0]["in_shapes"] == [[1, 3, 8, 8]]
    (passes / "kernels" / "model.json").write_text("{damaged")  # passed over
    write_model_info(pipeline(16), passes / "trace", 1)
    assert model.calls == 2 and json.loads((passes / "trace" / "model.json").read_text())["layers"][0]["in_shapes"] == [
        [1, 3, 16, 16]
    ]


def test_the_first_pass_takes_the_table_its_build_recorded_at_its_shape_and_depth(tmp_path: Path) -> None:
    """The table the init's scaling forward recorded (BuiltModel.layers, hwprof.workload.init_scale.build_for_run)
    is model.json's where it was recorded at the pass's input shape and depth; at another, a forward of its own."""
    from hwprof.session.worker_model import write_model_info
    from hwprof.workload.layers import LayerTable

    model = Counted()
    recorder = record_layers(model, 1)
    with torch.inference_mode():
        model(torch.zeros(1, 3, 8, 8))
    recorder.remove()
    built = SimpleNamespace(
        module=model, name="counted", family="test", weights=None, init=None, params=1, params_fused=1, stride=1,
        output_format="test", class_names=[], layers=LayerTable([1, 3, 8, 8], 1, recorder.rows),
    )  # fmt: skip
    for name, side, depth, calls in (("timing", 8, 1, 1), ("other", 8, 2, 2), ("third", 16, 1, 3)):
        out = tmp_path / f"run{name}" / "passes" / name
        out.mkdir(parents=True)
        write_model_info(SimpleNamespace(built=built, sample_batch=lambda s=side: torch.zeros(1, 3, s, s)), out, depth)
        assert model.calls == calls, name
        rows = json.loads((out / "model.json").read_text())["layers"]
        assert rows[0]["in_shapes"] == [[1, 3, side, side]]
