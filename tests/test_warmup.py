"""The warm-up's rule (hwprof.session.warmup): a pass after the timing pass is warm once a warm-up forward is within
STEADY_RATIO of the timing pass's p50; the timing pass once a forward is no longer much faster than the one before;
and only by default (no --warmup, no --iters, not a program)."""

from __future__ import annotations

import pytest

from hwprof.core.config import RunConfig
from hwprof.core.program_spec import ProgramSpec
from hwprof.session.warmup import STEADY_RATIO, check, steady


def test_a_pass_after_the_timing_pass_is_warm_once_a_forward_is_near_its_p50() -> None:
    assert check([910.0], 900.0).warm
    cold = check([3 * 900.0], 900.0)  # a first call that made its kernels
    assert not cold.warm and "above 1.25x the timing pass's p50, 900.0 ms" in cold.text
    assert check([3 * 900.0, 950.0], 900.0).warm
    assert check([STEADY_RATIO * 900.0], 900.0).warm and not check([STEADY_RATIO * 900.0 + 1], 900.0).warm


def test_the_timing_pass_is_warm_once_its_forward_stops_getting_faster() -> None:
    assert not check([900.0], None).warm  # nothing to hold it against: two at least
    assert check([900.0, 950.0], None).warm  # the first was warm too
    assert check([900.0, 800.0], None).warm  # 900 within 1.25x of 800
    falling = check([2000.0, 900.0], None)  # the first was cold: the second may still be
    assert not falling.warm and "above 1.25x the last one's, 900.0 ms" in falling.text
    assert check([2000.0, 900.0, 880.0], None).warm
    assert check([], None).iterations == 0 and not check([], None).warm


@pytest.mark.parametrize(
    ("extra", "program", "expected"),
    [
        ({"warmup_steady": True}, None, True),
        ({}, None, False),  # --warmup N or --iters N: N warm-up iterations, as always
        ({"warmup_steady": True}, ProgramSpec(argv=["x.py"], cwd="/tmp"), False),  # a program counts its own calls
    ],
)
def test_the_rule_applies_by_default_only(extra: dict[str, bool], program: ProgramSpec | None, expected: bool) -> None:
    assert steady(RunConfig(extra=extra, program=program)) is expected  # type: ignore[arg-type]
