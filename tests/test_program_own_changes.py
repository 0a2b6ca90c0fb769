"""What a program changes itself, said by the run (issue 58), on real collects of the test programs: torch's thread
count set call by call (thread_counts.py), a backward pass after every forward (backward.py) or grad left on
(grad_on.py), and its stdin (stdin.py, --program-stdin). The pure logic is in test_program_call_facts.py."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from program_runs import SHORT, collect, error_lines, program, run_doc

ONE_PASS = ["--only", "timing", *SHORT]


@functools.cache
def report(out: Path, *args: str) -> str:
    """`hwprof report OUT --format markdown`: the summary's and the header's lines unwrapped. Once per run and
    arguments: the tests only read the runs (backward.py's report, read by two tests, cost 1 CPU-s each time)."""
    done = subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", *(args or ("report", str(out), "--format", "markdown"))],
        cwd=out.parent,
        text=True,
        capture_output=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def line(text: str, key: str) -> str:
    """The first `- **key**: ...` line of a markdown report."""
    return next(row for row in text.splitlines() if row.startswith(f"- **{key}**: "))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """thread_counts.py (1 then 2 threads, in turn) and backward.py, one timing pass each, --threads 2."""
    root = tmp_path_factory.mktemp("own")
    out = {name: root / name for name in ("thread_counts", "backward", "grad_on")}
    for name, path in out.items():
        done = collect(path, [*ONE_PASS, "--threads", "2"], [program(name)])
        assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.mark.slow
def test_the_thread_counts_the_program_set_are_the_runs_not_threads(runs: dict[str, Path]) -> None:
    found = run_doc(runs["thread_counts"])["passes"]["timing"]["program"]
    counts = found["torch_threads"]
    assert set(counts) == {"1", "2"} and sum(counts.values()) == found["measured_calls"] == 3
    assert found["inference_mode_calls"] == 3 and found["grad_calls"] == 0
    text = report(runs["thread_counts"])
    expected = f"torch threads set by the program: 1 ({counts['1']} measured call"
    assert expected in line(text, "run") and expected in line(text, "config")
    assert "2 torch threads" not in line(text, "run") + line(text, "config")
    assert "FPS inference" in line(text, "speed")  # inference_mode: an inference
    assert "torch threads" not in line(report(runs["backward"]), "run").replace("2 torch threads", "")


@pytest.mark.slow
def test_a_program_that_trains_measures_forward_plus_backward_not_inference(runs: dict[str, Path]) -> None:
    doc = run_doc(runs["backward"])
    found = doc["passes"]["timing"]["program"]
    assert found["grad_calls"] == found["measured_calls"] == 3 and found["torch_threads"] == {"2": 3}
    assert found["stage_calls"]["backward=torch:Tensor.backward"] >= 3
    stages = doc["stages"]
    assert stages["backward"]["n"] == 3
    # the backward's time is its stage's, not the program's own code's (other: the loss, zero_grad, a print)
    assert stages["other"]["p50_ms"] < stages["backward"]["p50_ms"]
    text = report(runs["backward"])
    speed = line(text, "speed")
    assert "backward p50" in speed and "FPS forward + backward" in speed and "inference" not in speed
    assert "a training step, not an inference" in line(text, "measured")
    assert "FPS: forward + backward" in text and "FPS: inference" not in text
    compared = report(runs["backward"], "compare", str(runs["thread_counts"]), str(runs["backward"]))
    assert "FPS (forward + backward)" in compared and "FPS (inference)" not in compared
    assert "64 / 1 / 1,2" in compared  # the thread counts thread_counts.py set, not --threads


@pytest.mark.slow
def test_forwards_with_grad_on_and_no_backward_say_grad_mode_was_on(runs: dict[str, Path]) -> None:
    found = run_doc(runs["grad_on"])["passes"]["timing"]["program"]
    assert found["grad_calls"] == 3 and found["inference_mode_calls"] == 0
    text = report(runs["grad_on"])
    assert "(grad on)" in line(text, "speed") and "FPS forward with grad on" in line(text, "speed")
    assert "FPS inference" not in text and "FPS: inference" not in text
    assert "grad mode was on (3 of 3 measured calls" in line(text, "measured")


@pytest.mark.slow
def test_program_stdin_feeds_every_pass_from_the_files_start(tmp_path: Path) -> None:
    """Two passes: timing's and the layers pass of sysstat (flops' FLOP count cost its worker 1.5 CPU-s more)."""
    (tmp_path / "five.txt").write_text("5\n")
    out = tmp_path / "run"
    options = ["--only", "timing,sysstat", *SHORT, "--program-end", "run", "--program-stdin", "five.txt"]
    done = collect(out, options, [program("stdin")])
    assert done.returncode == 0, done.stdout + done.stderr
    doc = run_doc(out)
    assert doc["config"]["program"]["stdin"] == str(tmp_path / "five.txt")
    assert set(doc["passes"]) == {"timing", "layers"}
    for name in doc["passes"]:
        log = (out / "passes" / name / "worker.log").read_text()
        assert "5 frames done" in log and "end of file" not in log, name
        assert not any("stdin" in note for note in doc["passes"][name]["program"]["notes"])


@pytest.mark.slow
def test_end_of_file_on_stdin_is_a_note_even_when_the_program_succeeds(tmp_path: Path) -> None:
    """Whatever hwprof was given on its stdin, the program reads end of file (and uses its --default)."""
    out = tmp_path / "run"
    done = collect(out, [*ONE_PASS, "--program-end", "run"], [program("stdin")], stdin="40\n")
    assert done.returncode == 0, done.stdout + done.stderr
    log = (out / "passes/timing/worker.log").read_text()
    assert "stdin: end of file" in log and "6 frames done" in log  # --default, not the 40 hwprof was given
    notes = run_doc(out)["passes"]["timing"]["program"]["notes"]
    assert any(n.startswith("the program read end of file on stdin") and "--program-stdin FILE" in n for n in notes)
    assert "--program-stdin FILE" in line(report(out), "note")


def test_a_missing_program_stdin_exits_2_with_one_line_before_any_pass(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = collect(out, [*ONE_PASS, "--program-stdin", "missing.txt"], [program("stdin")], timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = error_lines(done.stderr)
    assert len(lines) == 1 and "--program-stdin missing.txt does not exist" in lines[0], done.stderr
    assert not out.exists()
