"""--program-model NAME is the program's own name: looked up in the program's frames (not a library's, whose
`m` is ultralytics' layer), refused in one line where it gives several modules, and the module measured must be a
whole model's share of the program's call around it (issue 58).

The real runs use tests/programs/named_m.py: a script that binds `m = YOLO("yolov8n.yaml").model.eval()` and calls
it 20 times, while ultralytics' DetectionModel constructor has already called its layer 0 from a frame whose `m`
is that layer."""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

import pytest
import torch
from driver_hooks import ScheduleHooks
from program_runs import SHORT, collect, error_lines, program, run_doc

from hwprof.analysis.workload_program import _found
from hwprof.core.markers import MarkerBus
from hwprof.program.driver import ProgramDriver, ProgramStop
from hwprof.program.finder import AmbiguousModel, ModelFinder
from hwprof.program.program_code import is_library_file
from hwprof.program.whole_model import LOW_CALLS, SMALL_SHARE, OuterCall, WholeModelCheck, WrongModule
from hwprof.schema.program import ProgramOutcome

ONE_PASS = ["--only", "timing", *SHORT]
NAMED_M = [program("named_m"), "--img-size", "96", "--calls", "20"]


@pytest.mark.slow
def test_the_name_is_the_scripts_not_ultralytics_loop_variable(tmp_path: Path) -> None:
    out = tmp_path / "m"
    done = collect(out, [*ONE_PASS, "--program-model", "m"], NAMED_M)
    assert done.returncode == 0, done.stdout + done.stderr
    found = run_doc(out)["passes"]["timing"]["program"]
    assert found["model"] == "m" and found["model_class"] == "DetectionModel", found
    assert re.fullmatch(r".*named_m\.py:\d+", found["model_at"]), found  # the script's line, not ultralytics'
    assert "site-packages" not in found["model_at"]
    assert found["calls"] == found["before_calls"] + found["warmup_calls"] + found["measured_calls"] == 5
    assert "outer_call" not in found  # the program called the model itself: nothing around it to check against
    assert not any("DetectionModel" in label for label in found["other_roots"]), found["other_roots"]
    # the forward measured is the script's call: its median within a factor 2 of the script's own timing
    log = (out / "passes" / "timing" / "worker.log").read_text()
    script_ms = [float(ms) for ms in re.findall(r"^call \d+: ([\d.]+) ms$", log, re.M)]
    assert len(script_ms) == 4, log  # the 5th call was stopped inside
    forward = run_doc(out)["collectors"]["timing"]["summary"]["stages"]["forward"]
    assert forward["p50_ms"] > 0.5 * statistics.median(script_ms[1:]), (forward, script_ms)


@pytest.mark.slow
def test_a_part_of_the_model_is_refused_with_the_module_the_program_calls(tmp_path: Path) -> None:
    """`first` is the script's own name for layer 0 (the module the issue's run measured): it is the program's
    name, unambiguous, but its forward is a few percent of the program's call of m."""
    out = tmp_path / "first"
    done = collect(out, [*ONE_PASS, "--program-model", "first"], NAMED_M)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert re.search(r"the module measured as the model, first \(Conv\) at .*named_m\.py:\d+, took ", lines[0])
    assert re.search(r"program's call of m \(DetectionModel\) at \S*named_m\.py:\d+, which took ", lines[0]), lines[0]
    assert re.search(r"not the whole one; name the module the program calls: --program-model m( |$)", lines[0])
    assert "Traceback" not in done.stderr


def _library_code(source: str, filename: str) -> dict[str, Any]:
    """Functions compiled as if from an installed package's file (a site-packages path): a library's frames."""
    scope: dict[str, Any] = {"__name__": "somelib", "torch": torch}
    exec(compile(source, filename, "exec"), scope)
    return scope


class Layered(torch.nn.Module):
    """A model whose own forward names each layer `m`, as ultralytics' does."""

    def __init__(self, probe: bool = False) -> None:
        super().__init__()
        self.model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Conv2d(4, 4, 1))
        if probe:  # ultralytics' constructor: its forward run once, from __init__, to find the strides
            self.forward(torch.zeros(1, 3, 8, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for m in self.model:
            x = m(x)
        return x


def _run(name: str, program_body: Any) -> tuple[ProgramDriver, ModelFinder, ScheduleHooks]:
    """`program_body()` under a finder for --program-model NAME and a driver (1 warm-up, 3 measured calls)."""
    hooks = ScheduleHooks([(True, i) for i in range(3)])
    driver = ProgramDriver(MarkerBus(), hooks, 1)
    finder = ModelFinder(on_found=driver.adopt, model_path=name)
    driver.on_warmup_end = finder.close
    finder.install()
    try:
        with torch.no_grad():
            program_body()
    except ProgramStop:
        pass
    finally:
        finder.close()
        driver.finish()
    return driver, finder, hooks


def test_a_name_a_library_frame_gives_is_not_the_programs() -> None:
    """The library's constructor calls layer 0 from a frame whose `m` is that layer; the program's `m`, bound after
    it, is the model."""
    lib = _library_code(
        "def build():\n    return Built()\n"
        "class Built(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Conv2d(4, 4, 1))\n"
        "        x = torch.zeros(1, 3, 8, 8)\n"
        "        for m in self.model:\n"
        "            x = m(x)\n"
        "    def forward(self, x):\n"
        "        for m in self.model:\n"
        "            x = m(x)\n"
        "        return x\n",
        "/opt/py/lib/python3.11/site-packages/somelib/tasks.py",
    )
    seen: dict[str, Any] = {}

    def body() -> None:
        m = lib["build"]()
        seen["m"] = m
        for _ in range(10):
            m(torch.zeros(1, 3, 8, 8))

    driver, _, hooks = _run("m", body)
    assert hooks.found is not None and hooks.found.module is seen["m"], hooks.found
    assert hooks.found.at is not None and hooks.found.at.file.endswith("test_program_model_name.py")
    assert driver.calls.measured == 3 and driver.whole is None


def test_a_name_only_a_library_gives_is_never_taken_and_the_line_says_where() -> None:
    lib = _library_code(
        "def run(layers, x):\n    for m in layers:\n        x = m(x)\n    return x\n",
        "/opt/py/lib/python3.11/site-packages/somelib/loop.py",
    )
    layers = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.ReLU())
    _, finder, hooks = _run("m", lambda: [lib["run"](layers, torch.zeros(1, 3, 4, 4)) for _ in range(5)])
    assert hooks.found is None
    line = finder.never_found()
    assert line.startswith("--program-model m never named a module the program called")
    assert line.endswith(
        "; only a library's code named a called module m, at /opt/py/lib/python3.11/site-packages/somelib/loop.py:3 "
        "(its own name, not the program's)"
    )


def test_the_same_name_for_two_modules_in_the_programs_frames_is_refused_with_each_place() -> None:
    small, big = Layered(), Layered()

    def helper(model: torch.nn.Module) -> None:
        model(torch.zeros(1, 3, 8, 8))

    def body() -> None:
        model = big
        helper(small)
        model(torch.zeros(1, 3, 8, 8))

    with pytest.raises(AmbiguousModel) as caught:
        _run("model", body)
    line = str(caught.value)
    assert "\n" not in line
    assert re.fullmatch(
        r"--program-model model names 2 different modules in the program's code: "
        r"\S*test_program_model_name\.py:\d+ \(Layered\), \S*test_program_model_name\.py:\d+ \(Layered\); "
        r"give the model a name no other module of the program has \(or a dotted path to it, such as holder\.model\)",
        line,
    ), line


def test_the_programs_own_model_code_naming_its_layers_m_is_refused_at_the_second_layer() -> None:
    """The program's own model class runs its forward in __init__ (`for m in self.model`), before the script's
    `m = Layered(...)` is bound: its layer 0 is `m` there and is taken, and then its layer 1, called from the same
    line, is `m` too: refused, both at the loop's line."""

    def body() -> None:
        m = Layered(probe=True)
        for _ in range(10):
            m(torch.zeros(1, 3, 8, 8))

    with pytest.raises(AmbiguousModel) as caught:
        _run("m", body)
    assert re.search(
        r"names 2 different modules in the program's code: (\S*test_program_model_name\.py:\d+) \(Conv2d\), \1 "
        r"\(Conv2d\);",
        str(caught.value),
    ), caught.value
    assert Layered.forward.__code__.co_firstlineno + 2 == int(re.findall(r":(\d+) ", str(caught.value))[0])


def test_a_name_the_program_binds_to_its_model_is_no_rival_to_the_names_of_its_parts() -> None:
    """The script's `m` is chosen at its first call; the model's own forward (the program's code here) then calls
    each layer `m`: parts of the chosen model, not rivals."""
    m = Layered()
    driver, _, hooks = _run("m", lambda: [m(torch.zeros(1, 3, 8, 8)) for _ in range(10)])
    assert hooks.found is not None and hooks.found.module is m and driver.calls.measured == 3


def test_a_named_part_is_refused_after_two_low_timed_calls_of_the_module_around_it() -> None:
    """The part (the first conv) takes a few % of the model's call. At 32x32 (about 1 ms a call) it was once taken
    for the model in a fresh clone's pinned phase (6f810be, 2026-11-28: DID NOT RAISE; not reproduced
    alone, pinned, or pinned beside a CPU hog, six runs each); at 128x128 the call is tens of ms, so that a
    preemption inside the part, the likeliest cause, is a smaller share of it."""
    model = Layered()
    model.model.append(torch.nn.Sequential(*[torch.nn.Conv2d(4, 4, 3, padding=1) for _ in range(30)]))
    head = model.model[0]

    def body() -> None:
        assert head is not None  # the program's own name for the part
        for _ in range(10):
            model(torch.zeros(1, 3, 128, 128))

    with pytest.raises(WrongModule) as caught:
        _run("head", body)
    line = str(caught.value)
    assert re.match(r"the module measured as the model, head \(Conv2d\) at \S+:\d+, took [\d.e-]+ ms of the ", line)
    assert re.search(r"program's call of model \(Layered\) at \S+:\d+, which took [\d.e-]+ ms \(\d+\.\d%\)", line)
    assert line.endswith("name the module the program calls: --program-model model")


def test_a_named_inner_model_inside_a_wrapper_is_measured_and_its_share_recorded() -> None:
    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = Layered()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.model(x.float()) + 0

    detector = Wrapper()
    driver, _, hooks = _run("detector.model", lambda: [detector(torch.zeros(1, 3, 16, 16)) for _ in range(10)])
    assert hooks.found is not None and hooks.found.module is detector.model
    assert driver.calls.measured == 3 and driver.whole is not None
    result = driver.whole.result()
    assert result is not None and result[0].startswith("detector (Wrapper) at ") and result[1] >= SMALL_SHARE
    assert "forward" not in detector.__dict__  # the timing wrapper came off


def test_one_disturbed_call_refuses_nothing_and_the_largest_share_is_kept() -> None:
    """A preemption between the model's forward and the rest of the wrapper's call makes one call's share small
    (seen in the suite under load): it is timed again, and the least disturbed call's share is the one kept."""
    check = WholeModelCheck(OuterCall(torch.nn.Identity(), "detector", None), "m (Layered)", lambda: 0)
    check._timed(100_000_000, 1_000_000)  # 1 %: disturbed
    assert check.share == pytest.approx(0.01)
    check._timed(10_000_000, 8_000_000)
    assert check.share == pytest.approx(0.8) and (check.outer_ms, check.model_ms) == (10.0, 8.0)


def test_low_calls_in_a_row_refuse_with_the_largest_share_seen() -> None:
    check = WholeModelCheck(OuterCall(torch.nn.Identity(), "detector", None), "m (Layered)", lambda: 0)
    for _ in range(LOW_CALLS - 1):
        check._timed(10_000_000, 500_000)
    with pytest.raises(WrongModule, match=r"took 0\.9 ms of the program's call of detector \(Identity\), "):
        check._timed(10_000_000, 900_000)
    assert check.share == pytest.approx(0.09)


def test_library_files_are_the_stdlib_and_installed_packages() -> None:
    assert is_library_file(torch.__file__) and is_library_file(re.__file__)
    assert is_library_file("/somewhere/else/dist-packages/pkg/mod.py")
    assert not is_library_file(__file__) and not is_library_file(program("named_m"))


def test_the_header_says_what_was_measured_where_and_how_often() -> None:
    outcome = ProgramOutcome(
        model="detector.model",
        model_class="DetectionModel",
        model_at="detect.py:40",
        why="named with --program-model",
        layers_from="model.model",
        calls=20,
        outer_call="detector (AutoBackend) at detect.py:40",
        outer_share=0.97,
        other_roots={"probe (Conv)": 1},
    )
    assert _found(outcome, "detector.model") == (
        "detector.model (DetectionModel at detect.py:40, 20 calls): named with --program-model; layers: model.model; "
        "called inside the program's call of detector (AutoBackend) at detect.py:40: its forward 97% of it; "
        "also called at the outermost level (counted until the warm-up's end): probe (Conv) x1"
    )
