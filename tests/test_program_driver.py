"""A user's program in-process: the model found at its calls, its calls turned into iterations, the program run as
the interpreter would run it. Real torch modules and real scripts; no collector."""

from __future__ import annotations

import contextlib
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from hwprof.core.markers import MarkerBus, MarkerLog, layer_types
from hwprof.core.program_spec import ProgramError, ProgramSpec, program_spec
from hwprof.program.driver import ProgramDriver, ProgramStop
from hwprof.program.finder import AmbiguousModel, Found, ModelFinder, ProgramAbort, layer_root
from hwprof.program.launch import run_program
from hwprof.program.pipeline import model_device_sync


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


class Wrapper(torch.nn.Module):
    """AutoBackend-like: the YOLO model one `.model` below."""

    def __init__(self) -> None:
        super().__init__()
        self.model = Tiny()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


class Plain(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = torch.nn.Conv2d(3, 4, 3)
        self.head = torch.nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


class Hooks:
    """The pass's side of the driver, recording what it was told."""

    def __init__(self, steps: list[tuple[bool, int]]) -> None:
        self.steps = steps
        self.events: list[str] = []
        self.found: Found | None = None

    def model_found(self, found: Found, sample: tuple[Any, ...]) -> list[tuple[bool, int]]:
        self.found = found
        self.events.append(f"found {tuple(sample[0].shape)}")
        found.module(sample[0])  # hwprof's own forward (the layer table): neither counted nor marked
        return self.steps

    def start_measuring(self) -> None:
        self.events.append("start")

    def set_clean(self, clean: bool) -> None:
        self.events.append(f"clean {clean}")

    def after_measured(self, iteration: int) -> None:
        self.events.append(f"measured {iteration}")

    def after_step(self) -> None:
        pass

    def stop_measuring(self) -> None:
        self.events.append("stop")

    def discard_iteration(self, iteration: int) -> None:
        self.events.append(f"discard {iteration}")


def _drive(
    calls: int, steps: list[tuple[bool, int]], warmup: int = 1, end: str = "stop", model_path: str | None = None
) -> tuple[ProgramDriver, Hooks, MarkerLog, ModelFinder, int]:
    bus, log, hooks = MarkerBus(), MarkerLog(), Hooks(steps)
    bus.keep_spans(log)
    driver = ProgramDriver(bus, hooks, warmup, end=end)
    finder = ModelFinder(on_found=driver.adopt, model_path=model_path)
    driver.on_warmup_end = finder.close
    finder.install()
    model = Tiny()
    other = torch.nn.ReLU()
    done = 0
    try:
        with torch.no_grad():
            other(torch.zeros(1))  # a one-off call: not a model
            for _ in range(calls):
                model(torch.zeros(1, 3, 8, 8))
                done += 1
    except ProgramStop:
        pass
    finally:
        finder.close()
        driver.finish()
    return driver, hooks, log, finder, done


def test_the_model_is_the_outermost_module_called_repeatedly_and_its_calls_become_iterations() -> None:
    steps = [(True, 0), (False, 0), (False, 1), (True, 1)]
    driver, hooks, log, finder, done = _drive(calls=20, steps=steps, warmup=2)
    assert hooks.found is not None and hooks.found.name == "model" and hooks.found.layers_from.startswith("model.model")
    assert hooks.found.why == "the outermost torch module the program calls repeatedly"
    # 2 calls find it, 2 warm-up, 4 scheduled steps; then the program is stopped inside its 8th call
    assert done == 7 and driver.calls.before == 2 and driver.calls.total == 6
    assert (driver.calls.warmup, driver.calls.measured, driver.calls.clean) == (2, 2, 2)
    iterations = [(m.iteration, m.warmup, m.clean) for m in log.markers if m.kind == "iteration" and m.phase == "B"]
    assert iterations == [(-2, True, False), (-1, True, False), (0, False, False), (0, False, True), (1, False, True),
                          (1, False, False)]  # fmt: skip
    forwards = [m for m in log.markers if m.name == "forward"]
    assert len(forwards) == 12  # each marked call once: hwprof's own forward in model_found is not
    assert hooks.events == ["found (1, 3, 8, 8)", "start", "measured 0", "clean True", "clean False", "clean True",
                            "clean False", "measured 1", "stop"]  # fmt: skip
    # an iteration runs from one forward's end to the next one's end
    first_end = next(m.t_ns for m in log.markers if m.name == "forward" and m.phase == "E")
    second_begin = [m for m in log.markers if m.kind == "iteration" and m.phase == "B"][1].t_ns
    assert second_begin >= first_end
    assert finder.other_roots() == {"other (ReLU)": 1}


def test_run_to_the_end_leaves_later_calls_unmarked() -> None:
    driver, _, log, _, done = _drive(calls=9, steps=[(True, 0), (True, 1)], end="run")
    assert done == 9 and driver.done and driver.calls.measured == 2
    assert driver.calls.after == 9 - 2 - 3 and driver.calls.seen == 9
    assert sum(1 for m in log.markers if m.name == "forward" and m.phase == "B") == 3


def test_a_program_that_ends_early_says_how_many_calls_it_measured() -> None:
    driver, hooks, log, _, done = _drive(calls=4, steps=[(True, i) for i in range(5)])
    assert done == 4 and driver.calls.measured == 1 and hooks.events[-2:] == ["discard 1", "stop"]
    assert driver.calls.tail  # the program ended inside iteration 1, after its last forward
    begins = sum(1 for m in log.markers if m.kind == "iteration" and m.phase == "B")
    ends = sum(1 for m in log.markers if m.kind == "iteration" and m.phase == "E")
    assert begins == ends  # the iteration left open when the program ended is closed


def test_named_model_is_taken_at_its_first_call_at_any_depth() -> None:
    bus, hooks = MarkerBus(), Hooks([(True, 0)])
    driver = ProgramDriver(bus, hooks, 1)
    finder = ModelFinder(on_found=driver.adopt, model_path="wrapper.model")
    finder.install()
    wrapper = Wrapper()
    try:
        with torch.no_grad(), pytest.raises(ProgramStop):
            for _ in range(5):
                wrapper(torch.zeros(1, 3, 8, 8))
    finally:
        finder.close()
    assert (
        hooks.found is not None
        and hooks.found.module is wrapper.model
        and hooks.found.why == "named with --program-model"
    )
    assert driver.calls.before == 1


def test_two_models_called_repeatedly_are_named_with_the_option_that_picks_one() -> None:
    bus, hooks = MarkerBus(), Hooks([(True, i) for i in range(10)])
    driver = ProgramDriver(bus, hooks, 3)
    finder = ModelFinder(on_found=driver.adopt)
    finder.install()
    detector, classifier = Tiny(), Plain()
    x = torch.zeros(1, 3, 8, 8)
    try:
        with torch.no_grad(), pytest.raises(AmbiguousModel) as caught:
            for _ in range(5):
                detector(x)
                classifier(x)
    finally:
        finder.close()
    assert "detector (Tiny), classifier (Plain)" in str(caught.value)
    assert "--program-model" in str(caught.value)


def test_a_model_traced_after_a_dry_run_gives_its_place_to_the_traced_module() -> None:
    """The eager model is called twice before the loop (a dry run, then torch.jit.trace, which calls it once more:
    the tracer's call is not counted); the loop calls the traced module, which takes the eager one's place."""
    bus, log, hooks = MarkerBus(), MarkerLog(), Hooks([(True, i) for i in range(3)])
    bus.keep_spans(log)
    driver = ProgramDriver(bus, hooks, 1)
    finder = ModelFinder(on_found=driver.adopt)
    driver.on_warmup_end = finder.close
    finder.install()
    model, x = Tiny().eval(), torch.zeros(1, 3, 8, 8)
    done = 0
    try:
        with torch.no_grad(), pytest.raises(ProgramStop):
            model(x)  # a library's one-off (ultralytics' fuse() profiles the model)
            model(x)  # the dry run: chosen here
            traced = torch.jit.trace(model, x)
            for _ in range(10):
                traced(x)
                done += 1
    finally:
        finder.close()
        driver.finish()
    assert hooks.found is not None and hooks.found.module is traced and hooks.found.scripted
    assert hooks.found.replaced == "model (Tiny)" and hooks.found.why.endswith(
        "; it replaced model (Tiny), not called since"
    )
    assert driver.calls.traced == 0 and driver.calls.before == 2  # the tracer's calls were the eager model's
    assert (driver.calls.warmup, driver.calls.measured) == (1, 3) and done == 5
    assert sum(1 for m in log.markers if m.name == "forward" and m.phase == "E") == 4
    assert hooks.events[0] == "found (1, 3, 8, 8)"  # set up once, around the traced module


def test_a_module_called_between_the_chosen_ones_calls_is_ambiguous_not_a_replacement() -> None:
    bus, hooks = MarkerBus(), Hooks([(True, i) for i in range(10)])
    driver = ProgramDriver(bus, hooks, 3)
    finder = ModelFinder(on_found=driver.adopt)
    finder.install()
    detector, classifier, x = Tiny(), Plain(), torch.zeros(1, 3, 8, 8)
    try:
        with torch.no_grad(), pytest.raises(AmbiguousModel):
            classifier(x)  # before the detector is chosen: the classifier's calls are not all after it
            detector(x)
            detector(x)
            classifier(x)
    finally:
        finder.close()
    assert hooks.found is None  # nothing set up: the detector was never called after it was chosen


def test_a_model_chosen_and_never_called_again_is_set_up_when_the_program_ends() -> None:
    bus, hooks = MarkerBus(), Hooks([(True, 0)])
    driver = ProgramDriver(bus, hooks, 1)
    finder = ModelFinder(on_found=driver.adopt)
    finder.install()
    model = Tiny()
    try:
        with torch.no_grad():
            model(torch.zeros(1, 3, 8, 8))
            model(torch.zeros(1, 3, 8, 8))
    finally:
        finder.close()
    assert hooks.found is None
    driver.settle()
    driver.finish()
    assert hooks.found is not None and hooks.events == ["found (1, 3, 8, 8)"] and driver.calls.seen == 2


def test_a_never_called_or_never_repeated_model_is_explained() -> None:
    assert "called no torch module" in ModelFinder(on_found=lambda f, a: None).never_found()
    finder = ModelFinder(on_found=lambda f, a: None, model_path="detector.model")
    assert "--program-model detector.model never named" in finder.never_found()


def test_layers_follow_model_to_a_layer_list_or_are_the_top_level_children() -> None:
    wrapper = Wrapper()
    module, how = layer_root(wrapper)
    assert module is wrapper.model and "layer list" in how
    from hwprof.core.markers import layer_modules

    assert [n for n, _, _ in layer_modules(Plain())] == ["model.backbone", "model.head"]
    assert [n for n, _, _ in layer_modules(Tiny())] == ["model.0", "model.1"]


def test_stage_markers_only_between_forwards_inside_an_iteration() -> None:
    bus, log, hooks = MarkerBus(), MarkerLog(), Hooks([(True, 0), (True, 1)])
    bus.keep_spans(log)
    driver = ProgramDriver(bus, hooks, 1, end="run")
    finder = ModelFinder(on_found=driver.adopt)
    finder.install()
    model = Tiny()
    x = torch.zeros(1, 3, 8, 8)
    try:
        with torch.no_grad():
            for _ in range(6):
                driver.stage_sink("load", "B")
                driver.stage_sink("load", "E")
                model(x)
    finally:
        finder.close()
    loads = [m for m in log.markers if m.name == "load"]
    # calls 1-2 find the model; call 3 is the warm-up iteration (its forward alone), whose end opens iteration 0:
    # the loads before calls 4 and 5 are measured; the one before call 6 comes after the schedule, unmarked
    assert len(loads) == 4 and [m.iteration for m in loads] == [0, 0, 1, 1]


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "prog" / "main.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(textwrap.dedent(body))
    return path


def test_the_program_runs_as_the_interpreter_would(tmp_path: Path) -> None:
    (tmp_path / "prog" / "helper.py").parent.mkdir()
    (tmp_path / "prog" / "helper.py").write_text("VALUE = 42\n")
    script = _script(
        tmp_path,
        """
        import os, sys, helper
        data = sys.stdin.read()
        open("seen.txt", "w").write(f"{sys.argv[1:]} {helper.VALUE} {data!r} {__name__}")
        """,
    )
    spec = program_spec(["python", str(script), "--flag", "x"], cwd=str(tmp_path))
    argv_before = list(sys.argv)
    end = run_program(spec)
    assert end.how == "returned" and end.ok
    assert (tmp_path / "seen.txt").read_text() == "['--flag', 'x'] 42 '' __main__"
    assert sys.argv == argv_before


def test_a_failing_program_and_sys_exit_are_told_apart(tmp_path: Path) -> None:
    failing = _script(tmp_path, "raise RuntimeError('frame 3 is bad')\n")
    end = run_program(program_spec(["python", str(failing)], cwd=str(tmp_path)))
    assert end.how == "failed" and end.error == "RuntimeError: frame 3 is bad" and not end.ok
    exiting = _script(tmp_path, "import sys\nsys.exit(3)\n")
    end = run_program(program_spec(["python", str(exiting)], cwd=str(tmp_path)))
    assert end.how == "exit" and end.exit_code == 3 and not end.ok


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ([], "no program after `--`"),
        (["python"], "names no script"),
        (["python", "missing.py"], "missing.py does not exist"),
        (["python", "-c", "print(1)"], "interpreter option -c is not supported"),
        (["python", "-m"], "`-m` names no module"),
        (["/usr/bin/env"], "is not a Python script"),
    ],
)
def test_a_program_that_cannot_run_is_one_line(tmp_path: Path, command: list[str], message: str) -> None:
    with pytest.raises(ProgramError, match=message.replace("(", r"\(")):
        program_spec(command, cwd=str(tmp_path))


def test_the_spec_round_trips_and_names_the_run(tmp_path: Path) -> None:
    script = _script(tmp_path, "pass\n")
    spec = program_spec(["python3", str(script), "a"], cwd=str(tmp_path), model_path="m", end="run")
    assert ProgramSpec.from_dict(spec.to_dict()) == spec and spec.name == "main"
    assert program_spec(["python", "-m", "pkg.detect", "x"], cwd=str(tmp_path)).name == "pkg.detect"


def test_hwprofs_own_failure_in_the_programs_call_is_not_swallowed_by_its_except() -> None:
    class Broken(Hooks):
        def model_found(self, found: Found, sample: tuple[Any, ...]) -> list[tuple[bool, int]]:
            raise TypeError("no tensor argument")

    bus = MarkerBus()
    driver = ProgramDriver(bus, Broken([]), 1)
    finder = ModelFinder(on_found=driver.adopt)
    finder.install()
    model = Tiny()
    try:
        with torch.no_grad(), pytest.raises(ProgramAbort, match="could not set up the model model: no tensor"):
            for _ in range(3):
                with contextlib.suppress(Exception):  # a program's own catch-all
                    model(torch.zeros(1, 3, 8, 8))
    finally:
        finder.close()


def test_a_model_on_another_device_than_the_run_asked_is_one_line_with_the_fix() -> None:
    assert model_device_sync(Tiny(), "cpu") is None
    with pytest.raises(ProgramAbort, match=r"runs its model on cpu, not on cuda: run hwprof with --device cpu"):
        model_device_sync(Tiny(), "cuda")


def test_layer_types_name_the_layers_as_the_markers_do() -> None:
    assert layer_types(Wrapper().model) == {"model.0": "Conv2d", "model.1": "ReLU"}
    assert layer_types(Plain()) == {"model.backbone": "Conv2d", "model.head": "ReLU"}


def test_the_cuda_graph_figure_is_unavailable_for_a_program_with_the_reason() -> None:
    from hwprof.collectors.gpu.cudagraph.collector import CudaGraphCollector

    from hwprof.core.config import RunConfig

    program = ProgramSpec(argv=["prog.py"], cwd="/tmp")
    capability = CudaGraphCollector.probe(RunConfig(device="cuda", program=program))
    assert not capability.available and "calls its own model" in capability.reason
    assert CudaGraphCollector.probe(RunConfig(device="cuda")).available
