"""The ABBA on/off harness behind the overhead benchmarks, and the sampler's pause/resume it relies on."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from hwprof.analysis.paired_cost import MIN_BLOCKS, PassCostFigure, paired_cost
from hwprof.core.config import RunConfig
from hwprof.perf.sampler import IntervalSampler
from hwprof.session.paired import Extension, extend, is_on, schedule, summarize


def test_abba_order_and_block_ratios() -> None:
    assert [is_on(i) for i in range(8)] == [False, True, True, False] * 2
    # block 0: on 11+13, off 10+10 -> 1.2; block 1: on 10+10, off 10+10 -> 1.0; a torn block 2 is left out
    forward = {0: 10.0, 1: 11.0, 2: 13.0, 3: 10.0, 4: 10.0, 5: 10.0, 6: 10.0, 7: 10.0, 8: 50.0}
    out = summarize(forward, ["perf_events"], {"perf_events": "ok"})
    assert out.ratio_blocks == pytest.approx([1.2, 1.0])
    assert out.ratio_median_block == pytest.approx(1.1)
    assert out.forward_p50_on_ms == pytest.approx(10.5) and out.forward_p50_off_ms == 10.0
    assert list(out.to_dict()) == [
        "collectors",
        "statuses",
        "forward_p50_on_ms",
        "forward_p50_off_ms",
        "ratio_p50",
        "ratio_blocks",
        "ratio_median_block",
    ]


def test_sampler_pause_stops_samples_and_resume_continues() -> None:
    sampler: IntervalSampler[int] = IntervalSampler(2.0)
    sampler.begin(lambda: 1)
    time.sleep(0.1)
    sampler.pause()
    at_pause = len(sampler.samples)
    time.sleep(0.2)
    paused_at = len(sampler.samples)
    assert at_pause <= paused_at <= at_pause + 1 and paused_at > 5  # at most the sample in flight lands
    time.sleep(0.2)
    assert len(sampler.samples) == paused_at
    sampler.begin(lambda: 2)
    time.sleep(0.1)
    samples = sampler.finish()
    assert len(samples) > paused_at + 5 and samples[-1][1] == 2
    assert not sampler._thread.is_alive()


# ------------------------------------------------------------------------- blocks added below the minimum (issue 56)


class _Pass:
    """A paired pass as extend() sees it: each step's forward ms (measured `ratio` x the clean 10 ms) and input shape
    (`shape(on, i)`), on a fake clock that each step moves by step_s."""

    def __init__(self, planned: int, ratio: float, shape: Callable[[bool, int], str], step_s: float = 0.5) -> None:
        self.on: dict[int, float] = {}
        self.off: dict[int, float] = {}
        self.shapes: tuple[dict[int, str], dict[int, str]] = ({}, {})
        self.ratio, self.shape, self.step_s, self.t = ratio, shape, step_s, 0.0
        for on, i in schedule(2 * planned):
            self.step(on, i)
        self.planned_s, self.t = self.t, 0.0

    def step(self, on: bool, i: int) -> None:
        (self.on if on else self.off)[i] = 10.0 * self.ratio if on else 10.0
        self.shapes[0 if on else 1][i] = self.shape(on, i)
        self.t += self.step_s

    def figure(self) -> PassCostFigure | None:
        return paired_cost(self.on, self.off, self.shapes)

    def extend(self, config: RunConfig, cap: int | None = None) -> tuple[int, Extension | None]:
        return extend(self.figure, self.step, len(self.on), self.planned_s, config, cap, lambda: self.t)


def test_blocks_are_added_while_below_the_minimum() -> None:
    """2 equal planned blocks: quartiles 0 apart, yet too few; before issue 56 nothing was added."""
    run = _Pass(2, 1.1, lambda on, i: "64")
    assert run.figure() is not None and not run.figure().resolved  # type: ignore[union-attr]
    measured, ext = run.extend(RunConfig())  # limit: the planned blocks' 4 s; a block 2 s
    assert ext is not None and ext.resolved and ext.stopped_by == "resolved" and ext.added_blocks == 2
    assert measured == 8 and run.figure().blocks == MIN_BLOCKS  # type: ignore[union-attr]
    assert ext.reason == (
        f"the planned blocks were too few to resolve the cost (2 blocks: too few to resolve a cost, at least "
        f"{MIN_BLOCKS} needed)"
    )


def test_where_the_time_cannot_reach_the_minimum_no_block_is_added_and_the_words_say_why() -> None:
    one = _Pass(1, 1.1, lambda on, i: "64")  # 1 block in 2 s: the time left allows 1 more
    measured, ext = one.extend(RunConfig())
    assert ext is not None and not ext.resolved and ext.added_blocks == 0 and measured == 2
    assert ext.stopped_by == "time"
    assert (
        ext.stopped
        == "too few blocks within reach (1 of the 4 a cost needs; the time left of a 2.0 s limit allows 1 more)"
    )
    assert "stopped: too few blocks within reach" in ext.text
    capped = _Pass(1, 1.1, lambda on, i: "64")
    _, limited = capped.extend(RunConfig(paired_extend_ratio=10.0), cap=4)
    assert limited is not None and limited.stopped_by == "iterations" and limited.added_blocks == 0
    assert limited.stopped.startswith("too few blocks within reach (1 of the 4 a cost needs; a collector's limit of 4")


def test_added_blocks_that_mix_input_shapes_are_left_out_and_the_stop_says_so() -> None:
    """The issue's program: its input shape changes per call, so a block's clean iterations mix 64 and 96; the
    planned block 0 held one shape. The added blocks mix too: the figure stays at 1 block, and the words say so."""

    def shape(on: bool, i: int) -> str:
        return "64" if on or i < 2 or i % 2 == 0 else "96"

    run = _Pass(2, 1.1, shape)
    assert run.figure().blocks == 1  # type: ignore[union-attr]
    _, ext = run.extend(RunConfig(paired_extend_ratio=3.0))  # 12 s: 6 blocks of 2 s
    assert ext is not None and not ext.resolved and ext.added_blocks == 4 and ext.stopped_by == "time"
    assert ext.stopped == (
        "too few blocks within reach (1 of the 4 a cost needs; the time left of a 12.0 s limit allows 2 more); 4 of "
        "the 4 added block(s) mixed input shapes and are left out of the figure"
    )
    # added blocks of one shape count: 3 of them make the minimum
    same = _Pass(2, 1.1, lambda on, i: "64" if i != 3 else "96")
    _, ext = same.extend(RunConfig(paired_extend_ratio=3.0))
    assert ext is not None and ext.resolved and ext.added_blocks == 3
