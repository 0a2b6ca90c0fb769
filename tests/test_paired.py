"""The ABBA on/off harness behind the overhead benchmarks, and the sampler's pause/resume it relies on."""

from __future__ import annotations

import time

import pytest

from hwprof.perf.sampler import IntervalSampler
from hwprof.session.paired import is_on, summarize


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
