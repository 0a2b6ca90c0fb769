"""--budget (hwprof.session.budget): the time a collect's passes share, parsed as the command line takes it, split
among the passes as each starts, and a real collect whose passes stop at their share saying what that left
unresolved (never printed as resolved)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hwprof.api.requests import duration_s
from hwprof.session.budget import FINISH_SHARE, Budget, out_of_time


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90.0), ("90s", 90.0), ("2m", 120.0), ("1.5M", 90.0), ("1h", 3600.0), ("0", 0.0)]
)
def test_a_time_is_read_in_seconds_minutes_or_hours(text: str, seconds: float) -> None:
    assert duration_s(text) == seconds


@pytest.mark.parametrize("text", ["abc", "", "s", "-5s", "nan", "inf", "10x"])
def test_a_value_that_is_no_time_is_refused_in_words(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="a time"):
        duration_s(text)


def test_the_budget_is_shared_among_the_passes_left_less_the_finish() -> None:
    budget = Budget(100.0, started=1000.0)
    usable = 100.0 * (1 - FINISH_SHARE)
    assert budget.deadline(5, now=1000.0) == pytest.approx(1000.0 + usable / 5)
    # a pass that used less leaves its rest to those after it: 2 passes left, 30 s gone
    assert budget.deadline(2, now=1030.0) == pytest.approx(1030.0 + (usable - 30.0) / 2)
    assert budget.deadline(1, now=1200.0) == 1200.0  # spent: the pass ends at its first block
    assert out_of_time(1010.0, 4.0, now=1007.0) and not out_of_time(1010.0, 2.0, now=1007.0)
    assert not out_of_time(None, 1e9)


def test_a_bad_budget_is_one_line_and_exit_2(tmp_path: Path) -> None:
    command = [sys.executable, "-P", "-m", "hwprof", "collect", "--model", "yolov8n", "--budget", "soon"]
    done = subprocess.run([*command, "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "--budget" in lines[0] and "'soon'" in lines[0], done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_passes_out_of_their_share_stop_and_say_what_is_not_resolved(tmp_path: Path) -> None:
    """A budget shorter than the passes' start-up: each pass measures its first iteration (or block), stops, and
    says so; the layers pass's cost, from one block, is printed as not resolved."""
    command = [sys.executable, "-P", "-m", "hwprof", "collect", "--model", "yolov8n", "--imgsz", "64"]
    command += ["--warmup", "1", "--only", "timing,flops", "--threads", "1", "--budget", "1s"]
    done = subprocess.run(
        [*command, "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "300"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["config"]["budget_s"] == 1.0
    timing, layers = run["passes"]["timing"]["stopping"], run["passes"]["layers"]["stopping"]
    assert timing["budget_out"] and timing["iterations"] == 1 and not timing["resolved"], timing
    assert layers["budget_out"] and layers["iterations"] == 2 and not layers["resolved"], layers
    assert any(u.startswith("the cost (") for u in layers["unresolved"]), layers
    assert run["passes"]["layers"]["overhead"]["resolved"] is False
    said = "layers: its share of the budget ran out after 2 measured iterations of the 20 planned: the cost ("
    assert said in done.stdout, done.stdout[-4000:]
    assert "timing pass: its share of the budget ran out after 1 iteration" in done.stdout
    assert "collect: every pass done" in done.stdout  # its line said the time expected while passes were left


def test_the_time_left_is_each_pass_at_its_floor_at_the_timing_pass_pace(tmp_path: Path) -> None:
    """Two passes left after a timing pass whose iterations took 0.5 s and whose start-up, build, warm-up and
    finish took 3 s: each at 4 ABBA blocks (16 iterations) plus those 3 s; with --iters 20, 40 iterations each."""
    from hwprof.core.markers import Marker
    from hwprof.session.expected import expected_left_s, expected_words
    from hwprof.session.outcome import PassOutcome

    timing = tmp_path / "passes" / "timing"
    timing.mkdir(parents=True)
    rows = []
    for it in range(6):
        t = it * 1_000_000_000
        rows += [
            Marker("iteration", "B", "iteration", t, it, False),
            Marker("iteration", "E", "iteration", t + 500_000_000, it, False),
        ]
    (timing / "markers.jsonl").write_text("".join(json.dumps(m.to_row()) + "\n" for m in rows))
    done = PassOutcome("timing", "ok", 0, 10.0, 1)
    done.phases = {"start_s": 1.0, "build_s": 1.0, "warmup_s": 0.5, "measure_s": 6.0, "finish_s": 0.5}
    assert expected_left_s(tmp_path, [done], 2, 20, resolving=True) == pytest.approx(2 * (3.0 + 16 * 0.5))
    assert expected_left_s(tmp_path, [done], 2, 20, resolving=False) == pytest.approx(2 * (3.0 + 40 * 0.5))
    # a pass launched beside the previous one's close (hwprof.session.turn): its start, build and wait lay outside
    # its wall, and count for nothing here
    early = PassOutcome("layers", "ok", 0, 7.0, 2)
    early.phases = {"start_s": 0.2, "build_s": 0.5, "wait_s": 0.4, "warmup_s": 0.5, "measure_s": 6.0, "finish_s": 0.5}
    assert expected_left_s(tmp_path, [early], 1, 20, resolving=True) == pytest.approx(1.0 + 16 * 0.5)
    assert expected_left_s(tmp_path / "none", [], 2, 20, resolving=True) is None  # no timing pass measured yet
    assert expected_words(22.0) == "about 22 s left (estimate: each pass at its floor)"
    assert expected_words(300.0).startswith("about 5 min left")
