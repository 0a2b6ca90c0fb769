"""The built-in pipeline's signal and lock guarantees, for a user's program: a stop signal (once or twice) during
its measured calls, after them (--program-end run) and before its model is found; two collects into one folder.
Each real collect runs one timing pass of tests/programs/forever.py (yolov8n at 64x64, one torch thread), signalled
from outside."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from pathlib import Path

import pytest
from fault_harness import kill_leftovers, leftovers, run_json, send, start, wait_for
from program_runs import SHORT, measured_forwards, program

pytestmark = pytest.mark.fault

LONG = ["--only", "timing", "--iters", "2000", "--warmup", "1", "--no-report"]
"""A timing pass far longer than any test waits for (200 iterations ended within the 1 s a test once waited, once
the timing pass no longer ran a reference forward inside each of the program's calls)."""
ONE_THREAD = ["--threads", "1"]
"""The program's torch on one thread (hwprof sets it in the worker): how it stops is tested, not what it computes."""


def _collect(out: Path, options: list[str], *args: str) -> subprocess.Popen[str]:
    command = ["collect", *ONE_THREAD, *options, "--out", str(out), "--", "python", program("forever"), *args]
    return start(command, out.parent)


def _wait_measured(out: Path, proc: subprocess.Popen[str], timeout_s: float = 240) -> None:
    """Until the timing pass has measured a call of the program's model (its markers are written at each call):
    the stop then comes during the measured calls, as it does in a server stopped while it serves."""
    markers = out / "passes/timing/markers.jsonl"
    wait_for(markers, proc, timeout_s)  # written when the measured calls begin
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and proc.poll() is None:
        with contextlib.suppress(FileNotFoundError, ValueError):  # a line read half written is read again
            if measured_forwards(out, "timing") >= 1:
                return
        time.sleep(0.02)
    raise AssertionError(f"no measured call in {markers} (hwprof exit status {proc.poll()})")


def _finish(proc: subprocess.Popen[str], out: Path) -> str:
    try:
        text, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    left = leftovers(out)
    kill_leftovers(left)
    assert not left, left
    return text


def _served(mark: Path) -> int:
    text = mark.read_text() if mark.exists() else ""
    return int(text) if text.strip() else 0


@pytest.mark.slow
@pytest.mark.parametrize("times", [1, 2], ids=["once", "twice"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_during_the_measured_calls_keeps_them(tmp_path: Path, sig: int, times: int) -> None:
    out = tmp_path / "run"
    proc = _collect(out, LONG)
    _wait_measured(out, proc)
    send(proc, sig, times)
    text = _finish(proc, out)
    assert proc.returncode == 128 + sig, text
    assert "Traceback" not in text
    run = run_json(out)
    assert run["status"] == "interrupted" and run["finished"]
    assert run["interrupted"]["signals_received"] == times
    assert run["passes"]["timing"]["status"] == "interrupted"
    if times == 1:  # the pass closed its collectors: the program's outcome and the calls measured are kept
        assert run["passes"]["timing"]["program"]["ended"] == "interrupted"
        assert measured_forwards(out, "timing") >= 1
        assert (out / "summary.json").exists()


@pytest.mark.slow
def test_a_stop_after_the_measured_calls_of_a_program_left_to_run_keeps_them_all(tmp_path: Path) -> None:
    out, mark = tmp_path / "run", tmp_path / "served"
    proc = _collect(out, ["--only", "timing", "--program-end", "run", *SHORT], "--mark", str(mark))
    end = time.monotonic() + 240
    while _served(mark) < 1 + 1 + 3 + 2 and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.1)  # the call that finds the model, the warm-up, the three measured, two after them
    send(proc, signal.SIGTERM, 1)
    text = _finish(proc, out)
    assert proc.returncode == 143, text
    run = run_json(out)
    assert run["passes"]["timing"]["program"]["ended"] == "stopped by a signal after its measured calls"
    assert measured_forwards(out, "timing") == 3
    assert run["collectors"]["timing"]["summary"]["stages"]["forward"]["n"] == 3


@pytest.mark.slow
def test_a_stop_before_the_model_is_found_ends_the_program_at_once(tmp_path: Path) -> None:
    """No iteration is open before the model's first call: the stop does not wait for the end of one."""
    out = tmp_path / "run"
    proc = _collect(out, LONG)
    wait_for(out / "passes/timing/worker.pid", proc)
    sent = time.monotonic()
    send(proc, signal.SIGTERM, 1)
    text = _finish(proc, out)
    assert proc.returncode == 143, text
    assert time.monotonic() - sent < 8.0  # worker_stop.ITERATION_GRACE_S: the wait for an iteration's end
    assert run_json(out)["passes"]["timing"]["status"] == "interrupted"


@pytest.mark.slow
def test_two_collects_of_a_program_into_one_folder_one_runs_the_other_refuses(tmp_path: Path) -> None:
    out = tmp_path / "shared"
    procs = [_collect(out, ["--only", "timing", *SHORT]) for _ in range(2)]
    results = [p.communicate(timeout=300)[0] for p in procs]
    assert sorted(p.returncode for p in procs) == [0, 2], results
    refused = next(text for p, text in zip(procs, results, strict=True) if p.returncode == 2)
    errors = [line for line in refused.splitlines() if line.startswith("hwprof: error:")]
    assert len(errors) == 1
    assert "in use by another hwprof collect (pid" in errors[0] or "not empty" in errors[0]
    assert run_json(out)["status"] == "complete"
    assert measured_forwards(out, "timing") == 3  # one collect's calls, not two interleaved
