"""Hostile programs and input shapes, run for real (issue 45): a program that ends itself mid-loop (os._exit, from
its own thread too, sys.exit, a signal to itself), one that reads stdin's end of file and never calls its model,
and one whose model sees two input shapes. One `hwprof collect` per program on one torch thread, shared by the
tests that read it: `--only timing,flops` (the layers pass too) where a test reads the layers pass or the FLOPs,
`--only timing` where it reads the timing pass alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from program_runs import SHORT, collect, error_lines, measured_forwards, program, run_doc

from hwprof.render.measured_flops import gflops_text

pytestmark = pytest.mark.slow

ONE_THREAD = ["--threads", "1"]
"""The program's torch on one thread (hwprof sets it in the worker): how it ends is tested, not what it computes; a
second OpenMP thread only spun, and lost CPU to the Ray modules beside these (scripts/run_tests.py)."""
BOTH = ["--only", "timing,flops"]
TIMING = ["--only", "timing"]


class Collected:
    def __init__(self, out: Path, returncode: int, stdout: str) -> None:
        self.out, self.returncode, self.stdout = out, returncode, stdout
        self.run: dict[str, Any] = run_doc(out)

    def found(self, pass_name: str = "timing") -> dict[str, Any]:
        return dict(self.run["passes"][pass_name]["program"])


def _collect(
    factory: pytest.TempPathFactory, name: str, args: list[str], only: list[str], options: list[str] = SHORT
) -> Collected:
    out = factory.mktemp(name) / "run"
    done = collect(out, [*only, *ONE_THREAD, *options], args)
    return Collected(out, done.returncode, done.stdout + done.stderr)


@pytest.fixture(scope="module")
def os_exit(tmp_path_factory: pytest.TempPathFactory) -> Collected:
    args = [program("ends_itself"), "--how", "os_exit", "--after", "4"]
    return _collect(tmp_path_factory, "os_exit", args, BOTH)  # its test reads the layers pass's flops


@pytest.fixture(scope="module")
def thread_exit(tmp_path_factory: pytest.TempPathFactory) -> Collected:
    args = [program("ends_itself"), "--how", "os_exit", "--code", "3", "--from-thread", "--after", "4"]
    return _collect(tmp_path_factory, "thread_exit", args, TIMING)


@pytest.fixture(scope="module")
def sys_exit(tmp_path_factory: pytest.TempPathFactory) -> Collected:
    return _collect(tmp_path_factory, "sys_exit", [program("ends_itself"), "--how", "sys_exit", "--after", "4"], TIMING)


@pytest.fixture(scope="module")
def sigterm(tmp_path_factory: pytest.TempPathFactory) -> Collected:
    return _collect(tmp_path_factory, "sigterm", [program("ends_itself"), "--how", "sigterm", "--after", "4"], TIMING)


@pytest.fixture(scope="module")
def stdin_silent(tmp_path_factory: pytest.TempPathFactory) -> Collected:
    return _collect(tmp_path_factory, "stdin", [program("stdin"), "--default", "0"], TIMING)


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> Collected:
    options = ["--iters", "4", "--warmup", "1"]  # with the report: its header is read
    return _collect(tmp_path_factory, "shapes", [program("two_shapes"), "--frames", "30"], BOTH, options)


@pytest.fixture(scope="module")
def warm_shape(tmp_path_factory: pytest.TempPathFactory) -> Collected:
    """The first three calls (the finder's two, the warm-up) at a shape no measured call has."""
    options = ["--iters", "4", "--warmup", "1"]  # with the report: its first screen is read
    args = [program("two_shapes"), "--frames", "12", "--first", "32x32", "--shapes", "64x64"]
    return _collect(tmp_path_factory, "warm_shape", args, BOTH, options)


def test_os_exit_mid_loop_keeps_the_calls_it_measured_and_says_how_it_ended(os_exit: Collected) -> None:
    assert os_exit.returncode == 0, os_exit.stdout
    assert os_exit.run["status"] == "complete"
    timing = os_exit.run["passes"]["timing"]
    assert timing["status"] == "ok"
    found = os_exit.found()
    assert found["ended"] == f"ended after {found['measured_calls']} of its 3 measured calls (called os._exit(0))"
    assert found["exit_code"] == 0 and found["measured_calls"] >= 1
    assert any(f"{found['measured_calls']} measured of the 3 this pass" in note for note in found["notes"])
    forward = os_exit.run["collectors"]["timing"]["summary"]["stages"]["forward"]
    assert forward["n"] == found["measured_calls"] == measured_forwards(os_exit.out, "timing")
    assert os_exit.run["collectors"]["flops"]["status"] == "ok"


def test_os_exit_from_another_thread_fails_the_pass_saying_so(thread_exit: Collected) -> None:
    assert thread_exit.returncode == 1, thread_exit.stdout
    assert thread_exit.run["status"] == "partial"
    timing = thread_exit.run["passes"]["timing"]
    assert timing["status"] == "failed" and "called os._exit(3)" in timing["error"]
    assert thread_exit.found()["calls"] >= 4 and thread_exit.found()["exit_code"] == 3
    assert thread_exit.run["collectors"]["timing"]["status"] == "failed"
    assert any("called os._exit(3)" in line for line in error_lines(thread_exit.stdout))


def test_sys_exit_mid_loop_says_it_ended_by_sys_exit(sys_exit: Collected) -> None:
    assert sys_exit.returncode == 0, sys_exit.stdout
    assert sys_exit.run["status"] == "complete"
    found = sys_exit.found()
    assert found["ended"] == f"ended after {found['measured_calls']} of its 3 measured calls (sys.exit)"
    assert found["exit_code"] == 0 and found["measured_calls"] >= 1
    assert sys_exit.run["collectors"]["timing"]["summary"]["stages"]["forward"]["n"] == found["measured_calls"]


def test_a_signal_the_program_sends_itself_is_not_a_stop_from_outside(sigterm: Collected) -> None:
    assert sigterm.returncode == 1, sigterm.stdout
    assert sigterm.run["status"] == "partial" and "interrupted" not in sigterm.run
    timing = sigterm.run["passes"]["timing"]
    calls = sigterm.found()["calls"]
    assert timing["status"] == "failed"
    assert timing["error"].startswith(f"the program sent itself SIGTERM after {calls} calls of its model")
    assert sigterm.found()["ended"] == "ended (sent itself SIGTERM)"
    collector = sigterm.run["collectors"]["timing"]
    assert collector["status"] == "partial"  # what it measured is kept, marked as the failed pass's
    assert collector["summary"]["stages"]["forward"]["n"] == sigterm.found()["measured_calls"] >= 1


def test_stdin_end_of_file_is_named_where_no_model_follows(stdin_silent: Collected) -> None:
    assert stdin_silent.returncode == 1, stdin_silent.stdout
    assert stdin_silent.run["status"] == "partial"  # as the exit status says: no per-forward figure
    lines = error_lines(stdin_silent.stdout)
    assert len(lines) == 1 and lines[0].startswith("hwprof: error: no model: ")
    assert "it read end of file on stdin (hwprof gives a program /dev/null as stdin" in lines[0]
    assert "end of file on stdin" in stdin_silent.found()["no_model"]


def test_two_input_shapes_are_recorded_and_said(shapes: Collected) -> None:
    assert shapes.returncode == 0, shapes.stdout
    run = shapes.run
    for name in ("timing", "layers"):
        inputs = run["passes"][name]["inputs"]
        assert sorted(inputs["shapes"]) == ["1x3x64x64", "1x3x64x96"]
        assert sum(c["measured"] for c in inputs["shapes"].values()) == 4
        assert len(inputs["measured"]) == 4
    assert run["passes"]["layers"]["overhead"]["shapes"].startswith("mixed shapes: each of its 2 ABBA blocks")
    text = " ".join(shapes.stdout.split())
    assert "inputs 1x3x64x96 (timing 3, layers 5) · 1x3x64x64 (timing 2, layers 4)" in text
    flops = run["collectors"]["flops"]["summary"]["flops_by_shape"]  # each shape's forward counted, after the program
    assert sorted(flops) == ["1x3x64x64", "1x3x64x96"] and flops["1x3x64x64"] < flops["1x3x64x96"]
    small, large = (gflops_text(flops[s] / 1e9) for s in ("1x3x64x64", "1x3x64x96"))
    assert f"{small} GFLOPs at 1x3x64x64; the layer table's FLOPs are at 1x3x64x96" in text
    # the first screen: the command, the shapes of the forwards, the GFLOPs of the measured ones (issue 58)
    first = " ".join(" ".join(line.split()) for line in shapes.stdout.splitlines()[:12])
    assert f"program python {program('two_shapes')} --frames 30" in first
    assert "inputs 1x3x64x96 (1 warm-up, 2 measured) · 1x3x64x64 (2 measured) in the timing pass" in first
    mean = gflops_text((flops["1x3x64x64"] + flops["1x3x64x96"]) / 2 / 1e9)
    each = f"2 at 1x3x64x96: {large} GFLOPs, 2 at 1x3x64x64: {small} GFLOPs"
    assert f"{mean} GFLOPs, the mean over the 4 measured forwards ({each})" in first
    assert "layers: mixed shapes:" in text
    assert not {"imgsz", "batch", "extra", "weights"} & set(run["config"])
    found = run["passes"]["layers"]["program"]
    kinds = ("before_calls", "warmup_calls", "measured_calls", "clean_calls", "after_calls", "traced_calls")
    assert sum(found[k] for k in kinds) == found["calls"]
    bars = [line for line in shapes.stdout.splitlines() if line.startswith("pass ")]
    assert bars and not any("build" in line for line in bars), bars  # the progress lines reached hwprof
    assert any(line.startswith("pass layers: measure") for line in bars), bars


def test_gflops_are_said_at_the_measured_shape_not_the_warm_ups(warm_shape: Collected) -> None:
    assert warm_shape.returncode == 0, warm_shape.stdout
    run = warm_shape.run
    assert run["model"]["input_shape"] == [1, 3, 32, 32]  # the sample: the warm-up call's input
    assert run["passes"]["timing"]["inputs"]["shapes"] == {
        "1x3x32x32": {"warmup": 1, "measured": 0, "clean": 0},
        "1x3x64x64": {"warmup": 0, "measured": 4, "clean": 0},
    }
    flops = run["collectors"]["flops"]["summary"]["flops_by_shape"]
    measured, warm = gflops_text(flops["1x3x64x64"] / 1e9), gflops_text(flops["1x3x32x32"] / 1e9)
    first = " ".join(" ".join(line.split()) for line in warm_shape.stdout.splitlines()[:12])
    assert f"{measured} GFLOPs at 1x3x64x64, the measured forwards' shape;" in first
    assert f"{warm} GFLOPs" not in first
    text = " ".join(warm_shape.stdout.split())
    assert "the layer table's FLOPs are at 1x3x32x32, a shape no measured forward had" in text


@pytest.mark.parametrize("how", ["close", "devnull"])
def test_a_program_that_closes_or_redirects_its_stdout_is_measured(tmp_path: Path, how: str) -> None:
    """Issue 67: `os.close(1)` first made hwprof's own progress line, written from its model-call hook, fail the
    run as "the program raised OSError [Errno 9]", and a descriptor 1 sent to /dev/null took hwprof's progress
    lines with it. hwprof's lines go to a descriptor of its own."""
    out = tmp_path / "run"
    done = collect(out, [*TIMING, *ONE_THREAD, *SHORT], [program("closes_stdout"), "--how", how])
    said = done.stdout + done.stderr
    assert done.returncode == 0 and not error_lines(said), said[-3000:]
    run = run_doc(out)
    assert run["status"] == "complete" and measured_forwards(out, "timing") == 3
    # the progress lines reached hwprof (sent to /dev/null with the program's descriptor 1, the phases were lost)
    assert {"build_s", "warmup_s", "measure_s"} <= set(run["passes"]["timing"]["phases"]), run["passes"]["timing"]
