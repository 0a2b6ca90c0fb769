"""The CLI end to end, as a user runs it: from a folder outside the checkout, in child processes."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from run_store import option, stored_run

from hwprof.core.markers import read_markers

SMALL = ["--model", "yolov8n", "--imgsz", "256", "--iters", "2", "--warmup", "1", "--threads", "2"]


def only_run_dir(results: Path) -> Path:
    runs = [p for p in results.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def test_unknown_model_is_one_line_with_the_names(run_hwprof) -> None:
    proc = run_hwprof("collect", "--model", "yolov99")
    assert proc.returncode == 2
    said = "unknown model 'yolov99' (did you mean yolov7?); known models: yolov7, yolov7-tiny, yolov7x"
    assert said in proc.stderr, proc.stderr  # issue 68: the closest name suggested
    assert "Traceback" not in proc.stdout + proc.stderr


def test_errors_stay_on_one_line_at_any_width(tmp_path) -> None:
    """A sweep reads a failed point's `hwprof: error:` line from its log: wrapped at the terminal's width
    it kept only the last fragment ("collect exited 2: /tmp/sw/yolov8n-torch-fp16-t16-b1)")."""
    import os

    from hwprof.sweep.points import _last_line

    proc = subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", "collect", "--model", "yolov99"],
        cwd=tmp_path,
        text=True,
        capture_output=True,
        env={**os.environ, "COLUMNS": "40"},
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("hwprof: error: unknown model 'yolov99'")
    log = tmp_path / "point.log"
    log.write_text("collecting into x\n" + proc.stderr + "\n")
    assert _last_line(log) == lines[0]
    log.write_text("hwprof: error: a pass failed (partial results in\n/tmp/sw/point)\n")
    assert _last_line(log) == "hwprof: error: a pass failed (partial results in"


@pytest.mark.parametrize(
    "args,message",
    [
        (["--images", "/nonexistent/folder"], "does not exist"),
        (["--weights", "/nonexistent/w.pt"], "--weights /nonexistent/w.pt does not exist, not a checkpoint file"),
        (["--weights", "/dev/zero"], "--weights /dev/zero is a character device, not a checkpoint file; pass the"),
        (["--weights", "/"], "--weights / is a directory, not a checkpoint file; pass the path of a .pt checkpoint"),
        (["--only", "timing,bogus"], "unknown collector bogus"),
        (["--imgsz", "100"], "multiple of 32"),
    ],
)
def test_bad_inputs_exit_2(run_hwprof, args, message) -> None:
    proc = run_hwprof("collect", *SMALL, *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stdout + proc.stderr


def test_empty_image_folder(run_hwprof, tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_hwprof("collect", *SMALL, "--images", str(empty))
    assert proc.returncode == 2 and "no image files" in proc.stderr


def test_doctor_lists_every_collector(run_hwprof) -> None:
    from hwprof.session.registry import by_name

    proc = run_hwprof("doctor")
    assert proc.returncode == 0, proc.stderr
    for name in by_name():
        assert name in proc.stdout
    # issue 68: a verdict line first; on the CPU the GPU collectors are one line, not a fix each to rerun on cuda
    first = proc.stdout.splitlines()[0]
    assert re.match(r"verdict: \d+ of \d+ collectors measure here", first), first
    gpu = [name for name, cls in by_name().items() if cls.needs_cuda]
    assert gpu and f"GPU collectors ({', '.join(gpu)}): not probed" in " ".join(proc.stdout.split())
    assert "hwprof collect --device cuda" not in proc.stdout


@pytest.mark.slow
def test_corrupt_weights_fail_in_one_line_and_keep_the_run(run_hwprof, tmp_path) -> None:
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"PK\x03\x04 definitely not a checkpoint")
    # the timing pass alone: the default plan's probes of every other collector cost twice the CPU (4 s, not 2)
    # before the first pass's build reads the weights and fails
    proc = run_hwprof("collect", *SMALL, "--only", "timing", "--weights", str(bad), "--results", str(tmp_path / "res"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "bad.pt" in proc.stderr and "Traceback" not in proc.stdout + proc.stderr
    run = json.loads((only_run_dir(tmp_path / "res") / "run.json").read_text())
    assert run["status"] == "failed"


@pytest.mark.slow
def test_collect_writes_a_complete_run_directory(run_hwprof, tmp_path, tmp_path_factory) -> None:
    """The suite's stored small run (tests/run_store.py: timing, layers and trace passes), read as a user would."""
    stored = stored_run(tmp_path_factory, "small", tmp_path / "run")
    assert stored.returncode == 0, stored.stdout + stored.stderr
    run_dir = stored.path
    run = json.loads((run_dir / "run.json").read_text())
    iters = int(option("small", "--iters"))
    assert run["schema_version"] == 1 and run["status"] == "complete"
    for key in ("config", "host", "model", "collectors", "stages", "passes"):
        assert key in run
    # no collector of the small run wraps its worker: each pass was forked from the collect's zygote
    assert {p["worker_start"] for p in run["passes"].values()} == {"forked"}, run["passes"]
    stretches = ["start_s", "build_s", "warmup_s", "measure_s", "finish_s", "read_s"]
    previous_end = None
    for index, (name, entry) in enumerate(run["passes"].items()):  # where each pass's time went, every stretch
        phases = entry["phases"]
        if index == 0:  # the first pass waits for none: its stretches sum to its wall
            assert list(phases) == stretches, (name, phases)
            assert sum(phases.values()) == pytest.approx(entry["wall_s"], abs=0.01), (name, phases, entry["wall_s"])
        else:  # launched beside the previous pass's close (hwprof.session.turn): its wall from its turn on
            assert list(phases) == [*stretches[:2], "wait_s", *stretches[2:]], (name, phases)
            before = phases["start_s"] + phases["build_s"] + phases["wait_s"]
            assert sum(phases.values()) - before == pytest.approx(entry["wall_s"], abs=0.01), (name, phases, entry)
        # no pass warms up or measures beside another: its first marker comes after the previous worker's end
        first = read_markers(run_dir / "passes" / name / "markers.jsonl")[0].t_ns
        assert previous_end is None or first > previous_end, (name, first, previous_end)
        previous_end = json.loads((run_dir / "passes" / name / "result.json").read_text())["finished_ns"]
    for key in (
        "cpu_model",
        "logical_cpus",
        "smt",
        "kernel",
        "perf_event_paranoid",
        "python",
        "torch",
        "packages",
    ):
        assert key in run["host"]
    # the parent's torch default, which follows this host's cores (1 on a 1-CPU host, 32 on 64), not --threads
    default = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        capture_output=True, text=True, check=True, env={**os.environ, "COLUMNS": "120"},
    )  # fmt: skip
    assert run["host"]["torch"]["num_threads"] == int(default.stdout)
    assert run["config"]["threads"] == 2
    assert run["model"]["random_init"] is True and run["model"]["params_fused"] == 3_151_904
    assert set(run["stages"]) >= {"load", "preprocess", "forward", "postprocess"}
    assert run["stages"]["forward"]["n"] == iters
    assert run["collectors"]["timing"]["status"] == "ok" and run["collectors"]["flops"]["status"] == "ok"
    # every FPS is batch / its iteration p50 (issue 56: the timing summary's was 1000 times the real one); the
    # collector's own timing of the iterations and the markers file's differ by microseconds
    timing = run["collectors"]["timing"]["summary"]
    assert run["fps"] == pytest.approx(1e3 / run["stages"]["iteration"]["p50_ms"], rel=1e-9)
    assert timing["fps"] == pytest.approx(1e3 / timing["stages"]["iteration"]["p50_ms"], rel=1e-9)
    assert timing["fps"] == pytest.approx(run["fps"], rel=1e-3)
    for p in run["passes"].values():  # every Linux /proc/stat has the steal column
        assert 0.0 <= p["host_steal_share"] < 1.0
    with open(run_dir / "layers.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows[0].keys() >= {
        "index",
        "name",
        "type",
        "from",
        "params",
        "flops",
        "in_bytes",
        "out_bytes",
        "weight_bytes",
    }
    assert len(rows) == 23 and rows[0]["type"] == "Conv"
    report = run_hwprof("report", str(run_dir))
    assert report.returncode == 0 and "pipeline stages" in report.stdout
    again = run_hwprof("collect", *SMALL, "--only", "timing", "--out", str(run_dir))
    assert again.returncode == 2 and "refusing to overwrite" in again.stderr and not again.stdout.strip()


@pytest.mark.slow
def test_collect_writes_into_the_default_relative_results_folder(run_hwprof, tmp_path) -> None:
    proc = run_hwprof("collect", "--model", "yolov8n", "--imgsz", "64", "--iters", "1", "--only", "timing")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = json.loads((only_run_dir(tmp_path / "results") / "run.json").read_text())
    assert run["status"] == "complete" and run["config"]["imgsz"] == 64


LONG_TIMING_RUN = (
    "collect",
    "--model",
    "yolov8n",
    "--imgsz",
    "640",
    "--iters",
    "500",
    "--warmup",
    "0",
    "--only",
    "timing",
)
"""A timing pass far longer than any test waits for: the tests stop it (time-out, Ctrl-C)."""


@pytest.mark.slow
def test_a_hanging_pass_times_out_and_keeps_partial_results(run_hwprof, tmp_path) -> None:
    proc = run_hwprof(*LONG_TIMING_RUN, "--timeout", "12", "--results", str(tmp_path / "res"))
    run_dir = only_run_dir(tmp_path / "res")
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "partial"
    assert run["passes"]["timing"]["status"] == "timeout"
    assert "ran past its 12 s time-out" in run["passes"]["timing"]["error"]
    assert run["collectors"]["timing"]["status"] == "partial"
    assert run["stages"]["forward"]["n"] >= 1
    assert proc.returncode == 1
    assert "pass timing timeout: pass timing ran past its 12 s time-out" in " ".join(proc.stderr.split())


@pytest.mark.slow
def test_ctrl_c_keeps_what_was_collected(tmp_path) -> None:
    """SIGINT mid-pass: exit 130, the run kept. The child starts with SIGINT ignored, as under a
    non-interactive shell's `&`, where Python would keep ignoring it unless hwprof takes it back."""
    res = tmp_path / "res"
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "hwprof", *LONG_TIMING_RUN, "--results", str(res)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        runs = list(res.glob("*/passes/timing/markers.jsonl")) if res.exists() else []
        if runs and runs[0].stat().st_size > 2000:
            break
        time.sleep(0.1)  # the pass computes until the signal: each poll's wait is its cost
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 130, out
    assert "interrupted by SIGINT: the passes that ran are kept" in " ".join(out.split())
    run = json.loads((only_run_dir(res) / "run.json").read_text())
    assert run["status"] == "interrupted"
    assert run["interrupted"]["signal"] == "SIGINT"
    assert run["collectors"]["timing"]["status"] == "partial"
    markers = (only_run_dir(res) / "passes/timing/markers.jsonl").read_text().splitlines()
    assert any('"forward"' in line and '"E"' in line and ", 0, -1]" in line for line in markers)  # measured, kept
    worker = int((only_run_dir(res) / "passes/timing/worker.pid").read_text().split()[0])
    assert not psutil.pid_exists(worker) or psutil.Process(worker).status() == psutil.STATUS_ZOMBIE, (
        "a worker outlived Ctrl-C"
    )


@pytest.mark.slow
def test_models_lists_every_family_with_params(run_hwprof, tmp_path) -> None:
    proc = run_hwprof("models", timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from hwprof.workload.zoo import MODEL_NAMES

    for name in MODEL_NAMES:
        assert name in proc.stdout
    line = next(row for row in proc.stdout.splitlines() if " yolov7 " in f" {row} ")
    assert "36,905,341" in line
    yolov8n = next(row for row in proc.stdout.splitlines() if "yolov8n" in row)
    assert "3,151,904" in yolov8n and "8.74" in yolov8n


def test_unknown_event_lists_what_the_host_has(run_hwprof) -> None:
    proc = run_hwprof("collect", *SMALL, "--events", "task-clock,no-such-event")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    text = " ".join(proc.stderr.split())
    assert "no-such-event" in text and "task-clock" in text
    assert "Traceback" not in proc.stdout + proc.stderr
