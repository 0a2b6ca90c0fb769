"""What a run records of its workload (issue 45): each forward's input shape per pass and what the report says of
it, a paired cost that compares like with like, every call of a program's model accounted for, run.json without
the built-in options a program did not use, a program's own ends (os._exit, a fatal signal to itself) seen, and
stdin's end of file noticed. Pure logic; the real collects are in test_program_ends.py."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import NoReturn

import pytest

from hwprof.analysis.paired_cost import like_with_like, paired_cost
from hwprof.analysis.workload_program import program_lines
from hwprof.core.config import PIPELINE_ONLY, RunConfig
from hwprof.core.input_shapes import InputTally, input_shape
from hwprof.core.markers import MarkerBus
from hwprof.core.program_spec import ProgramSpec
from hwprof.program.launch import run_program
from hwprof.program.own_end import OwnEnd, OwnEndHooks
from hwprof.render.input_lines import flops_shape_note, input_lines, run_shapes
from hwprof.schema.inputs import InputsDoc, inputs_doc
from hwprof.schema.pass_files import PassResult
from hwprof.schema.program import ProgramDoc, ProgramOutcome
from hwprof.schema.run import RunConfigDoc, RunDoc
from hwprof.schema.run_passes import PassDoc
from hwprof.session.outcome import pass_status

A, B = "1x3x320x256", "1x3x192x320"


def _tally(shapes: list[str], clean: list[str] | None = None) -> InputTally:
    """One warm-up of the first shape, then measured iterations of `shapes` (and clean ones), as the bus files
    them."""
    bus = MarkerBus()
    bus.iteration, bus.warmup = -1, True
    bus.input_shape(shapes[0])
    bus.warmup = False
    for i, shape in enumerate(shapes):
        bus.iteration, bus.clean = i, False
        bus.input_shape(shape)
    for i, shape in enumerate(clean or []):
        bus.iteration, bus.clean = i, True
        bus.input_shape(shape)
    return bus.inputs


def test_input_shape_is_the_first_tensor_of_a_call() -> None:
    torch = pytest.importorskip("torch")
    assert input_shape((torch.zeros(1, 3, 64, 96),)) == "1x3x64x96"
    assert input_shape(([torch.zeros(2, 3, 32, 32)], {"x": torch.zeros(1)})) == "2x3x32x32"
    assert input_shape(({"image": torch.zeros(1, 3, 8, 8)},)) == "1x3x8x8"
    assert input_shape((3, "text")) is None


def test_one_shape_is_recorded_without_its_iterations() -> None:
    tally = _tally([A, A, A])
    doc = inputs_doc(tally.calls, tally.measured, tally.clean)
    assert doc is not None and not doc.mixed
    assert doc.shapes[A].warmup == 1 and doc.shapes[A].measured == 3 and doc.measured is None
    assert doc.text() == f"{A} (1 warm-up, 3 measured)"
    assert inputs_doc({}, {}, {}) is None


def test_two_shapes_are_recorded_with_each_iterations_shape() -> None:
    tally = _tally([A, B, A], clean=[B, B, A])
    doc = inputs_doc(tally.calls, tally.measured, tally.clean)
    assert doc is not None and doc.mixed and list(doc.shapes) == [A, B]
    assert (doc.shapes[A].warmup, doc.shapes[A].measured, doc.shapes[A].clean) == (1, 2, 1)
    assert (doc.shapes[B].warmup, doc.shapes[B].measured, doc.shapes[B].clean) == (0, 1, 2)
    measured, clean = InputsDoc.from_json(doc.to_json(), "result.json").by_iteration()
    assert measured == {0: A, 1: B, 2: A} and clean == {0: B, 1: B, 2: A}


ON = {0: 10.0, 1: 10.0, 2: 20.0, 3: 20.0}
OFF = {0: 5.0, 1: 5.0, 2: 10.0, 3: 10.0}


def test_a_paired_cost_leaves_out_the_blocks_that_mixed_shapes() -> None:
    shapes = ({0: A, 1: A, 2: A, 3: B}, {0: A, 1: A, 2: B, 3: B})
    on, off, note = like_with_like(ON, OFF, shapes)
    assert on == {0: 10.0, 1: 10.0} and off == {0: 5.0, 1: 5.0}
    assert note.startswith("1 of its 2 ABBA blocks mixed input shapes")
    figure = paired_cost(ON, OFF, shapes)
    assert figure is not None and figure.blocks == 1 and figure.shapes == note
    assert "shapes" in figure.to_dict()


def test_a_paired_cost_whose_every_block_mixed_shapes_says_so() -> None:
    shapes = ({0: A, 1: B, 2: A, 3: B}, {0: B, 1: A, 2: B, 3: A})
    figure = paired_cost(ON, OFF, shapes)
    assert figure is not None and figure.blocks == 2
    assert figure.shapes.startswith("mixed shapes: each of its 2 ABBA blocks")


def test_a_paired_cost_of_one_shape_per_block_is_unchanged() -> None:
    same = paired_cost(ON, OFF)
    shapes = ({0: A, 1: A, 2: B, 3: B}, {0: A, 1: A, 2: B, 3: B})
    figure = paired_cost(ON, OFF, shapes)
    assert same is not None and figure is not None
    assert figure.block_ratios == same.block_ratios and figure.shapes == ""
    assert "shapes" not in figure.to_dict()  # a single-shape run's figure reads as it always did


def _run(passes: dict[str, PassDoc], program: bool = True) -> RunDoc:
    config = RunConfigDoc.of(program=ProgramDoc.of(argv=["detect.py"], cwd="/w")) if program else RunConfigDoc()
    return RunDoc.of(status="complete", config=config, passes=passes)


def _pass(inputs: InputTally | None = None, program: ProgramOutcome | None = None) -> PassDoc:
    entry = PassDoc.of(status="ok")
    if inputs is not None:
        entry.update(inputs=inputs_doc(inputs.calls, inputs.measured, inputs.clean))
    if program is not None:
        entry.update(program=program)
    return entry


def test_the_header_gives_each_shape_with_its_forwards_per_pass() -> None:
    run = _run({"timing": _pass(_tally([A, A, A])), "layers": _pass(_tally([A, B], clean=[B, A]))})
    assert run_shapes(run) == {A: {"timing": 4, "layers": 3}, B: {"layers": 2}}
    lines = dict(input_lines(run))
    assert lines["inputs"].startswith(f"{A} (timing 4, layers 3) · {B} (layers 2)")
    assert flops_shape_note(run, A) == f" (counted at this shape only; the forwards also had {B})"


def test_the_flops_of_each_shape_are_said_where_the_run_counted_them() -> None:
    from hwprof.schema.run import CollectorEntry
    from hwprof.schema.summaries_cpu import FlopsSummary

    run = _run({"timing": _pass(_tally([A, B]))})
    summary = FlopsSummary.of(total_flops=2e9, flops_by_shape={A: 2_000_000_000, B: 1_500_000_000})
    run.collectors["flops"] = CollectorEntry.of(status="ok", summary=summary)
    assert (
        flops_shape_note(run, A)
        == f" (the forwards had other shapes too: 1.50 GFLOPs at {B}; the layer table's FLOPs are at {A})"
    )


def test_one_shape_adds_no_line_whichever_the_workload() -> None:
    for program in (True, False):
        run = _run({"timing": _pass(_tally([A, A]))}, program=program)
        assert "inputs" not in dict(input_lines(run))
        assert flops_shape_note(run, A) == ""


def test_the_calls_line_accounts_for_every_call() -> None:
    outcome = ProgramOutcome.of(
        calls=16,
        before_calls=2,
        traced_calls=2,
        warmup_calls=2,
        measured_calls=10,
        ended="stopped after the measured calls",
    )
    line = dict(program_lines(_run({"timing": _pass(program=outcome)})))["calls"]
    assert line == (
        "timing: 16 calls (2 choosing the model, 2 inside torch.jit.trace, 2 warm-up, 10 measured), "
        "stopped after the measured calls"
    )
    older = ProgramOutcome.of(calls=14, warmup_calls=2, measured_calls=10, ended="ran to its end")
    assert "(2 warm-up, 10 measured, 2 other)" in dict(program_lines(_run({"timing": _pass(program=older)})))["calls"]


def test_run_json_leaves_out_the_pipeline_options_a_program_did_not_use() -> None:
    doc = RunConfig(program=ProgramSpec(argv=["detect.py"], cwd="/w")).recorded()
    program = doc.to_json()
    assert not set(PIPELINE_ONLY) & set(program) and program["iters"] == 20
    builtin = RunConfig().recorded()
    assert builtin.imgsz == 640 and builtin.extra == {}
    assert doc.imgsz is None and doc.batch is None and "imgsz" not in program
    assert RunConfig.from_dict(doc.to_json()).imgsz == 640  # a reader that rebuilds the config gets its defaults


def test_a_worker_that_exits_0_without_its_result_fails_its_pass(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    log.write_text("")
    status, error = pass_status("ok", "", PassResult.of(), 0, log)
    assert status == "failed" and error == "the worker exited with code 0 without writing its result (result.json)"
    assert pass_status("ok", "", PassResult.of(status="ok"), 0, log) == ("ok", "")


class Ended(Exception):
    def __init__(self, end: OwnEnd) -> None:
        self.end = end


def _raise(end: OwnEnd) -> NoReturn:
    raise Ended(end)


def _handler(signum: int, frame: object) -> None:
    return None


def test_a_programs_own_ends_reach_the_pass_and_harmless_signals_pass_through() -> None:
    hooks = OwnEndHooks(_raise, _handler)
    old = signal.signal(signal.SIGUSR1, _handler)
    hooks.install()
    try:
        with pytest.raises(Ended) as ended:
            os._exit(3)
        assert ended.value.end == OwnEnd("os_exit", code=3) and ended.value.end.text() == "called os._exit(3)"
        hooks.install()
        with pytest.raises(Ended) as ended:
            os.kill(os.getpid(), signal.SIGUSR1)  # hwprof's own handler would take it for a stop from outside
        assert ended.value.end.text() == "sent itself SIGUSR1"
        hooks.install()
        os.kill(os.getpid(), 0)  # no signal: a liveness check
        signal.signal(signal.SIGUSR1, lambda s, f: None)  # the program's own handler: its signal, its business
        os.kill(os.getpid(), signal.SIGUSR1)
        assert hooks.fatal(signal.SIGKILL) and not hooks.fatal(signal.SIGCHLD)
        signal.signal(signal.SIGUSR2, signal.SIG_DFL)
        assert hooks.fatal(signal.SIGUSR2)
    finally:
        hooks.close()
        signal.signal(signal.SIGUSR1, old)
    assert os._exit.__name__ == "_exit" and os.kill.__module__ in ("posix", "os", "nt")


@pytest.mark.parametrize(("reads", "eof"), [(True, True), (False, False)], ids=["reads", "does-not-read"])
def test_stdin_end_of_file_is_noticed(tmp_path: Path, reads: bool, eof: bool) -> None:
    script = tmp_path / "prog.py"
    script.write_text("import sys\nline = sys.stdin.readline()\n" if reads else "x = 1\n")
    saved = os.dup(0)
    try:
        end = run_program(ProgramSpec(argv=[str(script)], cwd=str(tmp_path)))
    finally:
        os.dup2(saved, 0)
        os.close(saved)
    assert end.how == "returned" and end.stdin_eof is eof
    assert sys.stdin is not None
