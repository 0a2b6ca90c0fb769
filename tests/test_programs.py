"""A user's own program under `hwprof collect [options] -- python SCRIPT ARGS`, run for real: the test programs of
tests/programs (written in the styles of the seeds), and each stated behaviour of the documentation's
"What happens when" list (docs/program.md): bad commands, no model, a failing program, an ambiguous model,
stdin, forks, a program that runs forever."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from program_runs import SHORT, collect, error_lines, layer_names, measured_forwards, program, run_doc
from run_store import option, stored_run

ONE_PASS = ["--only", "timing", *SHORT]


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ([], "no program after `--`"),
        (["python", "missing.py"], "the program missing.py does not exist"),
        (["python", "-c", "print(1)"], "the interpreter option -c is not supported"),
        (["python", "-m"], "`-m` names no module"),
        (["ruby", "x.rb"], "the program ruby does not exist"),
    ],
)
def test_a_command_that_cannot_run_exits_2_with_one_line(run_hwprof, tmp_path: Path, command, message) -> None:
    done = run_hwprof("collect", "--results", str(tmp_path / "res"), "--", *command)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = error_lines(done.stderr)
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--program-model", "model"], "--program-model is for a program"),
        (["--stage", "nms=x:y"], "--stage is for a program"),
    ],
)
def test_a_program_option_without_a_program_exits_2(run_hwprof, tmp_path: Path, options, message) -> None:
    done = run_hwprof("collect", "--results", str(tmp_path / "res"), *options)
    assert done.returncode == 2 and message in " ".join(done.stderr.split()), done.stderr


def test_a_pipeline_option_with_a_program_exits_2(run_hwprof, tmp_path: Path) -> None:
    done = run_hwprof("collect", "--imgsz", "128", "--", "python", program("detect_like"))
    assert done.returncode == 2
    assert "--imgsz sets up hwprof's own pipeline" in " ".join(done.stderr.split())


@pytest.mark.slow
def test_a_detect_program_is_measured_call_by_call(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    """The stored run of detect_like.py (breaks_at_import.py, BREAK_AT_IMPORT unset), --only timing."""
    stored = stored_run(tmp_path_factory, "program_detect", tmp_path / "run")
    assert stored.returncode == 0, stored.stdout + stored.stderr
    out, iters = stored.path, int(option("program_detect", "--iters"))
    found = run_doc(out)["passes"]["timing"]["program"]
    assert found["model"] == "model" and found["model_class"] == "DetectionModel"
    assert found["ended"] == "stopped after the measured calls"
    assert found["measured_calls"] == iters and measured_forwards(out, "timing") == iters


@pytest.mark.slow
def test_a_program_that_ends_mid_schedule_keeps_no_iteration_without_a_forward(tmp_path: Path) -> None:
    """5 images: 2 calls find the model, 1 is warm-up, 2 of the 5 asked are measured; the program then runs its
    last postprocess and ends inside the next iteration, which has no forward: not a zero row in the stages."""
    out = tmp_path / "run"
    done = collect(out, ["--only", "timing", "--iters", "5", "--warmup", "1", "--no-report"],
                   [program("detect_like"), "--img-size", "64", "--frames", "4"])  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    found = run_doc(out)["passes"]["timing"]["program"]
    assert found["measured_calls"] == 2 and found["ended"] == "ended after 2 of its 5 measured calls"
    assert any("not kept as an iteration" in note for note in found["notes"]), found["notes"]
    rows = [json.loads(line) for line in (out / "passes/timing/markers.jsonl").read_text().splitlines()]
    iterations = {r[4] for r in rows if r[0] == "iteration" and not r[5]}
    forwards = {r[4] for r in rows if r[0] == "stage" and r[2] == "forward" and not r[5]}
    assert iterations == forwards == {0, 1}
    stages = json.loads((out / "summary.json").read_text())["stages"]["rows"]
    assert all(row["n"] == 2 for row in stages), stages
    forward = next(row for row in stages if row["name"] == "forward")
    assert forward["p50_ms"] > 0 and min(r["p50_ms"] for r in stages if r["name"] == "iteration") >= forward["p50_ms"]


@pytest.mark.slow
def test_no_model_profiles_the_whole_run_labelled_and_exits_1(tmp_path: Path) -> None:
    """timing finds no model and says so; the kernels pass then profiles the program's whole run as one span. perf
    at 200 Hz: about 20 samples of the program; at its default 1000 Hz, `perf script` spent 1.5 CPU-s more on them."""
    out = tmp_path / "run"
    options = ["--only", "timing,perf_sampling", "--perf-rate", "200", *SHORT[:-1]]
    done = collect(out, options, [program("no_model"), "--rounds", "12"])
    assert done.returncode == 1, done.stdout + done.stderr
    assert error_lines(done.stderr) == [
        "hwprof: error: no model: the program called no torch module: only whole-process figures (kernels, "
        "py-spy, Scalene); the figures made are whole-process, not per forward"
    ]
    run = run_doc(out)
    assert run["passes"]["timing"]["status"] == "ok"
    assert run["passes"]["timing"]["program"]["ended"] == "called no torch module"
    assert run["collectors"]["timing"]["status"] == "unavailable"
    assert "called no torch module" in run["collectors"]["timing"]["reason"]
    kernels = run["passes"]["kernels"]
    assert kernels["status"] == "ok" and kernels["program"]["whole_process"] is True
    assert kernels["program"]["ended"] == "ran to its end"
    assert run["collectors"]["perf_sampling"]["status"] == "ok"
    stages = json.loads((out / "passes/kernels/perf_sampling.kernels.json").read_text())["stages"]
    assert list(stages) == ["program"] and stages["program"]["samples"] > 0
    text = " ".join(done.stdout.split())
    assert "the program's whole run (no model: whole-process figures, not per forward)" in text
    assert "whole-process only:" in text
    _damaged_whole_run_is_one_line(out)


def _damaged_whole_run_is_one_line(out: Path) -> None:
    """A damaged field of what the whole-process section reads: `hwprof report` says which, in one line, exit 2."""
    path = out / "passes/kernels/perf_sampling.kernels.json"
    doc = json.loads(path.read_text())
    doc["stages"]["program"]["samples"] = "many"
    path.write_text(json.dumps(doc))
    done = subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", "report", str(out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = error_lines(done.stderr)
    assert len(lines) == 1 and "perf_sampling.kernels.json" in lines[0] and "stages.program.samples" in lines[0]


@pytest.mark.slow
def test_a_whole_process_pass_that_found_no_model_runs_again(tmp_path: Path) -> None:
    """py-spy alone: its pass is the first, finds no model, and runs the program again over its whole run. 50
    rounds at 250 Hz: at 12 rounds and 50 Hz the program's own work is a few ms after a second of imports, and CI
    once sampled nothing but torch's import (a ranking a few samples flip). At 50 rounds no_model.py's lines held
    54% of the sampled time, first and second of the ranking (200 rounds, 66%, ran the program twice for 4 CPU-s
    more each time)."""
    out = tmp_path / "run"
    options = ["--only", "pyspy", "--pyspy-rate", "250", *SHORT]
    done = collect(out, options, [program("no_model"), "--rounds", "50"])
    assert done.returncode == 1, done.stdout + done.stderr
    trace = run_doc(out)["passes"]["trace"]
    assert trace["status"] == "ok" and trace["program"]["whole_process"] is True, trace
    assert run_doc(out)["collectors"]["pyspy"]["status"] == "ok"
    hotspots = json.loads((out / "passes/trace/pyspy.hotspots.json").read_text())
    assert any("no_model.py" in row["function"] for row in hotspots["measured"]["python"]), hotspots["measured"]


@pytest.mark.slow
def test_a_failing_program_keeps_its_traceback_fails_its_pass_and_exits_1(tmp_path: Path) -> None:
    """It fails before its first measured call: the later pass is not run (it would fail again)."""
    out = tmp_path / "run"
    done = collect(out, ["--only", "timing,flops", *SHORT[:-1]], [program("fails"), "--after", "2"])
    assert done.returncode == 1, done.stdout + done.stderr
    run = run_doc(out)
    timing = run["passes"]["timing"]
    assert timing["status"] == "failed"
    assert re.fullmatch(
        r"ProgramFailed: the program raised RuntimeError: frame 2 is corrupt \(a failure of the program itself\) "
        r"after \d calls of its model \(its traceback: passes/timing/worker.log\); the passes after it were not "
        r"run: the program failed before its first measured call, as it would again",
        timing["error"],
    ), timing["error"]
    assert "layers" not in run["passes"]
    log = (out / "passes/timing/worker.log").read_text()
    assert "Traceback (most recent call last)" in log and 'fails.py", line' in log
    assert "RuntimeError: frame 2 is corrupt" in log
    text = " ".join((done.stdout + done.stderr).split())
    assert "pass timing failed: ProgramFailed: the program raised RuntimeError" in text
    assert run["status"] == "partial"


@pytest.mark.slow
def test_a_program_that_fails_after_its_measured_calls_keeps_them_and_the_later_passes(tmp_path: Path) -> None:
    """The later pass is the layers pass of sysstat, not of flops, whose FLOP count cost its worker 1.5 CPU-s more
    (and is not read here)."""
    out = tmp_path / "run"
    options = ["--only", "timing,sysstat", "--program-end", "run", *SHORT]
    done = collect(out, options, [program("fails"), "--after", "8", "--exit-code", "7"])
    assert done.returncode == 1, done.stdout + done.stderr
    run = run_doc(out)
    for name in ("timing", "layers"):
        assert run["passes"][name]["status"] == "failed"
        assert re.search(r"the program exited with status 7 after \d+ calls of its model", run["passes"][name]["error"])
    assert measured_forwards(out, "timing") == 3
    assert run["stages"]["forward"]["n"] == 3


@pytest.mark.slow
def test_two_root_models_are_named_with_the_option_and_the_option_picks_one(tmp_path: Path) -> None:
    out = tmp_path / "ambiguous"
    done = collect(out, ONE_PASS, [program("two_models")])
    assert done.returncode == 2, done.stdout + done.stderr
    lines = error_lines(done.stderr)
    assert len(lines) == 1
    assert "the program calls 2 torch modules repeatedly at the outermost level: " in lines[0]
    assert "refiner (Sequential)" in lines[0] and "detector (DetectionModel)" in lines[0]
    assert "name the model with --program-model NAME" in lines[0]
    picked = tmp_path / "picked"
    done = collect(picked, [*ONE_PASS, "--program-model", "detector"], [program("two_models")])
    assert done.returncode == 0, done.stdout + done.stderr
    found = run_doc(picked)["passes"]["timing"]["program"]
    assert found["model"] == "detector" and found["why"] == "named with --program-model"
    # the other model is a stage of its own, named as the program names it, with its true count: once per frame, as
    # the detector (1 choosing it, 1 warm-up, 3 measured); it was counted until the warm-up's end (2), its time in
    # "other"
    assert found["other_roots"] == {"refiner (Sequential)": found["calls"]} and found["calls"] == 5, found
    assert found["other_model_stages"] == {"refiner": "refiner (Sequential)"}
    refiner = run_doc(picked)["collectors"]["timing"]["summary"]["stages"]["refiner"]
    assert refiner["n"] == 3 and refiner["p50_ms"] > 0, refiner


@pytest.mark.slow
def test_a_program_that_needs_stdin_exits_on_the_end_of_file_it_reads(tmp_path: Path) -> None:
    """stdin.py --strict exits 3 on end of file; that it reads end of file whatever hwprof was given, and the note
    that says so, are test_program_own_changes' (one collect of stdin.py for both)."""
    strict = tmp_path / "strict"
    done = collect(strict, ONE_PASS, [program("stdin"), "--strict"])
    assert done.returncode == 1
    assert "the program exited with status 3 before any model" in " ".join(done.stderr.split())


@pytest.mark.slow
def test_a_program_that_runs_forever_is_stopped_after_its_measured_calls(tmp_path: Path) -> None:
    out = tmp_path / "run"
    mark = tmp_path / "served"
    done = collect(out, ONE_PASS, [program("forever"), "--mark", str(mark)])
    assert done.returncode == 0, done.stdout + done.stderr
    found = run_doc(out)["passes"]["timing"]["program"]
    assert found["ended"] == "stopped after the measured calls" and found["measured_calls"] == 3
    # the calls that returned: the one that chose the model, the warm-up and the measured ones but the last,
    # inside which the program was stopped (it served no request after it)
    assert int(mark.read_text()) == 1 + found["warmup_calls"] + found["measured_calls"] - 1


@pytest.mark.slow
def test_a_forever_program_left_to_run_is_ended_by_the_pass_timeout_keeping_its_measured_calls(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    mark = tmp_path / "served"
    # the pass's worker reached the program's 7th request (1 choosing the model, 1 warm-up, 3 measured, 2 after) in
    # at most 5.1 s with two CPU-bound processes beside it on this 2-CPU host (4.5 s from the collect's start on one
    # pinned CPU at load 5): 12 s leaves more than twice that. After its 7th request the program waits 0.2 s for
    # each next one (--quiet-after): spinning a CPU until the time-out cost 4 CPU-s (16 s: 4 more)
    options = [*ONE_PASS, "--threads", "1", "--program-end", "run", "--timeout", "12"]
    done = collect(out, options, [program("forever"), "--mark", str(mark), "--quiet-after", "7"])
    assert done.returncode == 1, done.stdout + done.stderr
    run = run_doc(out)
    assert run["passes"]["timing"]["status"] == "timeout"
    assert run["passes"]["timing"]["program"]["ended"] == "stopped by a signal after its measured calls"
    assert measured_forwards(out, "timing") == 3
    assert run["stages"]["forward"]["n"] == 3
    assert int(mark.read_text()) > 2 + 1 + 3  # it served on after the measured calls


def _check_schedule(out: Path, pass_name: str, ended: str) -> None:
    """The pass's markers hold its schedule and nothing else (no child's): one begin and one end per warm-up,
    measured and clean call, and a measured forward per measured call (at least --iters)."""
    found = run_doc(out)["passes"][pass_name]["program"]
    assert found["ended"] == ended
    rows = [json.loads(line) for line in (out / "passes" / pass_name / "markers.jsonl").read_text().splitlines()]
    kinds = [(r[0], r[1]) for r in rows]
    iterations = found["warmup_calls"] + found["measured_calls"] + found["clean_calls"]
    # one more where the program ended during the schedule: the iteration it opened after its last call
    assert kinds.count(("iteration", "B")) == kinds.count(("iteration", "E")) in (iterations, iterations + 1)
    assert measured_forwards(out, pass_name) == found["measured_calls"] >= 3


@pytest.mark.slow
def test_forked_and_started_children_run_undisturbed_and_perf_follows_them(tmp_path: Path) -> None:
    """The program forks a child that calls the same model (during the measured calls) and starts a Python
    subprocess: neither is marked nor stopped by hwprof, and perf's kernels pass samples both."""
    out, report = tmp_path / "run", tmp_path / "children.json"
    options = ["--only", "timing,perf_sampling", "--perf-rate", "200", *SHORT]
    done = collect(out, options, [program("child_process"), "--report", str(report)])
    assert done.returncode == 0, done.stdout + done.stderr
    children = json.loads(report.read_text())  # written by the kernels pass's run, the last
    assert children["fork"] == 0, children  # 5: one of its model calls raised (hwprof's stop, say)
    assert children["subprocess"] == [0, "ok"]
    for name in ("timing", "kernels"):
        _check_schedule(out, name, "stopped after the measured calls")
    kernels = json.loads((out / "passes/kernels/perf_sampling.kernels.json").read_text())
    tids = {int(tid) for table in kernels["stages"].values() for tid in table["threads"]}
    assert {children["pids"]["fork"], children["pids"]["subprocess"]} <= tids, (children, tids)


@pytest.mark.slow
def test_dataloader_workers_fork_under_the_counters_and_the_program_runs_to_its_end(tmp_path: Path) -> None:
    out = tmp_path / "run"
    options = ["--only", "timing,perf_events", "--program-end", "run", *SHORT]
    done = collect(out, options, [program("batch"), "--workers", "2", "--batches", "14"])
    assert done.returncode == 0, done.stdout + done.stderr
    run = run_doc(out)
    for name in ("timing", "layers"):
        assert "loaded by 2 worker process(es)" in (out / "passes" / name / "worker.log").read_text()
        # the layers pass's schedule (perf_events' wish, more than --iters) may outlast the program's batches
        ended = "ran to its end" if name == "timing" else run["passes"][name]["program"]["ended"]
        assert re.fullmatch(r"ran to its end|ended after \d+ of its \d+ measured calls", ended), ended
        _check_schedule(out, name, ended)
    assert run["collectors"]["perf_events"]["status"] == "ok", run["collectors"]["perf_events"]
    assert layer_names(out) == [f"model.{i}" for i in range(23)]


@pytest.mark.slow
def test_a_video_pipeline_written_by_the_test_is_measured_frame_by_frame(tmp_path: Path) -> None:
    clip = tmp_path / "clip.mp4"
    made = subprocess.run(
        [sys.executable, program("video"), str(clip), "--make", "--frames", "16"], capture_output=True, text=True
    )
    assert made.returncode == 0 and clip.stat().st_size > 0, made.stderr
    out = tmp_path / "run"
    done = collect(out, [*ONE_PASS, "--program-end", "run"], [program("video"), str(clip), "--img-size", "64"])
    assert done.returncode == 0, done.stdout + done.stderr
    found = run_doc(out)["passes"]["timing"]["program"]
    assert found["ended"] == "ran to its end" and found["measured_calls"] == 3
    assert "16 frames written to" in (out / "passes/timing/worker.log").read_text()
    assert (tmp_path / "clip-detected.mp4").stat().st_size > 0


@pytest.mark.slow
def test_a_traced_model_is_measured_as_a_whole_and_says_why_no_layer(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = collect(out, ONE_PASS, [program("traced"), "--img-size", "64", "--frames", "12"])
    assert done.returncode == 0, done.stdout + done.stderr
    found = run_doc(out)["passes"]["timing"]["program"]
    assert found["scripted"] is True and found["measured_calls"] == 3
    assert any("--no-trace" in note for note in found["notes"]), found["notes"]
    assert measured_forwards(out, "timing") == 3
