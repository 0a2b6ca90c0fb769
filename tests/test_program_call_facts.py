"""What a program changes itself between its calls (issue 58): torch's thread count per call, grad mode and a
backward pass after the forward, and its stdin (--program-stdin). Pure logic and in-process runs; the real
collects are in test_program_own_changes.py."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from driver_hooks import ScheduleHooks

from hwprof import stage_api
from hwprof.analysis.program.facts import GRAD_ON, INFERENCE, TRAINING, ProgramFacts, program_facts
from hwprof.analysis.stages import StageRow, Stages
from hwprof.api.requests import program_of
from hwprof.core.markers import MarkerBus, MarkerLog
from hwprof.core.program_spec import ProgramError, ProgramSpec, program_spec
from hwprof.program.call_facts import CLEAN, MEASURED, WARMUP, CallFacts
from hwprof.program.driver import ProgramDriver, ProgramStop
from hwprof.program.finder import ModelFinder
from hwprof.program.known_stages import BACKWARD, known_targets
from hwprof.program.launch import run_program
from hwprof.program.stage_hooks import StageHooks
from hwprof.render.report_sections import end_to_end_note
from hwprof.schema.program import ProgramDoc, ProgramOutcome
from hwprof.schema.run import RunConfigDoc, RunDoc
from hwprof.schema.run_passes import PassDoc


@pytest.fixture
def threads():
    """torch's thread count put back after the test."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_call_facts_record_the_thread_count_and_grad_mode_each_call_ran_under(threads) -> None:
    facts = CallFacts()
    torch.set_num_threads(1)
    with torch.inference_mode():
        facts.record(warmup=True, measured=False)
        facts.record(warmup=False, measured=True)
    torch.set_num_threads(2)
    facts.record(warmup=False, measured=True)  # grad on
    with torch.no_grad():
        facts.record(warmup=False, measured=False)
    assert facts.thread_counts(MEASURED) == {"1": 1, "2": 1} and facts.thread_counts(WARMUP) == {"1": 1}
    assert facts.thread_counts(CLEAN) == {"2": 1}
    assert facts.grad == {MEASURED: 1} and facts.inference_mode == {WARMUP: 1, MEASURED: 1}
    assert facts.calls == {WARMUP: 1, MEASURED: 2, CLEAN: 1}


def test_the_driver_keeps_each_marked_calls_thread_count_and_grad_mode(threads) -> None:
    """A program that sets 1 then 2 threads in turn, under inference_mode for its warm-up and grad on after."""
    bus, log = MarkerBus(), MarkerLog()
    bus.keep_spans(log)
    steps = [(True, 0), (False, 0), (False, 1), (True, 1)]
    driver = ProgramDriver(bus, ScheduleHooks(steps), warmup=2)
    finder = ModelFinder(on_found=driver.adopt)
    driver.on_warmup_end = finder.close
    finder.install()
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())
    try:
        for i in range(20):
            torch.set_num_threads(1 + i % 2)
            with torch.inference_mode(i < 4):  # the 2 choosing calls and the 2 warm-up
                model(torch.zeros(1, 3, 8, 8))
    except ProgramStop:
        pass
    finally:
        finder.close()
        driver.finish()
    facts = driver.facts
    assert facts.calls == {WARMUP: 2, MEASURED: 2, CLEAN: 2}
    assert facts.thread_counts(WARMUP) == {"1": 1, "2": 1} and facts.thread_counts(MEASURED) == {"1": 1, "2": 1}
    assert facts.inference_mode == {WARMUP: 2} and facts.grad == {MEASURED: 2, CLEAN: 2}


def test_backward_is_a_known_stage_and_a_backward_inside_another_is_marked_once() -> None:
    targets = [t for t in known_targets() if t.stage == BACKWARD]
    assert {(t.module, t.attr) for t in targets} == {
        ("torch", "Tensor.backward"),
        ("torch.autograd", "backward"),
        ("torch.autograd", "grad"),
    }
    hooks = StageHooks(targets)
    hooks.install()
    seen: list[tuple[str, str]] = []
    depth = [0]

    def sink(name: str, phase: str) -> None:  # the driver marks the outermost alone
        depth[0] += 1 if phase == "B" else -1
        if (phase == "B" and depth[0] == 1) or (phase == "E" and depth[0] == 0):
            seen.append((name, phase))

    previous = stage_api.set_sink(sink)
    try:
        x = torch.ones(3, requires_grad=True)
        (x * 2).sum().backward()
        torch.autograd.grad((x * 3).sum(), x)
    finally:
        stage_api.set_sink(previous)
        hooks.close()
    assert seen == [(BACKWARD, "B"), (BACKWARD, "E")] * 2
    assert not hasattr(torch.Tensor.backward, "__wrapped__")  # put back


def _row(name: str, p50: float) -> StageRow:
    return StageRow(name, 10, p50, p50, p50, p50, 0.0, None, 1e3 / p50)


def _stages(*names_p50: tuple[str, float]) -> Stages:
    rows = [_row(n, p) for n, p in names_p50]
    whole = sum(p for _, p in names_p50)
    return Stages([*rows, _row("iteration", whole)], "timing", 1, 1e3 / whole, None)


def _run(outcome: ProgramOutcome | None, threads: int = 2) -> RunDoc:
    program = ProgramDoc.of(argv=["train.py"], cwd="/w")
    passes = {"timing": PassDoc.of(status="ok", program=outcome)} if outcome is not None else {}
    return RunDoc.of(status="complete", config=RunConfigDoc.of(threads=threads, program=program), passes=passes)


def test_the_programs_thread_counts_are_said_where_they_differ_from_threads_or_vary() -> None:
    assert ProgramFacts(2).threads_text() == "2 torch threads"  # an older run, or the built-in pipeline
    assert ProgramFacts(2, {2: 10}, 10).threads_text() == "2 torch threads"
    varied = ProgramFacts(2, {2: 10, 1: 10}, 20)
    assert varied.threads_set
    assert varied.threads_text() == "torch threads set by the program: 1 (10 measured calls), 2 (10)"
    assert ProgramFacts(2, {4: 1}, 1).threads_text() == "torch threads set by the program: 4 (1 measured call)"
    outcome = ProgramOutcome.of(measured_calls=10, torch_threads={"1": 5, "2": 5}, grad_calls=0)
    facts = program_facts(_run(outcome), _stages(("forward", 10.0)))
    assert facts.threads == {1: 5, 2: 5} and facts.mode == INFERENCE


def test_a_backward_stage_makes_a_training_step_and_grad_alone_says_grad_was_on() -> None:
    trained = ProgramOutcome.of(measured_calls=10, torch_threads={"2": 10}, grad_calls=10)
    stages = _stages(("forward", 20.0), ("backward", 30.0), ("other", 2.0))
    facts = program_facts(_run(trained), stages)
    assert facts.mode == TRAINING and facts.step_fps(1, 20.0) == pytest.approx(20.0)
    assert "a training step, not an inference" in (facts.grad_text() or "")
    note = end_to_end_note(stages, facts)
    assert note.startswith("FPS: forward + backward 20.00 (batch / (forward p50 + backward p50)")
    assert "inference" not in note.replace("not an inference", "")
    grad = program_facts(_run(trained), _stages(("forward", 20.0), ("other", 2.0)))
    assert grad.mode == GRAD_ON and "grad mode was on (10 of 10 measured calls" in (grad.grad_text() or "")
    note = end_to_end_note(_stages(("forward", 20.0), ("other", 2.0)), grad)
    assert note.startswith("FPS: forward with grad on 50.00 (forward alone; its forwards recorded autograd graphs")
    inference = program_facts(_run(ProgramOutcome.of(measured_calls=10, grad_calls=0)), stages)
    assert inference.grad_text() is not None  # a backward stage is a training step whatever the record says
    assert program_facts(_run(None), _stages(("forward", 20.0))).grad_text() is None
    assert end_to_end_note(_stages(("forward", 20.0))).startswith("FPS: inference 50.00 (forward alone)")


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_program_stdin_is_a_readable_file_checked_up_front(tmp_path: Path) -> None:
    script = _script(tmp_path, "pass\n")
    (tmp_path / "in.txt").write_text("5\n")
    spec = program_spec(["python", str(script)], cwd=str(tmp_path), stdin="in.txt")
    assert spec.stdin == str(tmp_path / "in.txt") and ProgramSpec.from_dict(spec.to_dict()) == spec
    assert "stdin" not in program_spec(["python", str(script)], cwd=str(tmp_path)).to_dict()  # older readers
    with pytest.raises(ProgramError, match=r"--program-stdin missing\.txt does not exist"):
        program_spec(["python", str(script)], cwd=str(tmp_path), stdin="missing.txt")
    with pytest.raises(ProgramError, match="is a directory"):
        program_spec(["python", str(script)], cwd=str(tmp_path), stdin=".")
    if os.geteuid() != 0:  # root reads any file
        (tmp_path / "locked.txt").write_text("1\n")
        (tmp_path / "locked.txt").chmod(0)
        with pytest.raises(ProgramError, match="cannot be read"):
            program_spec(["python", str(script)], cwd=str(tmp_path), stdin="locked.txt")
    with pytest.raises(ValueError, match="--program-stdin is for a program"):
        program_of(None, stdin="in.txt")


def test_program_stdin_feeds_each_run_of_the_program_from_the_files_start(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        """
        import os, sys
        with open("seen.txt", "a") as out:
            out.write(sys.stdin.readline().strip() + "|" + os.read(0, 10).decode() + ";")
        """,
    )
    (tmp_path / "in.txt").write_text("5\n6\n")
    spec = program_spec(["python", str(script)], cwd=str(tmp_path), stdin="in.txt")
    saved = os.dup(0)
    try:
        ends = [run_program(spec) for _ in range(2)]
    finally:
        os.dup2(saved, 0)
        os.close(saved)
    assert all(e.how == "returned" and not e.stdin_eof for e in ends)
    # its sys.stdin reads the file from its start each time; fd 0 (a child process's stdin) is the same file
    assert (tmp_path / "seen.txt").read_text() in ("5|;5|;", "5|6\n;5|6\n;")
    assert sys.stdin is not None
