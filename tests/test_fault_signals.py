"""Fault injection: stop signals in every pass, two collects into one folder, and a stopped sweep.

Each real collect here runs one pass (--only its collectors) of yolov8n at 64x64 on one torch thread, is signalled
from outside once its warm-up is over (the pass's markers.jsonl has lines), and must end the same way whatever the
signal and however often it comes: exit 128 + the signal, run.json final and "interrupted" with the signal, the
pass recorded as interrupted, no collector with an internal error, no process, FIFO or temporary file left behind,
and (after a single signal) the report files of what was kept. A stop in the timing pass also skips the pass
planned after it (the layers pass of --only timing,flops) and names it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from fault_harness import (
    PASS_COLLECTORS,
    SMALL,
    kill_leftovers,
    leftovers,
    run_json,
    send,
    start,
    wait_for,
)

pytestmark = pytest.mark.fault

SIGNALS = {
    "SIGINT": signal.SIGINT,
    "SIGTERM": signal.SIGTERM,
    "SIGHUP": signal.SIGHUP,
    "SIGQUIT": signal.SIGQUIT,
    "SIGABRT": signal.SIGABRT,
}
PASS_SIGNALS = [
    ("timing", "SIGABRT", 1),
    ("timing", "SIGINT", 2),
    ("layers", "SIGINT", 1),
    ("layers", "SIGTERM", 2),
    ("kernels", "SIGTERM", 1),
    ("kernels", "SIGQUIT", 2),
    ("trace", "SIGHUP", 1),
    ("trace", "SIGINT", 2),
    ("scalene", "SIGQUIT", 1),
    ("scalene", "SIGHUP", 2),
]
"""(pass, signal, how many times): every pass stopped once and twice, each of the five signals (one handler takes
them all: hwprof.session.stopping; the worker gets SIGTERM whichever came) once, each in another pass, and SIGINT,
SIGTERM, SIGHUP and SIGQUIT twice, in passes with their own collectors to stop: ten collects, not all 50
combinations (50 collects: 6 minutes of the suite). SIGQUIT's default action killed the collect at once (exit -3,
run.json "running" under a dead lock, its worker running on for 8 s)."""
ONE_THREAD = ["--threads", "1"]
"""Every collect here on one torch thread: what is tested is how it stops, not what it computes; a second OpenMP
thread only spun (2.5 s more CPU per stopped collect, measured on the 2-CPU VM) and lost CPU to the Ray modules
that run beside these (scripts/run_tests.py)."""
TWICE_COLLECTORS = {"layers": "perf_events,sysstat"}
"""The layers pass stopped twice without flops: flops counts once, before the warm-up (torch's FlopCounterMode, whose
first use imports torch._dynamo: about 2 s of CPU), and is closed as every collector is; its close after a stop is the
once test's. perf_events and sysstat are the pass's threads and file descriptors to stop."""
LATER_PASS = {"timing": "flops"}
"""A pass stopped with a pass planned after it (--only timing,flops: the layers pass): that one is skipped and
named in run.json's passes_not_run (the signal comes after the timing pass's warm-up: in it, or between the two)."""
COLLECTOR_STATUSES = {"ok", "partial", "interrupted", "unavailable", "skipped"}


def _collectors(pass_name: str, times: int) -> str:
    """--only for the pass under test: its collectors (TWICE_COLLECTORS' for two signals)."""
    return TWICE_COLLECTORS.get(pass_name, PASS_COLLECTORS[pass_name]) if times == 2 else PASS_COLLECTORS[pass_name]


def _stop_pass(tmp_path: Path, pass_name: str, sig: int, times: int) -> tuple[int, str, Path]:
    out = tmp_path / "run"
    only = ",".join([_collectors(pass_name, times), *([LATER_PASS[pass_name]] if pass_name in LATER_PASS else [])])
    proc = start(["collect", *SMALL, *ONE_THREAD, "--perf-rate", "200", "--only", only, "--out", str(out)], tmp_path)
    wait_for(out / "passes" / pass_name / "markers.jsonl", proc)
    send(proc, sig, times)
    try:
        text, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, text, out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("pass_name", "sig_name", "times"),
    PASS_SIGNALS,
    ids=[f"{p}-{s}-{'once' if n == 1 else 'twice'}" for p, s, n in PASS_SIGNALS],
)
def test_a_stop_signal_in_any_pass_ends_the_run_the_same_way(
    tmp_path: Path, pass_name: str, sig_name: str, times: int
) -> None:
    sig = SIGNALS[sig_name]
    code, text, out = _stop_pass(tmp_path, pass_name, sig, times)
    left = leftovers(out)
    kill_leftovers(left)
    assert code == 128 + sig, text
    assert "Traceback" not in text
    run = run_json(out)
    assert run["status"] == "interrupted"
    # every pass's worker is forked from the collect's zygote, Scalene's through its launcher (forked_cli.py)
    assert run["passes"][pass_name]["worker_start"] == "forked"
    assert run["finished"]
    assert run["interrupted"]["signal"] == sig_name
    assert run["interrupted"]["signals_received"] == times
    assert run["passes"][pass_name]["status"] in ("interrupted", "ok"), run["passes"][pass_name]
    assert pass_name in run["interrupted"]["passes_interrupted"] or run["passes"][pass_name]["status"] == "ok"
    for name in _collectors(pass_name, times).split(","):
        entry = run["collectors"][name]
        assert entry["status"] in COLLECTOR_STATUSES, (name, entry)
        if entry["status"] in ("partial", "interrupted"):
            assert "stopped by" in entry["reason"] or "exited with status" in entry["reason"], (name, entry)
    assert not left, left
    if pass_name in LATER_PASS:  # the pass after it was not run, and is named
        assert "layers" in run["interrupted"]["passes_not_run"] and "layers" not in run["passes"], run["interrupted"]
    if times == 1:  # the report of what was kept; layers.csv only where a finished pass gave a layer table
        summary = json.loads((out / "summary.json").read_text())
        assert summary["status"] == "interrupted"
        layers_csv = out / "layers.csv"
        assert not layers_csv.exists() or len(layers_csv.read_text().splitlines()) > 1


ABORTS = """\
import os, sys
import torch
sys.path.insert(0, {programs!r})
from common import build_model

model = build_model("yolov8n")
with torch.inference_mode():
    for _ in range({calls}):
        model(torch.rand(1, 3, 64, 64))
os.abort()  # as a C++ library's abort() would
"""


@pytest.mark.slow
@pytest.mark.parametrize("calls", [2, 6], ids=["before-its-measured-calls", "after-them"])
def test_a_worker_that_aborts_is_a_failed_pass_and_the_run_is_finalised(tmp_path: Path, calls: int) -> None:
    """SIGABRT from a child: the program's own abort() kills the pass's worker. The pass fails, "killed by
    SIGABRT", the later passes run or are skipped as after any failure, run.json is final and nothing is left."""
    script = tmp_path / "aborts.py"
    script.write_text(ABORTS.format(programs=str(Path(__file__).parent / "programs"), calls=calls))
    out = tmp_path / "run"
    proc = start(
        [
            "collect",
            "--warmup",
            "1",
            "--iters",
            "3",
            "--no-report",
            *ONE_THREAD,
            "--only",
            "timing,flops",
            "--out",
            str(out),
            "--",
            "python",
            str(script),
        ],
        tmp_path,
    )
    text, _ = proc.communicate(timeout=300)
    left = leftovers(out)
    kill_leftovers(left)
    assert proc.returncode == 1, text
    assert "Traceback" not in text
    run = run_json(out)
    assert run["finished"] and run["status"] in ("partial", "failed"), run["status"]
    failed = {name: entry for name, entry in run["passes"].items() if entry["status"] == "failed"}
    assert failed and all("killed by signal 6 (SIGABRT)" in entry["error"] for entry in failed.values()), run["passes"]
    if calls == 6:  # the abort came after the timing pass's calls: kept; the layers pass's worker aborted
        assert run["passes"]["timing"]["status"] == "ok" and "layers" in failed
    assert "SIGABRT" in " ".join(text.split())
    assert not (out / ".hwprof.lock").exists()
    assert not left, left


@pytest.mark.slow
def test_two_collects_into_one_folder_one_runs_the_other_refuses_with_the_holder(tmp_path: Path) -> None:
    out = tmp_path / "shared"
    procs = [start(["collect", *SMALL, *ONE_THREAD, "--only", "timing", "--out", str(out)], tmp_path) for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], [r[0] for r in results]
    refused = next(r[0] for p, r in zip(procs, results, strict=True) if p.returncode == 2)
    error_lines = [line for line in refused.splitlines() if line.startswith("hwprof: error:")]
    assert len(error_lines) == 1
    assert "in use by another hwprof collect (pid" in error_lines[0] or "not empty" in error_lines[0]
    run = run_json(out)
    assert run["status"] == "complete"
    forwards = [json.loads(line) for line in (out / "passes/timing/markers.jsonl").read_text().splitlines()]
    measured = [m for m in forwards if m[0] == "stage" and m[2] == "forward" and m[1] == "B" and not m[5]]
    assert len(measured) == 3  # one collect's iterations, not two interleaved


def test_a_held_lock_refuses_a_second_collect_at_once(tmp_path: Path) -> None:
    from hwprof.rundir.lock import RunDirLock

    out = tmp_path / "busy"
    out.mkdir()
    with RunDirLock(out):
        started = time.monotonic()
        done = subprocess.run(
            [*start_args(), "--out", str(out)], capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
        assert time.monotonic() - started < 60
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert any(f"is in use by another hwprof collect (pid {os.getpid()}" in line for line in lines), lines


def test_a_held_sweep_folder_refuses_a_second_sweep_at_once_naming_the_first(tmp_path: Path) -> None:
    """Issue 67: two sweeps into one --out both ran; the second told the user to remove the first's running point,
    and sweep.json ended with a completed point marked running. The second now refuses before any point."""
    from fault_harness import hwprof_command

    from hwprof.rundir.lock import RunDirLock

    out = tmp_path / "sweep"
    out.mkdir()
    sweep = hwprof_command("sweep", "--models", "yolov8n", "--imgsz", "64", "--iters", "2", "--out", str(out))
    with RunDirLock(out, command="sweep"):
        done = subprocess.run([*sweep, "--", "--only", "timing"], capture_output=True, text=True, timeout=120)
        left = sorted(p.name for p in out.iterdir())
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"is in use by another hwprof sweep (pid {os.getpid()}" in lines[0], lines
    assert left == [".hwprof.lock"]  # no point started, no sweep.json written


def start_args() -> list[str]:
    from fault_harness import hwprof_command

    return hwprof_command("collect", *SMALL, *ONE_THREAD, "--only", "timing")


@pytest.mark.slow
def test_a_stale_lock_of_a_dead_collect_is_taken_over_with_a_note(tmp_path: Path) -> None:
    out = tmp_path / "stale"
    out.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    (out / ".hwprof.lock").write_text(json.dumps({"pid": dead.pid, "host": "here", "started": 0}))
    done = subprocess.run([*start_args(), "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"took over the lock of {out} left by pid {dead.pid}" in " ".join((done.stdout + done.stderr).split())
    assert run_json(out)["status"] == "complete"
    assert not (out / ".hwprof.lock").exists()


@pytest.mark.slow
@pytest.mark.parametrize("times", [1, 2], ids=["once", "twice"])
def test_a_stopped_local_sweep_finalises_its_point_and_says_how_to_resume(tmp_path: Path, times: int) -> None:
    out = tmp_path / "sweep"
    proc = start(
        ["sweep", "--models", "yolov8n,yolov7-tiny", "--imgsz", "64", "--iters", "2", *ONE_THREAD, "--out", str(out)],
        tmp_path,
    )
    end = time.monotonic() + 240
    while not list(out.glob("*/passes/timing/markers.jsonl")) and time.monotonic() < end:
        time.sleep(0.05)
    send(proc, signal.SIGINT, times)
    text, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, text
    points = [p for p in out.iterdir() if (p / "run.json").exists()]
    assert len(points) == 1
    run = run_json(points[0])
    assert run["status"] == "interrupted" and run["finished"]
    assert run["interrupted"]["signal"] == "SIGINT"
    sweep = json.loads((out / "sweep.json").read_text())
    assert any(f"hwprof sweep --resume {out}" in note for note in sweep["notes"])
    assert sweep["resume"] == f"hwprof sweep --resume {out}"
    assert text.rstrip().endswith(f"to run the points that did not finish: hwprof sweep --resume {out}"), text
    left = leftovers(out)
    kill_leftovers(left)
    assert not left.processes


def test_a_run_left_running_says_whether_a_collect_still_holds_it(tmp_path: Path) -> None:
    import shutil

    from hwprof.rundir.lock import RunDirLock
    from hwprof.rundir.reader import RunData

    run_dir = tmp_path / "left"
    shutil.copytree(Path(__file__).parent / "fixtures" / "rundir_small", run_dir)
    run = run_json(run_dir)
    run["status"], run["finished"] = "running", None
    (run_dir / "run.json").write_text(json.dumps(run))
    assert any("was killed or crashed before it finished" in w for w in RunData.load(run_dir).warnings)
    with RunDirLock(run_dir):
        holder = f"still being collected (pid {os.getpid()}"
        assert any(holder in w for w in RunData.load(run_dir).warnings)
