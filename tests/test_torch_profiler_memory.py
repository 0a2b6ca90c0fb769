"""Memory per layer from torch.profiler's allocator events (collectors/torch_profiler/memory.py, issue 59)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hwprof.collectors.torch_profiler.kineto import MemoryEvent, load_kineto
from hwprof.collectors.torch_profiler.memory import memory_by_range, memory_units


def _ev(ts: int, size: int, total: int, device: int = 0) -> MemoryEvent:
    return MemoryEvent(ts=ts, bytes=size, total=total, device_type=device)


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
    got = memory_by_range(events, ranges, lambda ts: ts)
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
    got = memory_by_range([_ev(5, 64, 64)], [("layer", "model.0", 10, 20)], lambda ts: ts)
    assert got[("layer", "model.0")]["mem_peak_bytes"] == 0 == got[("layer", "model.0")]["mem_growth_bytes"]
    assert got[("layer", "model.0")]["mem_alloc_bytes"] == 0
    assert memory_by_range([], [("layer", "model.0", 10, 20)], lambda ts: ts) == {}


def test_a_real_profile_memory_trace_is_read_and_a_layers_allocations_are_its_tensors(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    conv = torch.nn.Conv2d(3, 8, 3, padding=1)
    x = torch.rand(1, 3, 32, 32)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with record_function("hwprof:layer:model.0"):
            y = conv(x)
        del y
    path = tmp_path / "kineto.json"
    prof.export_chrome_trace(str(path))
    trace = load_kineto(path)
    assert trace.memory and all(m.device_type == 0 for m in trace.memory)
    (layer,) = [e for e in trace.events if e.name == "hwprof:layer:model.0"]
    got = memory_by_range(trace.memory, [("layer", "model.0", layer.ts, layer.end)], lambda ts: ts)
    row = got[("layer", "model.0")]
    assert row["mem_alloc_bytes"] >= 8 * 32 * 32 * 4  # at least its output, 1x8x32x32 float32
    assert row["mem_peak_bytes"] >= row["mem_growth_bytes"] >= 8 * 32 * 32 * 4  # the output lives on
    assert set(row) <= set(memory_units())


def test_a_layer_that_frees_more_than_it_allocates_has_a_negative_growth_the_run_directory_accepts(
    tmp_path: Path,
) -> None:
    """A layer that frees its input shrinks the live bytes: its growth is negative, and metrics.json's checks take
    it as the signed figure it is (a traced program's collect failed on 'mem_kept_bytes' -32768)."""
    from hwprof.schema.records import MetricTables

    got = memory_by_range([_ev(5, 100, 100), _ev(12, -100, 0)], [("layer", "model.1", 10, 20)], lambda ts: ts)
    row = got[("layer", "model.1")]
    assert row["mem_growth_bytes"] == -100 and row["mem_peak_bytes"] == 0
    path = tmp_path / "torch_profiler.metrics.json"
    MetricTables(layers={"model.1": row}, units=memory_units()).save(path)
    assert MetricTables.load(path).layers["model.1"]["mem_growth_bytes"] == -100


def test_the_peak_layer_is_the_top_level_layer_holding_the_first_forwards_highest_live_bytes() -> None:
    from hwprof.collectors.torch_profiler.memory import peak_layer

    events = [_ev(12, 400, 500), _ev(22, 300, 800), _ev(25, -400, 400), _ev(62, 900, 1300)]
    ranges = [
        ("stage", "forward", 10, 30),
        ("layer", "model.0", 10, 20),
        ("layer", "model.1", 20, 30),
        ("layer", "model.1.cv1", 21, 23),  # nested: the top-level layer is named
        ("stage", "forward", 60, 70),  # a later forward's higher peak is not the first's
        ("layer", "model.0", 60, 70),
    ]
    assert peak_layer(events, ranges, lambda ts: ts) == "model.1"
    assert peak_layer([], ranges, lambda ts: ts) is None
