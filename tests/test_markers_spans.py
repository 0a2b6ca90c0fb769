from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from hwprof.core.markers import Marker, MarkerBus, MarkerLog, read_markers
from hwprof.core.spans import forward_ms_by_iteration, latency_stats, layer_self_ns, pair_spans, stage_stats


def fake_clock(step: int = 10):
    counter = itertools.count(0, step)
    return lambda: next(counter)


def test_bus_calls_subscribers_symmetrically() -> None:
    calls: list[str] = []
    bus = MarkerBus(clock=fake_clock())
    bus.subscribe(lambda m: calls.append(f"a{m.phase}"))
    bus.subscribe(lambda m: calls.append(f"b{m.phase}"))
    with bus.span("stage", "forward"):
        pass
    assert calls == ["aB", "bB", "bE", "aE"]


def test_span_closes_on_exception() -> None:
    log = MarkerLog()
    bus = MarkerBus(clock=fake_clock())
    bus.subscribe(log)
    with pytest.raises(RuntimeError), bus.span("stage", "load"):
        raise RuntimeError("boom")
    assert [m.phase for m in log.markers] == ["B", "E"]


def test_log_round_trip_survives_a_torn_line(tmp_path) -> None:
    log = MarkerLog()
    bus = MarkerBus(clock=fake_clock())
    bus.subscribe(log)
    bus.iteration = 3
    with bus.span("layer", "model.7", 7):
        pass
    path = tmp_path / "markers.jsonl"
    log.flush_to(path)
    log.flush_to(path)  # nothing new: no duplicates
    with open(path, "a") as f:
        f.write('["stage", "B", "forw')
    markers = read_markers(path)
    assert markers == log.markers
    assert markers[0] == Marker("layer", "B", "model.7", 0, 3, False, 7)


def _markers(events: list[tuple[str, str, str, int]], iteration: int = 0) -> list[Marker]:
    return [Marker(kind, phase, name, t, iteration, False) for kind, phase, name, t in events]  # type: ignore[arg-type]


def test_self_time_subtracts_children() -> None:
    markers = _markers(
        [
            ("stage", "B", "forward", 0),
            ("layer", "B", "model.0", 10),
            ("layer", "B", "model.0.cv1", 12),
            ("layer", "E", "model.0.cv1", 20),
            ("layer", "E", "model.0", 30),
            ("layer", "B", "model.1", 35),
            ("layer", "E", "model.1", 45),
            ("stage", "E", "forward", 50),
        ]
    )
    self_ns = layer_self_ns(pair_spans(markers))
    assert self_ns == {"model.0": [12], "model.0.cv1": [8], "model.1": [10]}


def test_stage_stats_ignore_warmup_and_unclosed() -> None:
    markers = [
        Marker("stage", "B", "forward", 0, -1, True),
        Marker("stage", "E", "forward", 5_000_000, -1, True),
    ]
    for i, dur in enumerate([10, 20, 30]):
        t = 100_000_000 * (i + 1)
        markers += [
            Marker("stage", "B", "forward", t, i, False),
            Marker("stage", "E", "forward", t + dur * 1_000_000, i, False),
        ]
    markers.append(Marker("stage", "B", "forward", 10**9, 3, False))
    stats = stage_stats(markers)["forward"]
    assert stats.n == 3
    assert stats.p50_ms == pytest.approx(20.0)
    assert stats.min_ms == pytest.approx(10.0) and stats.max_ms == pytest.approx(30.0)
    by_iteration = forward_ms_by_iteration(markers)  # the same measured spans, keyed by iteration
    assert by_iteration == pytest.approx({0: 10.0, 1: 20.0, 2: 30.0}) and list(by_iteration) == [0, 1, 2]


def test_latency_stats_needs_samples() -> None:
    with pytest.raises(ValueError):
        latency_stats([])
    one = latency_stats([4.0])
    assert one.stdev_ms == 0.0 and one.p99_ms == 4.0


def test_layer_markers_wrap_forward_and_undo_it_exactly() -> None:
    """Layer markers wrap each layer's forward (not torch hooks, whose slow call path costs more): the
    markers bracket the layer's work, a child's (depth 2) nest inside its parent's, a forward that a fuse
    step set on the instance is wrapped too, and removal leaves every module as it was."""
    import torch

    from hwprof.core.markers import attach_layer_markers

    calls: list[str] = []

    class Layer(torch.nn.Module):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name
            self.inner = torch.nn.Identity()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            calls.append(self.name)
            return self.inner(x) + 1

        def forward_fuse(self, x: torch.Tensor) -> torch.Tensor:
            calls.append(f"{self.name} fused")
            return x + 2

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = torch.nn.Sequential(Layer("a"), Layer("b"))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.model(x)

    net = Net()
    fused = net.model[1]
    fused.forward = fused.forward_fuse  # as ultralytics' fuse() does
    bus, log = MarkerBus(clock=fake_clock()), MarkerLog()
    bus.subscribe(log)
    bus.subscribe(lambda m: calls.append(f"{m.phase} {m.name}"))
    remove = attach_layer_markers(net, bus, depth=2)
    assert float(net(torch.zeros(1))) == 3.0
    assert calls == [
        *("B model.0", "a", "B model.0.inner", "E model.0.inner", "E model.0"),
        *("B model.1", "b fused", "E model.1"),
    ]
    assert [m.index for m in log.markers] == [0, 0, 0, 0, 1, 1]
    remove()
    assert "forward" not in net.model[0].__dict__ and "forward" not in net.model[0].inner.__dict__
    assert fused.__dict__["forward"] == fused.forward_fuse
    calls.clear()
    assert float(net(torch.zeros(1))) == 3.0 and calls == ["a", "b fused"]


def test_a_subscriber_can_leave_out_the_layer_markers() -> None:
    calls: list[str] = []
    bus = MarkerBus(clock=fake_clock())
    stages_only = lambda m: calls.append(f"s{m.kind[0]}{m.phase}")  # noqa: E731
    bus.subscribe(lambda m: calls.append(f"a{m.kind[0]}{m.phase}"))
    bus.subscribe(stages_only, layers=False)
    with bus.span("stage", "forward"), bus.span("layer", "model.0", 0):
        pass
    assert calls == ["asB", "ssB", "alB", "alE", "ssE", "asE"]
    bus.unsubscribe(stages_only)
    calls.clear()
    with bus.span("stage", "forward"):
        pass
    assert calls == ["asB", "asE"]


def test_the_span_log_is_innermost_and_a_stage_begins_after_the_collectors_work() -> None:
    """keep_spans: the log is called last at a begin and first at an end; a stage's begin reaches it with a time
    taken after the subscribers ran (their reads at the boundary are not in the span), a layer's begin with its
    emission's time."""
    calls: list[str] = []
    log = MarkerLog()
    bus = MarkerBus(clock=fake_clock())
    bus.keep_spans(lambda m: (calls.append(f"log{m.phase}"), log(m)))
    seen: list[Marker] = []
    bus.subscribe(lambda m: (calls.append(f"c{m.phase}"), seen.append(m)))
    with bus.span("stage", "forward"), bus.span("layer", "model.0", 0):
        pass
    assert calls == ["cB", "logB", "cB", "logB", "logE", "cE", "logE", "cE"]
    stage_begin, layer_begin = log.markers[0], log.markers[1]
    assert stage_begin.t_ns > seen[0].t_ns and stage_begin.name == "forward"  # stamped again after "c"
    assert layer_begin.t_ns == seen[1].t_ns  # a layer's begin: one time for everyone
    assert [m.t_ns for m in log.markers[2:]] == [m.t_ns for m in seen[2:]]
    quiet = MarkerBus(clock=fake_clock())
    alone = MarkerLog()
    quiet.keep_spans(alone)
    with quiet.span("stage", "forward"):
        pass
    assert [m.t_ns for m in alone.markers] == [0, 10]  # no subscriber: no second time taken


def test_spans_emitted_together_leave_no_piece_without_their_stage() -> None:
    """A whole-process run's iteration and its one stage begin and end at one instant each: emitted one after
    the other, the clock moved between them and left a piece with no stage (a sample there was attributed to
    "(between stages)": a flaky failure of test_programs' no-model test)."""
    from hwprof.core.spans import measured_pieces

    calls: list[str] = []
    log = MarkerLog()
    bus = MarkerBus(clock=fake_clock())
    bus.subscribe(lambda m: calls.append(f"{m.kind}{m.phase}"))
    bus.keep_spans(log)
    bus.iteration, bus.warmup = 0, False
    nested = [("iteration", "iteration"), ("stage", "program")]
    bus.emit_together("B", nested)  # type: ignore[arg-type]
    bus.emit_together("E", nested)  # type: ignore[arg-type]
    assert calls == ["iterationB", "stageB", "stageE", "iterationE"]
    assert [(m.kind, m.phase) for m in log.markers] == [
        ("iteration", "B"), ("stage", "B"), ("stage", "E"), ("iteration", "E"),
    ]  # fmt: skip
    assert log.markers[0].t_ns == log.markers[1].t_ns and log.markers[2].t_ns == log.markers[3].t_ns
    pieces = measured_pieces(log.markers)
    assert [(p.stage, p.end_ns > p.start_ns) for p in pieces] == [("program", True)]
    apart = MarkerLog()
    bus = MarkerBus(clock=fake_clock())
    bus.keep_spans(apart)
    bus.iteration, bus.warmup = 0, False
    bus.emit("iteration", "B", "iteration")
    bus.emit("stage", "B", "program")
    bus.emit("stage", "E", "program")
    bus.emit("iteration", "E", "iteration")
    assert None in [p.stage for p in measured_pieces(apart.markers)]  # what emit_together avoids


def test_a_marker_file_is_parsed_once_until_its_bytes_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A collect's finish reads each pass's markers several times: parsed once; an edit in place that keeps the
    size (and, within the clock's tick, the time) is parsed again, its digest changed."""
    import json

    from hwprof.core import markers as markers_module
    from hwprof.core.markers import Marker, read_marker_file

    rows = [Marker("iteration", "B", "iteration", 10, 0, False), Marker("iteration", "E", "iteration", 20, 0, False)]
    path = tmp_path / "markers.jsonl"
    path.write_text("".join(json.dumps(m.to_row()) + "\n" for m in rows))
    parsed: list[object] = []
    real = markers_module._parse_marker_file

    def counted(p: object) -> tuple[list[Marker], str | None]:
        parsed.append(p)
        return real(p)

    monkeypatch.setattr(markers_module, "_parse_marker_file", counted)
    first, _ = read_marker_file(path)
    again, _ = read_marker_file(path)
    assert first == again == rows and len(parsed) == 1
    again.clear()  # a caller's list is its own
    assert read_marker_file(path)[0] == rows
    path.write_text(path.read_text().replace('"E", "iteration", 20', '"E", "iteration", 30'))  # same size
    assert read_marker_file(path)[0][1].t_ns == 30 and len(parsed) == 2
