"""The warm-up's rule (hwprof.session.warmup): a pass after the timing pass is warm once a warm-up forward is within
STEADY_RATIO of the slowest undisturbed p50 of the passes before it; the timing pass once a forward is no longer much
faster than the one before; and only by default (no --warmup, no --iters, not a program)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwprof.core.config import RunConfig
from hwprof.core.markers import Marker, MarkerLog
from hwprof.core.program_spec import ProgramSpec
from hwprof.session.warmup import STEADY_RATIO, Reference, check, reference, steady

TIMING = Reference(900.0, "the timing pass's p50")


def test_a_pass_after_the_timing_pass_is_warm_once_a_forward_is_near_its_p50() -> None:
    assert check([910.0], TIMING).warm
    cold = check([3 * 900.0], TIMING)  # a first call that made its kernels
    assert not cold.warm and "above 1.25x the timing pass's p50, 900.0 ms" in cold.text
    assert check([3 * 900.0, 950.0], TIMING).warm
    assert check([STEADY_RATIO * 900.0], TIMING).warm and not check([STEADY_RATIO * 900.0 + 1], TIMING).warm


def _write_forwards(path: Path, forwards_ms: list[float], clean: bool, warmup_ms: float) -> None:
    """A pass's markers.jsonl: one warm-up forward, then `forwards_ms`, measured or clean, and one measured forward
    of 10x the others where they are clean (the collectors' own cost, which is not an undisturbed forward)."""
    log, t = MarkerLog(), 0
    rows = [(-1, warmup_ms, False), *((i, ms, clean) for i, ms in enumerate(forwards_ms))]
    if clean:
        rows.append((len(forwards_ms), 10 * max(forwards_ms), False))
    for iteration, ms, is_clean in rows:
        for phase, at in (("B", t), ("E", t + int(ms * 1e6))):
            log(Marker("stage", phase, "forward", at, iteration, iteration < 0, clean=is_clean))  # type: ignore[arg-type]
        t += int(ms * 1e6) + 1000
    path.parent.mkdir(parents=True)
    log.flush_to(path)


def test_the_reference_is_the_slowest_undisturbed_p50_of_the_passes_before(tmp_path: Path) -> None:
    """The timing pass's measured forwards and a paired pass's clean ones (not its measured ones, which carry its
    collectors, nor any warm-up), the pass asking left out."""
    passes = tmp_path / "passes"
    assert reference(tmp_path, "layers") is None
    _write_forwards(passes / "timing" / "markers.jsonl", [400.0, 410.0, 420.0], clean=False, warmup_ms=5000.0)
    assert reference(tmp_path, "layers") == Reference(410.0, "the timing pass's p50")
    _write_forwards(passes / "layers" / "markers.jsonl", [470.0, 480.0, 490.0], clean=True, warmup_ms=5000.0)
    slowest = reference(tmp_path, "kernels")
    assert slowest == Reference(480.0, "the layers pass's clean p50")
    assert reference(tmp_path, "layers") == Reference(410.0, "the timing pass's p50")  # its own left out
    first = check([560.0], slowest)  # 1.37x the timing pass's, 1.17x the layers pass's
    assert first.warm and "within 1.25x the layers pass's clean p50, 480.0 ms" in first.text
    assert not check([560.0], reference(tmp_path, "layers")).warm


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
