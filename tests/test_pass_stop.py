"""A paired pass's stopping rule (hwprof.session.pass_stop) on written markers: it stops at a block boundary once its
cost and, in the layers pass, every ranked layer's self time are resolved, and says what was not where it ran its
plan. The real collect that runs it is test_timing_stop's (the same collect's timing and layers passes)."""

from __future__ import annotations

import pytest

from hwprof.analysis.paired_cost import MIN_BLOCKS, PassCostFigure, paired_cost
from hwprof.core.markers import Marker
from hwprof.core.spans import (
    LiveSpans,
    clean_forward_ms_by_iteration,
    forward_ms_by_iteration,
    layer_self_ns,
    measured_spans,
)
from hwprof.session.pass_stop import FUTILE_BLOCKS, FUTILE_IQR, LAYER_TOLERANCE, PassStopping, check, floor

MS = 1_000_000


def _iteration(it: int, t: int, forward_ms: float, layers: dict[str, float], clean: bool) -> tuple[list[Marker], int]:
    """One iteration's markers from t: its forward, and (measured only) its layers one after the other."""
    out = [Marker("iteration", "B", "iteration", t, it, False, clean=clean)]
    out.append(Marker("stage", "B", "forward", t, it, False, clean=clean))
    start = t
    if not clean:
        for index, (name, ms) in enumerate(layers.items()):
            out.append(Marker("layer", "B", name, start, it, False, index))
            start += int(ms * MS)
            out.append(Marker("layer", "E", name, start, it, False, index))
    end = t + int(forward_ms * MS)
    out.append(Marker("stage", "E", "forward", end, it, False, clean=clean))
    out.append(Marker("iteration", "E", "iteration", end, it, False, clean=clean))
    return out, end + MS


def paired_markers(
    blocks: int, on_ms: list[float], off_ms: list[float], layers: list[dict[str, float]]
) -> list[Marker]:
    """ABBA blocks as the pass runs them (measured 2b, clean 2b, clean 2b+1, measured 2b+1); on_ms/off_ms and
    layers per measured/clean iteration, cycled."""
    markers: list[Marker] = []
    t = 0
    for b in range(blocks):
        for it, clean in ((2 * b, False), (2 * b, True), (2 * b + 1, True), (2 * b + 1, False)):
            forward = (off_ms if clean else on_ms)[it % len(off_ms if clean else on_ms)]
            made, t = _iteration(it, t, forward, layers[it % len(layers)], clean)
            markers += made
    return markers


def _cost(markers: list[Marker]) -> PassCostFigure | None:
    return paired_cost(forward_ms_by_iteration(markers), clean_forward_ms_by_iteration(markers))


def _check(markers: list[Marker], *args: object, **kwargs: object) -> PassStopping:
    return check(LiveSpans(markers).update(), *args, **kwargs)  # type: ignore[arg-type]


def test_live_spans_fed_a_block_at_a_time_agree_with_the_markers_read_whole() -> None:
    """The pass's spans paired as its blocks come (what its rule reads after each) equal those of its markers
    read whole at the end, however the markers arrived."""
    markers = paired_markers(6, [82.0, 90.0, 81.8], [80.0, 80.2, 79.9, 85.0], [*STEADY_LAYERS, {"model.0": 3.0}])
    log: list[Marker] = []
    live = LiveSpans(log)
    per_block = len(markers) // 6
    for start in range(0, len(markers), per_block):
        log.extend(markers[start : start + per_block])
        live.update()
    assert live.forward_ms == forward_ms_by_iteration(markers)
    assert live.clean_forward_ms == clean_forward_ms_by_iteration(markers)
    assert live.measured == measured_spans(markers) and live.iterations == 12
    whole = {name: [float(v) for v in values] for name, values in layer_self_ns(measured_spans(markers)).items()}
    assert live.self_ns_by_iteration() == whole
    del log[-per_block:]  # markers dropped (MarkerLog.discard_unflushed): paired anew
    assert live.update().forward_ms == forward_ms_by_iteration(log)


STEADY_LAYERS = [{"model.0": 30.0, "model.1": 50.0, "model.2": 0.3}]


def test_a_steady_pass_stops_at_its_floor_resolved() -> None:
    markers = paired_markers(MIN_BLOCKS, [82.0, 82.4, 81.8, 82.1], [80.0, 80.2, 79.9, 80.1], STEADY_LAYERS)
    done = _check(markers, _cost(markers), 20, layers=True)
    assert done.resolved and done.iterations == 2 * MIN_BLOCKS and not done.unresolved
    assert done.text == "stopped after 8 measured iterations of the 20 planned (4 ABBA blocks): resolved"
    assert done.doc().to_json()["resolved"] is True


def test_a_noisy_cost_is_not_resolved_and_said() -> None:
    markers = paired_markers(MIN_BLOCKS, [82.0, 120.0, 60.0, 100.0], [80.0, 80.0, 80.0, 80.0], STEADY_LAYERS)
    done = _check(markers, _cost(markers), 8, layers=True)
    assert not done.resolved and done.unresolved[0].startswith("the cost (")
    assert done.text.startswith("ran 8 measured iterations, its plan (4 ABBA blocks): the cost (")


def test_a_cost_that_spreads_past_use_ends_the_pass_unresolved_but_not_before_its_blocks() -> None:
    """Scalene's blocks at yolov7 640 (ratios 0.97-1.58): after FUTILE_BLOCKS blocks whose quartiles lie more than
    FUTILE_IQR apart the pass stops, unresolved and said so; with fewer blocks, or a layer's share still loose in
    the layers pass, it goes on."""
    ratios = (0.995, 1.201, 1.071, 1.584, 1.029, 1.524)  # its first six blocks
    wild = [80.0 * r for r in ratios for _ in range(2)]  # both measured iterations of a block at its ratio
    markers = paired_markers(FUTILE_BLOCKS, wild, [80.0], STEADY_LAYERS)
    cost = _cost(markers)
    assert cost is not None and cost.q1 is not None and cost.q3 is not None and cost.q3 - cost.q1 > FUTILE_IQR
    done = _check(markers, cost, 40, layers=False)
    assert not done.resolved and done.futile and done.ends
    assert "more than 0.20 apart" in done.text and done.text.endswith("not resolved"), done.text
    early = paired_markers(FUTILE_BLOCKS - 1, wild, [80.0], STEADY_LAYERS)
    assert not _check(early, _cost(early), 40, layers=False).ends, "too few blocks to say"
    noisy = paired_markers(MIN_BLOCKS, [82.0, 120.0, 60.0, 100.0], [80.0], STEADY_LAYERS)
    assert not _check(noisy, _cost(noisy), 40, layers=False).ends, "4 blocks: the plan goes on"
    spread = (1.0, 1.3, 0.8, 1.25, 0.9, 1.2, 1.05, 0.95, 1.1, 1.15, 0.85, 1.0)  # model.0 at 16-26 ms, no gap
    loose = [{"model.0": 20.0 * k, "model.1": 50.0, "model.2": 0.3} for k in spread]
    layers = paired_markers(FUTILE_BLOCKS, wild, [80.0], loose)
    assert not _check(layers, _cost(layers), 40, layers=True).ends, "40 iterations would resolve model.0's share"


MODEL0_MS = (21.8, 21.5, 30.9, 21.9, 32.2, 20.8, 22.7, 22.4, 37.0, 22.1, 21.7, 35.2)
"""yolov7's model.0 at 640 in the layers pass's first 12 measured iterations (2-vCPU EPYC, 2026-11-29): 21-23 ms,
or 31-37 ms when its 52 MB output took fresh pages (model.1 then ran 17 ms instead of 30)."""


def test_a_layer_whose_time_jumps_between_two_modes_ends_the_pass_when_its_plan_would_not_resolve_it() -> None:
    """Its median's interval was still +-42% after the 20 planned iterations: from FUTILE_BLOCKS blocks, a layer
    whose plan, drawn like its iterations so far, would leave its share wider than its margin ends the pass,
    unresolved and said so; a longer plan (60, whose interval would lie inside the low mode) goes on, and so does a
    pass with fewer blocks or its cost unresolved."""
    layers = [{"model.0": ms, "model.1": 30.0, "model.2": 20.0} for ms in MODEL0_MS]
    steady = ([82.0, 82.4, 81.8, 82.1], [80.0, 80.2, 79.9, 80.1])
    markers = paired_markers(FUTILE_BLOCKS, *steady, layers)
    done = _check(markers, _cost(markers), 20, layers=True)
    assert not done.resolved and done.futile and done.ends and done.iterations == 2 * FUTILE_BLOCKS
    assert done.unresolved == [
        "1 ranked layer's shares (model.0; its self time has quartiles 21.73-31.88 ms: it varies that much "
        "from one forward to the next, which 20 iterations would measure, not narrow to +-10%)"
    ], done.unresolved
    assert not _check(markers, _cost(markers), 60, layers=True).ends, "60 iterations would resolve it"
    early = paired_markers(FUTILE_BLOCKS - 1, *steady, layers)
    assert not _check(early, _cost(early), 20, layers=True).ends, "too few blocks to say"
    noisy = paired_markers(FUTILE_BLOCKS, [82.0, 120.0, 60.0, 100.0, 82.0, 83.0], [80.0], layers)
    cost = _cost(noisy)
    assert cost is not None and not cost.resolved
    assert not _check(noisy, cost, 20, layers=True).ends, "the cost may still resolve"


def test_only_the_layers_the_report_ranks_keep_the_layers_pass_going() -> None:
    """16 steady layers at 5% and a 17th, at 2%, that varies: not among the 15 largest, it does not count."""
    varying = [{**{f"model.{i}": 5.0 for i in range(16)}, "model.16": 2.0 * k} for k in (1.0, 1.6, 0.5, 1.4, 0.7, 1.5)]
    markers = paired_markers(MIN_BLOCKS, [82.0, 82.4, 81.8, 82.1], [80.0, 80.2, 79.9, 80.1], varying)
    assert _check(markers, _cost(markers), 20, layers=True).resolved


def test_a_ranked_layer_that_varies_keeps_the_layers_pass_going_a_thin_one_does_not() -> None:
    varying = [{"model.0": 20.0 * k, "model.1": 50.0, "model.2": 0.3} for k in (1.0, 1.3, 0.8, 1.25, 0.9, 1.2)]
    markers = paired_markers(MIN_BLOCKS, [82.0, 82.4, 81.8, 82.1], [80.0, 80.2, 79.9, 80.1], varying)
    done = _check(markers, _cost(markers), 20, layers=True)
    assert not done.resolved and done.unresolved == ["1 ranked layer's shares (model.0)"]
    assert _check(markers, _cost(markers), 20, layers=False).resolved  # another pass: its layers are not its figures
    thin = [{"model.0": 30.0, "model.1": 50.0, "model.2": 0.3 * k} for k in (1.0, 3.0, 0.2, 2.0)]  # 0.4% of 82 ms
    markers = paired_markers(MIN_BLOCKS, [82.0, 82.4, 81.8, 82.1], [80.0, 80.2, 79.9, 80.1], thin)
    assert _check(markers, _cost(markers), 20, layers=True).resolved


def test_a_small_layer_is_held_to_half_a_point_of_the_forward_not_to_its_own_tolerance() -> None:
    """model.2 at 2% of the forward varies by +-20% of itself (0.4 points of the forward): within the margin."""
    small = [{"model.0": 30.0, "model.1": 50.0, "model.2": 1.64 * k} for k in (1.0, 1.2, 0.8, 1.1)]
    markers = paired_markers(MIN_BLOCKS, [82.0, 82.4, 81.8, 82.1], [80.0, 80.2, 79.9, 80.1], small)
    assert LAYER_TOLERANCE < 0.2 and _check(markers, _cost(markers), 20, layers=True).resolved


@pytest.mark.parametrize(
    ("wished", "planned", "least"),
    [(0, 20, 2 * MIN_BLOCKS), (7, 20, 2 * MIN_BLOCKS), (9, 20, 10), (30, 40, 30), (0, 5, 5), (64, 40, 40)],
)
def test_the_floor_is_whole_blocks_a_collectors_wish_and_never_past_the_plan(
    wished: int, planned: int, least: int
) -> None:
    assert floor(wished, planned) == least


def test_a_counter_rotation_sets_the_floor_to_its_whole_cycles() -> None:
    """perf_events reads each layer in 1 of `every` iterations (and each rotating group in 1 of its cycle): the
    layers pass stops no sooner than every layer read MIN_VISITS times in every group."""
    from hwprof.collectors.perf_events.collector import PerfEvents

    from hwprof.core.config import RunConfig
    from hwprof.perf import layer_reads

    collector = PerfEvents(RunConfig())
    assert collector.fewest_iterations(None) is None  # no plan yet: no floor
    collector.planner.plan = layer_reads.plan("rotate", "cpu", 20, None, 10, None)  # no read cost: 1 of 5
    assert collector.fewest_iterations(None) == 20
    collector.planner.plan = layer_reads.plan("rotate", "cpu", 40, None, 10, None, group_cycle=2)
    assert collector.fewest_iterations(None) == layer_reads.MIN_VISITS * 10 * 2
    collector.planner.plan = layer_reads.plan("every", "cpu", 20, None, 10, None)
    assert collector.fewest_iterations(None) is None


def test_the_kernels_pass_plans_from_the_floor_a_resolving_pass_runs() -> None:
    from hwprof.collectors.perf_sampling.rate import RESOLVING_BASE

    assert floor(0, 20) == RESOLVING_BASE


def test_a_pass_whose_clean_iterations_ended_says_where() -> None:
    """The cost resolved at 4 blocks, the sampler's 40 measured iterations ran alone after them."""
    markers = paired_markers(MIN_BLOCKS, [82.0, 82.4, 81.8, 82.1], [80.0, 80.2, 79.9, 80.1], STEADY_LAYERS)
    done = _check(markers, _cost(markers), 40, layers=False, clean_until=8)
    assert done.text == "ran 8 measured iterations of the 40 planned (4 ABBA blocks): resolved".replace(
        "ran", "stopped after"
    )
    longer = PassStopping(True, 40, 40, clean_until=8)
    assert (
        longer.text
        == "ran 40 measured iterations, its plan (4 ABBA blocks, then measured alone: the cost resolved): resolved"
    )
    assert longer.doc().to_json()["clean_until"] == 8


def test_a_sampler_keeps_the_pass_going_until_each_ranked_layer_has_its_samples() -> None:
    """The kernels pass's perf at 500 Hz on 2 threads: model.2, 1 ms of an 82 ms forward (a ranked layer), expects 1
    sample a measured iteration, so 4 blocks are short of the 65 it needs (MIN_LAYER_SAMPLES x LIVE_SAMPLES_MARGIN)
    and 33 blocks are not; a thinner layer (0.3 ms, under 1%) and another pass's (no sampler) do not count."""
    from hwprof.core.kernels import LIVE_SAMPLES_MARGIN, MIN_LAYER_SAMPLES, SampleRate

    rate = SampleRate(500, 2)
    layers = [{"model.0": 30.0, "model.1": 50.0, "model.2": 1.0, "model.3": 0.3}]
    steady = ([82.0, 82.4, 81.8, 82.1], [80.0, 80.2, 79.9, 80.1])
    markers = paired_markers(MIN_BLOCKS, *steady, layers)
    done = _check(markers, _cost(markers), 80, layers=False, sampling=rate)
    need = MIN_LAYER_SAMPLES * LIVE_SAMPLES_MARGIN
    assert not done.resolved and not done.ends
    assert done.unresolved == [
        f"1 ranked layer's samples (model.2; the fewest 8 of the {need:.0f} needed at 500 Hz x 2 threads)"
    ]
    assert _check(markers, _cost(markers), 80, layers=False).resolved, "no sampler: its samples do not count"
    enough = paired_markers(33, *steady, layers)
    assert rate.expected(66 * 1e6) >= need and _check(enough, _cost(enough), 80, layers=False, sampling=rate).resolved
    faster = SampleRate(5000, 2)  # 10 samples a measured iteration in model.2: 4 blocks are enough
    assert _check(markers, _cost(markers), 80, layers=False, sampling=faster).resolved


def test_a_sampler_without_a_layer_measured_runs_its_plan() -> None:
    """No layer span (a model whose layers were not found): the samples cannot be counted, the plan is the rule."""
    from hwprof.core.kernels import SampleRate

    markers = paired_markers(MIN_BLOCKS, [82.0, 82.4, 81.8, 82.1], [80.0, 80.2, 79.9, 80.1], [{}])
    done = _check(markers, _cost(markers), 80, layers=False, sampling=SampleRate(500, 2))
    assert not done.resolved and done.unresolved == ["the layers' samples (no layer measured)"]
