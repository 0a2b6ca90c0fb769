"""hwprof.session.pass_phases: where a pass's wall time went, from its progress lines (a real collect's phases are
checked in test_cli's complete run directory)."""

from __future__ import annotations

from hwprof.session.pass_phases import PhaseClock


def test_a_passs_stretches_lie_between_its_progress_lines() -> None:
    """hwprof.session.pass_phases: the first line of each phase and the last "measure" bound the stretches; one
    whose line never came (a worker stopped while it built its model) is left out, never guessed."""
    clock = PhaseClock(launched=100.0)
    for phase, at in (("build", 100.5), ("warmup", 103.0), ("warmup", 103.4), ("measure", 104.0), ("measure", 109.0)):
        clock.saw(phase, at)
    assert clock.stretches(exited_at=109.5, ended_at=110.0) == {
        "start_s": 0.5, "build_s": 2.5, "warmup_s": 1.0, "measure_s": 5.0, "finish_s": 0.5, "read_s": 0.5,
    }  # fmt: skip
    stopped = PhaseClock(launched=10.0)
    stopped.saw("build", 11.0)
    assert stopped.stretches(exited_at=None, ended_at=15.0) == {"start_s": 1.0}


def test_a_pass_launched_beside_the_previous_ones_close_has_its_wait_apart_from_its_build() -> None:
    """A worker that waited at its gate (hwprof.session.gate) says "waiting" between its build and its warm-up: the
    wait is a stretch of its own, not the build's."""
    clock = PhaseClock(launched=50.0)
    for phase, at in (("build", 50.2), ("waiting", 50.9), ("warmup", 51.6), ("measure", 52.0), ("measure", 58.0)):
        clock.saw(phase, at)
    assert clock.stretches(exited_at=58.5, ended_at=58.6) == {
        "start_s": 0.2, "build_s": 0.7, "wait_s": 0.7, "warmup_s": 0.4, "measure_s": 6.0, "finish_s": 0.5,
        "read_s": 0.1,
    }  # fmt: skip
