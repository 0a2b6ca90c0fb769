"""Memory per layer from torch's allocator events (collectors/torch_profiler/memory_collector.py, issue 59): the
figures per range on made-up events, the collector on a real model in this process, and a real collect against
torch.profiler's own figures on the same model, run separately (scripts/memory_check.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hwprof.collectors.torch_profiler.memory import MemoryEvent, memory_by_range, memory_units, peak_layer, with_live
from run_store import option, stored_run

from hwprof.core.markers import Marker, MarkerLog
from hwprof.schema.records import CounterSample, MetricTables, read_records


def _ev(ts: int, size: int, total: int, device: int = 0) -> MemoryEvent:
    return MemoryEvent(ts=ts, bytes=size, device_type=device, total=total)


def test_each_range_takes_the_events_inside_it_and_nested_ranges_add_up_to_their_parent() -> None:
    events = [
        _ev(5, 100, 100),  # before the layers: live at their start
        _ev(12, 400, 500),  # model.1.a
        _ev(14, -100, 400),  # model.1.a frees the input
        _ev(22, 300, 700),  # model.1.b
        _ev(25, -400, 300),  # model.1.b
        _ev(28, 50, 350, device=1),  # a CUDA allocation: its own figures
    ]
    ranges = [
        ("iteration", "0", 0, 40),
        ("layer", "model.1", 10, 30),
        ("layer", "model.1.a", 10, 20),
        ("layer", "model.1.b", 20, 30),
    ]
    got = memory_by_range(
        events,
        ranges,
    )
    a, b, parent = got[("layer", "model.1.a")], got[("layer", "model.1.b")], got[("layer", "model.1")]
    assert {k: v for k, v in a.items() if k.startswith("mem_")} == {
        "mem_alloc_bytes": 400,
        "mem_freed_bytes": 100,
        "mem_allocs": 1,
        "mem_peak_bytes": 400,  # 500 live at its highest, 100 at its start
        "mem_growth_bytes": 300,  # 400 live at its end
    }
    assert b["mem_peak_bytes"] == 300 and b["mem_growth_bytes"] == -100 and b["mem_freed_bytes"] == 400
    for figure in ("mem_alloc_bytes", "mem_freed_bytes", "mem_allocs", "mem_growth_bytes"):
        assert parent[figure] == a[figure] + b[figure]  # nested layers add up to their parent
    assert parent["mem_peak_bytes"] == 600  # 700 at b's highest, above the 100 live at the parent's start
    assert parent["cuda_mem_alloc_bytes"] == 50 == b["cuda_mem_alloc_bytes"] and a["cuda_mem_alloc_bytes"] == 0
    assert ("iteration", "0") not in got


def test_a_range_with_no_event_needs_and_keeps_nothing() -> None:
    got = memory_by_range(
        [_ev(5, 64, 64)],
        [("layer", "model.0", 10, 20)],
    )
    assert got[("layer", "model.0")]["mem_peak_bytes"] == 0 == got[("layer", "model.0")]["mem_growth_bytes"]
    assert got[("layer", "model.0")]["mem_alloc_bytes"] == 0
    assert (
        memory_by_range(
            [],
            [("layer", "model.0", 10, 20)],
        )
        == {}
    )


def test_a_layer_that_frees_more_than_it_allocates_has_a_negative_growth_the_run_directory_accepts(
    tmp_path: Path,
) -> None:
    """A layer that frees its input shrinks the live bytes: its growth is negative, and metrics.json's checks take
    it as the signed figure it is (a traced program's collect failed on 'mem_kept_bytes' -32768)."""
    got = memory_by_range(
        [_ev(5, 100, 100), _ev(12, -100, 0)],
        [("layer", "model.1", 10, 20)],
    )
    row = got[("layer", "model.1")]
    assert row["mem_growth_bytes"] == -100 and row["mem_peak_bytes"] == 0
    path = tmp_path / "torch_profiler.metrics.json"
    MetricTables(layers={"model.1": row}, units=memory_units()).save(path)
    assert MetricTables.load(path).layers["model.1"]["mem_growth_bytes"] == -100


def test_the_peak_layer_is_the_top_level_layer_holding_the_first_forwards_highest_live_bytes() -> None:
    events = [_ev(12, 400, 500), _ev(22, 300, 800), _ev(25, -400, 400), _ev(62, 900, 1300)]
    ranges = [
        ("stage", "forward", 10, 30),
        ("layer", "model.0", 10, 20),
        ("layer", "model.1", 20, 30),
        ("layer", "model.1.cv1", 21, 23),  # nested: the top-level layer is named
        ("stage", "forward", 60, 70),  # a later forward's higher peak is not the first's
        ("layer", "model.0", 60, 70),
    ]
    assert (
        peak_layer(
            events,
            ranges,
        )
        == "model.1"
    )
    assert (
        peak_layer(
            [],
            ranges,
        )
        is None
    )


def test_the_live_bytes_are_each_devices_running_sum_in_time_order() -> None:
    events = with_live([_ev(30, -100, 0), _ev(10, 400, 0), _ev(20, 64, 0, device=1), _ev(25, 100, 0)])
    assert [(e.ts, e.total) for e in events] == [(10, 400), (20, 64), (25, 500), (30, 400)]


def _block(tensors: int, log: MarkerLog, iteration: int, clean: bool = False) -> None:
    """One iteration allocating `tensors` 1 MiB tensors in layer model.0 (all freed at its end)."""
    torch = pytest.importorskip("torch")

    def mark(kind: Any, phase: Any, name: str) -> None:
        log(Marker(kind, phase, name, time.monotonic_ns(), iteration, False, 0 if kind == "layer" else -1, clean=clean))

    mark("iteration", "B", "iteration")
    mark("stage", "B", "forward")
    mark("layer", "B", "model.0")
    kept = [torch.empty(1 << 18) for _ in range(tensors)]
    mark("layer", "E", "model.0")
    mark("stage", "E", "forward")
    del kept
    mark("iteration", "E", "iteration")


def test_the_collector_records_the_measured_iterations_allocations_and_none_of_the_clean_ones(tmp_path: Path) -> None:
    """Real torch in this process: a session per stretch of measured iterations (pause ends it), each layer's bytes
    per measured iteration on the run's clock, the live-bytes track, the peak layer."""
    pytest.importorskip("torch")
    from hwprof.collectors.base import PassContext
    from hwprof.collectors.torch_profiler.memory_collector import TorchMemoryCollector

    from hwprof.core.config import RunConfig
    from hwprof.core.markers import MarkerBus

    config = RunConfig()
    ctx = PassContext(config, tmp_path, "layers", MarkerBus())
    ctx.out_dir.mkdir(parents=True)
    log = MarkerLog()
    collector = TorchMemoryCollector(config)
    collector.start(ctx)
    _block(2, log, 0)
    collector.pause(ctx)
    _block(5, log, 1, clean=True)  # collectors off: none of its allocations may be recorded
    collector.resume(ctx)
    _block(2, log, 2)
    collector.stop(ctx)
    log.flush_to(ctx.out_dir / "markers.jsonl")
    result = collector.close(ctx)
    assert result.status == "ok", result.reason
    summary = result.summary
    assert summary.sessions == 2 and summary.iterations == 2 and summary.events == 8  # 2 x (2 allocations, 2 frees)
    tables = MetricTables.load(ctx.out_dir / "torch_memory.metrics.json")
    layer = tables.layers["model.0"]
    assert layer["mem_alloc_bytes"] == layer["mem_peak_bytes"] == layer["mem_growth_bytes"] == 2 * (1 << 20)
    assert layer["mem_allocs"] == 2 and layer["mem_freed_bytes"] == 0
    assert tables.stages["forward"]["mem_alloc_bytes"] == 2 * (1 << 20)
    assert summary.memory_peak_layer == "model.0"
    track = [r for r in read_records(ctx.out_dir / "torch_memory.records.jsonl") if isinstance(r, CounterSample)]
    assert [s.value for s in track] == [1 << 20, 2 << 20, 1 << 20, 0, 1 << 20, 2 << 20, 1 << 20, 0]


@pytest.mark.slow
def test_a_real_collect_agrees_with_torch_profilers_own_figures_run_separately(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The layers pass's forward (the suite's stored layers run) against torch.profiler with its ops recorded, in
    another process: the same bytes allocated and the same peak (scripts/memory_check.py); the top-level layers
    add up to the forward."""
    done = stored_run(tmp_path_factory, "layers", tmp_path / "run")
    out = done.path
    assert done.returncode == 0, done.stderr[-2000:]
    script = Path(__file__).parents[1] / "scripts" / "memory_check.py"
    check = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "hwprof / torch.profiler: allocated 1.000, peak 1.000" in check.stdout, check.stdout
    tables = MetricTables.load(out / "passes" / "layers" / "torch_memory.metrics.json")
    model = json.loads((out / "passes" / "layers" / "model.json").read_text())
    top = [row["name"] for row in model["layers"] if row["name"].count(".") == 1]
    forward = tables.stages["forward"]["mem_alloc_bytes"]
    assert 0.9 * forward <= sum(tables.layers[name]["mem_alloc_bytes"] for name in top) <= forward * 1.000001
    half = int(option("layers", "--imgsz")) // 2
    assert tables.layers["model.0"]["mem_alloc_bytes"] >= 16 * half * half * 4  # layer 0's output at least


def test_the_drawn_forwards_samples_are_read_alone_and_a_damaged_one_among_them_is_said(tmp_path: Path) -> None:
    """memory.png draws the allocator's live bytes through one forward: the samples inside it and the last one
    before it are parsed, the pass's others (a hundred times more at yolov7 640) are not even decoded, whatever
    their order in the file; a damaged line among those drawn is RunDirError naming it, one outside is not read."""
    from hwprof.analysis.memory_timeline import LIVE_TRACK, _samples
    from hwprof.schema.check import RunDirError

    def line(ts: int, value: float) -> str:
        return json.dumps({"track": LIVE_TRACK, "ts_ns": ts, "value": value, "unit": "B", "kind": "counter"})

    rows = [line(ts, float(ts)) for ts in (50, 10, 300, 120, 90, 200, 110, 400)]
    rows.insert(2, json.dumps({"track": "RSS (bytes)", "ts_ns": 150, "value": 1.0, "unit": "B", "kind": "counter"}))
    path = tmp_path / "torch_memory.records.jsonl"
    path.write_text("\n".join([*rows, '{"track": "' + LIVE_TRACK + '", "ts_ns": 500, not json']) + "\n")
    got = sorted(s.ts_ns for s in _samples(path, LIVE_TRACK, (100, 200)))
    assert got == [90, 110, 120, 200]  # 90: the last before the window, wherever it lies in the file
    assert len(_samples(path, LIVE_TRACK, (100, 200))) == 4
    with pytest.raises(RunDirError, match=r"torch_memory.records.jsonl:10: not a JSON line"):
        _samples(path, LIVE_TRACK, (450, 600))
    with pytest.raises(RunDirError, match=r":10: not a JSON line"):
        _samples(path, LIVE_TRACK)  # unwindowed: every line of the track parsed, as before
