"""Stages between a program's forwards: the functions hwprof knows by name, --stage, hwprof.stage, and "other".

Real cv2 (a clip written with cv2.VideoWriter and read back), real modules imported after the hooks are in,
the real driver and marker bus; no collector (the slow test at the end runs `hwprof collect` on a program)."""

from __future__ import annotations

import json
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from driver_hooks import ScheduleHooks
from test_perfetto_trace import check as check_trace

import hwprof
from hwprof import stage_api
from hwprof.core.markers import Marker, MarkerBus, MarkerLog
from hwprof.core.program_spec import ProgramError, StageTarget, parse_stage, program_spec
from hwprof.core.spans import OTHER, program_stage_stats, stage_stats
from hwprof.program.driver import ProgramDriver
from hwprof.program.finder import ModelFinder
from hwprof.program.known_stages import known_targets
from hwprof.program.launch import run_program
from hwprof.program.stage_hooks import StageHooks
from hwprof.session.program_pass_runner import program_stages
from hwprof.trace.processor import TraceSession, availability


@pytest.fixture
def seen() -> Iterator[list[tuple[str, str]]]:
    """The gate's sink: every (name, phase) it is given."""
    calls: list[tuple[str, str]] = []
    before = stage_api.set_sink(lambda name, phase: calls.append((name, phase)))
    try:
        yield calls
    finally:
        stage_api.set_sink(before)


def _hooks(*targets: StageTarget, user: bool = False, main_names: tuple[str, ...] = ()) -> StageHooks:
    hooks = StageHooks(list(targets), user=list(targets) if user else [], main_names=main_names)
    hooks.install()
    return hooks


# ----------------------------------------------------------------------------- hwprof.stage


def test_hwprof_stage_without_hwprof_does_nothing_and_with_a_sink_brackets_the_block() -> None:
    assert stage_api.current_sink() is None
    with hwprof.stage("decode") as entered:
        pass
    assert entered.name == "decode"

    @hwprof.stage("nms")
    def nms(x: int) -> int:
        """Doc kept."""
        return x + 1

    assert nms(1) == 2 and nms.__name__ == "nms" and nms.__doc__ == "Doc kept."
    calls: list[tuple[str, str]] = []
    stage_api.set_sink(lambda name, phase: calls.append((name, phase)))
    try:
        with hwprof.stage("decode"):
            assert nms(2) == 3
        with pytest.raises(ValueError), hwprof.stage("fails"):
            raise ValueError("the block's own error passes through")
    finally:
        stage_api.set_sink(None)
    assert calls == [("decode", "B"), ("nms", "B"), ("nms", "E"), ("decode", "E"), ("fails", "B"), ("fails", "E")]


def test_import_hwprof_does_not_import_torch() -> None:
    import subprocess

    code = "import sys, hwprof; hwprof.stage('x'); print('torch' in sys.modules, 'hwprof.core' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


# ----------------------------------------------------------------------------- --stage


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nms", "is not NAME=module:function"),
        ("nms=utils.general", "is not NAME=module:function"),
        ("=utils.general:nms", "is not NAME=module:function"),
        ("nms=utils general:nms", "is not NAME=module:function"),
        ("nms=utils.general:", "is not NAME=module:function"),
        ("nms=utils.general:1nms", "is not NAME=module:function"),
        ("forward=utils.general:nms", "the stage name forward is hwprof's own"),
        ("other=utils.general:nms", "the stage name other is hwprof's own"),
        ("my nms=utils.general:nms", "holds a space"),
    ],
)
def test_a_bad_stage_option_is_one_line_before_anything_runs(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ProgramError, match=message) as caught:
        parse_stage(text)
    assert "\n" not in str(caught.value)
    script = tmp_path / "main.py"
    script.write_text("pass\n")
    with pytest.raises(ProgramError, match=message):
        program_spec(["python", str(script)], cwd=str(tmp_path), stages=[text])


def test_the_cli_refuses_a_bad_stage_with_exit_2(run_hwprof: Any, tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("pass\n")
    out = run_hwprof("collect", "--stage", "nms", "--", "python", "main.py", timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "--stage nms is not NAME=module:function" in lines[0]


def test_a_good_stage_option_parses_and_a_stage_option_overrides_the_known_one(tmp_path: Path) -> None:
    assert parse_stage("decode=my.io:Reader.read") == StageTarget("decode", "my.io", "Reader.read")
    script = tmp_path / "detect.py"
    script.write_text("pass\n")
    spec = program_spec(["python", str(script)], cwd=str(tmp_path), stages=["nms=utils.general:non_max_suppression"])
    hooks = program_stages(spec)
    labels = [t.label for t in hooks.targets]
    assert "nms=utils.general:non_max_suppression" in labels
    assert "postprocess=utils.general:non_max_suppression" not in labels
    assert "postprocess=utils.general:scale_coords" in labels and hooks.main_names == ("detect",)


# ----------------------------------------------------------------------------- known functions


def test_cv2_reads_and_writes_are_load_and_write_stages_on_real_files(tmp_path: Path, seen: list[Any]) -> None:
    image = np.full((48, 64, 3), 90, np.uint8)
    assert cv2.imwrite(str(tmp_path / "a.png"), image)  # before the hooks: not a stage
    hooks = _hooks(*known_targets())
    try:
        assert cv2.imread(str(tmp_path / "a.png")).shape == (48, 64, 3)
        ok, encoded = cv2.imencode(".png", image)
        assert ok and cv2.imdecode(encoded, cv2.IMREAD_COLOR).shape == (48, 64, 3)
        assert cv2.imwrite(str(tmp_path / "b.png"), image)
        clip = str(tmp_path / "clip.mp4")
        writer = cv2.VideoWriter(clip, cv2.VideoWriter_fourcc(*"mp4v"), 10, (64, 48))
        assert writer.isOpened()
        for k in range(5):
            writer.write(np.full((48, 64, 3), 40 * k, np.uint8))
        writer.release()
        capture = cv2.VideoCapture(clip)
        frames = 0
        while True:
            ok, _frame = capture.read()
            if not ok:
                break
            frames += 1
        capture.release()
    finally:
        hooks.close()
    assert frames == 5
    assert seen == [
        ("load", "B"), ("load", "E"),  # imread
        ("write", "B"), ("write", "E"),  # imencode
        ("load", "B"), ("load", "E"),  # imdecode
        ("write", "B"), ("write", "E"),  # imwrite
        *[("write", "B"), ("write", "E")] * 5,  # VideoWriter.write
        *[("load", "B"), ("load", "E")] * 6,  # VideoCapture.read: 5 frames and the end
    ]  # fmt: skip
    assert hooks.calls() == {
        "load=cv2:imread": 1,
        "load=cv2:imdecode": 1,
        "load=cv2:VideoCapture.read": 6,
        "write=cv2:imwrite": 1,
        "write=cv2:imencode": 1,
        "write=cv2:VideoWriter.write": 5,
    }
    seen.clear()
    cv2.imread(str(tmp_path / "a.png"))
    assert seen == [] and not hasattr(cv2.imread, "__wrapped__")  # closed: the originals are back


def test_a_module_imported_after_the_hooks_gives_the_program_the_wrapper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seen: list[Any]
) -> None:
    """YOLOv7's and YOLOv5's utils.general, as their detect.py imports it: `from utils.general import ...`."""
    package = tmp_path / "utils"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "general.py").write_text(
        "def non_max_suppression(x):\n    return [x]\n\ndef scale_coords(x):\n    return x\n"
    )
    (tmp_path / "detect.py").write_text(
        "from utils.general import non_max_suppression, scale_coords\n"
        "def run(x):\n    return scale_coords(non_max_suppression(x))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("utils", "utils.general", "detect"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    hooks = _hooks(*known_targets())
    try:
        import detect  # type: ignore[import-not-found]

        assert detect.run(3) == [3]
        assert detect.non_max_suppression.__wrapped__.__module__ == "utils.general"
    finally:
        hooks.close()
    assert seen == [("postprocess", "B"), ("postprocess", "E")] * 2
    assert set(hooks.calls()) == {
        "postprocess=utils.general:non_max_suppression",
        "postprocess=utils.general:scale_coords",
    }
    general = sys.modules["utils.general"]
    assert general.__loader__.__class__.__name__ == "SourceFileLoader"  # the module keeps its own loader
    assert not hasattr(general.non_max_suppression, "__wrapped__")
    assert not hasattr(detect.non_max_suppression, "__wrapped__")  # the name bound in detect is put back too


def test_ultralytics_nms_and_letterbox_are_postprocess_and_preprocess(seen: list[Any]) -> None:
    from ultralytics.data.augment import LetterBox
    from ultralytics.utils.nms import non_max_suppression

    import_time_nms = non_max_suppression  # bound before the hooks, as a program's module would have it
    hooks = _hooks(*known_targets())
    try:
        from ultralytics.utils import nms

        boxed = LetterBox((64, 64), auto=False)(image=np.zeros((30, 40, 3), np.uint8))
        out = nms.non_max_suppression(torch.zeros(1, 84, 16), 0.25, 0.45)
    finally:
        hooks.close()
    assert boxed.shape == (64, 64, 3) and len(out) == 1
    assert seen == [("preprocess", "B"), ("preprocess", "E"), ("postprocess", "B"), ("postprocess", "E")]
    assert non_max_suppression is import_time_nms and nms.non_max_suppression is import_time_nms


def test_a_class_that_refuses_new_attributes_is_replaced_by_a_subclass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seen: list[Any]
) -> None:
    """As a C type that forbids assignment would (cv2's accept it, so the fallback is shown on a Python one)."""
    (tmp_path / "frozenio.py").write_text(
        textwrap.dedent(
            """
            class Frozen(type):
                def __setattr__(cls, name, value):
                    raise TypeError(f"cannot set {name!r} attribute of immutable type {cls.__name__!r}")

            class Reader(metaclass=Frozen):
                def read(self):
                    return "frame"
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "frozenio", raising=False)
    import frozenio  # type: ignore[import-not-found]

    original = frozenio.Reader
    hooks = _hooks(StageTarget("decode", "frozenio", "Reader.read"), user=True)
    try:
        reader = frozenio.Reader()
        assert isinstance(reader, original) and reader.read() == "frame"
    finally:
        hooks.close()
    assert seen == [("decode", "B"), ("decode", "E")] and frozenio.Reader is original
    assert hooks.unresolved() == []


def test_stage_options_resolve_methods_static_methods_and_report_what_never_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seen: list[Any]
) -> None:
    (tmp_path / "mypipe.py").write_text(
        textwrap.dedent(
            """
            class Pre:
                def run(self, x):
                    return x * 2

                @staticmethod
                def norm(x):
                    return x / 2

                @classmethod
                def make(cls):
                    return cls()

                @property
                def size(self):
                    return 1

            LIMIT = 3
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "mypipe", raising=False)
    targets = [
        StageTarget("pre", "mypipe", "Pre.run"),
        StageTarget("norm", "mypipe", "Pre.norm"),
        StageTarget("make", "mypipe", "Pre.make"),
        StageTarget("gone", "mypipe", "Pre.missing"),
        StageTarget("value", "mypipe", "LIMIT"),
        StageTarget("size", "mypipe", "Pre.size"),
        StageTarget("never", "not_imported_anywhere", "f"),
    ]
    hooks = _hooks(*targets, user=True)
    try:
        import mypipe  # type: ignore[import-not-found]

        assert mypipe.Pre.make().run(4) == 8 and mypipe.Pre.norm(4) == 2
    finally:
        hooks.close()
    assert seen == [("make", "B"), ("make", "E"), ("pre", "B"), ("pre", "E"), ("norm", "B"), ("norm", "E")]
    assert hooks.unresolved() == [
        "--stage gone=mypipe:Pre.missing timed nothing: mypipe has no Pre.missing",
        "--stage value=mypipe:LIMIT timed nothing: mypipe:LIMIT is not a function",
        "--stage size=mypipe:Pre.size timed nothing: mypipe:Pre.size is not a method",
        "--stage never=not_imported_anywhere:f timed nothing: the program never imported not_imported_anywhere",
    ]
    assert isinstance(mypipe.Pre.__dict__["norm"], staticmethod) and "run" in mypipe.Pre.__dict__


# ----------------------------------------------------------------------------- the driver's stage markers


def _program(body: Any, steps: int = 3) -> tuple[list[Marker], ProgramDriver]:
    """Run `body(model, x)` once per call of the model under the driver, with the gate's sink set."""
    bus, log = MarkerBus(), MarkerLog()
    bus.keep_spans(log)
    driver = ProgramDriver(bus, ScheduleHooks([(True, i) for i in range(steps)]), 1, end="run")
    finder = ModelFinder(on_found=driver.adopt)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3))
    before = stage_api.set_sink(driver.stage_sink)
    finder.install()
    try:
        with torch.no_grad():
            for _ in range(3 + steps + 1):
                body(model, torch.zeros(1, 3, 8, 8))
    finally:
        finder.close()
        driver.finish()
        stage_api.set_sink(before)
    return log.markers, driver


def _stages(markers: list[Marker]) -> list[tuple[str, str, int]]:
    return [(m.name, m.phase, m.iteration) for m in markers if m.kind == "stage" and m.iteration >= 0]


def test_nested_stages_are_marked_once_by_the_outermost() -> None:
    @hwprof.stage("postprocess")
    def nms() -> None:
        with hwprof.stage("inner"):
            pass

    def body(model: Any, x: Any) -> None:
        with hwprof.stage("mine"):
            nms()
        model(x)
        nms()

    markers, _ = _program(body, steps=2)
    # the warm-up call's forward ends where iteration 0 begins: its nms() is iteration 0's
    assert _stages(markers) == [
        ("postprocess", "B", 0), ("postprocess", "E", 0), ("mine", "B", 0), ("mine", "E", 0),
        ("forward", "B", 0), ("forward", "E", 0),
        ("postprocess", "B", 1), ("postprocess", "E", 1), ("mine", "B", 1), ("mine", "E", 1),
        ("forward", "B", 1), ("forward", "E", 1),
    ]  # fmt: skip
    from hwprof.core.marker_order import marker_order_fault

    assert marker_order_fault("m", list(enumerate(markers))) is None


def test_a_stage_that_holds_the_model_call_is_cut_at_the_forward() -> None:
    def body(model: Any, x: Any) -> None:
        with hwprof.stage("infer"):
            model(x)

    markers, _ = _program(body, steps=2)
    # iteration 1: the rest of the first call's stage after its forward, then the second call's before its own
    assert _stages(markers) == [
        ("infer", "B", 0), ("infer", "E", 0), ("forward", "B", 0), ("forward", "E", 0),
        ("infer", "B", 1), ("infer", "E", 1), ("infer", "B", 1), ("infer", "E", 1),
        ("forward", "B", 1), ("forward", "E", 1),
    ]  # fmt: skip
    from hwprof.core.marker_order import marker_order_fault

    assert marker_order_fault("m", list(enumerate(markers))) is None


def test_stages_on_another_thread_and_ends_without_a_begin_are_not_marked() -> None:
    def elsewhere() -> None:
        with hwprof.stage("reader"):
            pass

    def body(model: Any, x: Any) -> None:
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        stage_api._sink and stage_api._sink("late", "E")  # its begin came before the sink was set
        model(x)

    markers, _ = _program(body, steps=2)
    assert {m.name for m in markers if m.kind == "stage"} == {"forward"}


# ----------------------------------------------------------------------------- "other"


def _marker(kind: str, phase: str, name: str, t_ms: float, iteration: int) -> Marker:
    return Marker(kind, phase, name, int(t_ms * 1e6), iteration, False)  # type: ignore[arg-type]


def _iteration(i: int, start: float, stages: list[tuple[str, float, float]], end: float) -> list[Marker]:
    out = [_marker("iteration", "B", "iteration", start, i)]
    for name, b, e in stages:
        out += [_marker("stage", "B", name, b, i), _marker("stage", "E", name, e, i)]
    return [*out, _marker("iteration", "E", "iteration", end, i)]


def test_other_is_the_iterations_time_no_stage_claims_and_stages_add_up_per_iteration() -> None:
    markers = [
        *_iteration(0, 0, [("load", 1, 3), ("load", 4, 6), ("forward", 7, 17)], 18),  # two loads: 4 ms
        *_iteration(1, 18, [("load", 18, 20), ("write", 21, 22), ("forward", 24, 34)], 34),
        *_iteration(2, 34, [("load", 35, 37), ("forward", 38, 48)], 50),
    ]
    stats = program_stage_stats(markers)
    assert set(stats) == {"load", "write", "forward", OTHER, "iteration"}
    assert [stats["load"].min_ms, stats["load"].max_ms, stats["load"].n] == pytest.approx([2, 4, 3])
    assert stats["write"].n == 3 and stats["write"].mean_ms == pytest.approx(1 / 3)  # 0 where it did not run
    assert stats[OTHER].n == 3 and stats[OTHER].mean_ms == pytest.approx((4 + 3 + 4) / 3)
    parts = sum(stats[name].mean_ms for name in ("load", "write", "forward", OTHER))
    assert parts == pytest.approx(stats["iteration"].mean_ms)
    assert "other" not in stage_stats(markers) and stage_stats(markers)["load"].n == 4  # the built-in's: per span


def test_the_trace_shows_other_in_the_gaps_of_a_program_iteration() -> None:
    from hwprof.trace.model import LEVEL_ITERATION, LEVEL_STAGE, Slice
    from hwprof.trace.tracks import other_slices

    marks = [
        Slice(0, 100, "iteration 0", "iteration", LEVEL_ITERATION, {"iteration": 0}),
        Slice(10, 30, "load", "stage", LEVEL_STAGE),
        Slice(40, 90, "forward", "stage", LEVEL_STAGE),
        Slice(100, 200, "iteration 1", "iteration,warmup", LEVEL_ITERATION, {"iteration": 1}),
        Slice(100, 190, "forward", "stage", LEVEL_STAGE),
    ]
    other = [(s.start, s.end, s.name, s.category) for s in other_slices(marks)]
    assert other == [
        (0, 10, "other", "stage"), (30, 40, "other", "stage"), (90, 100, "other", "stage"),
        (190, 200, "other", "stage,warmup"),
    ]  # fmt: skip


# ----------------------------------------------------------------------------- the script's own functions


def test_a_stage_in_the_programs_own_script_is_wrapped_at_the_models_first_call(tmp_path: Path) -> None:
    script = tmp_path / "detect.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch

            def decode(i):
                return torch.zeros(1, 3, 8, 8) + i

            def main():
                model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3))
                with torch.no_grad():
                    for i in range(8):
                        model(decode(i))

            if __name__ == "__main__":
                main()
            """
        )
    )
    spec = program_spec(["python", str(script)], cwd=str(tmp_path), stages=["decode=detect:decode"])
    bus, log = MarkerBus(), MarkerLog()
    bus.keep_spans(log)
    driver = ProgramDriver(bus, ScheduleHooks([(True, 0), (True, 1)]), 1, end="run")
    hooks = program_stages(spec)
    finder = ModelFinder(on_found=lambda found, args: (hooks.retry(main=True), driver.adopt(found, args)))
    hooks.install()
    before = stage_api.set_sink(driver.stage_sink)
    finder.install()
    try:
        end = run_program(spec)
    finally:
        finder.close()
        driver.finish()
        stage_api.set_sink(before)
        hooks.close()
    assert end.ok and hooks.unresolved() == []
    assert [(n, p) for n, p, i in _stages(log.markers) if n == "decode"] == [("decode", "B"), ("decode", "E")] * 2


# ----------------------------------------------------------------------------- end to end


PROGRAM = """
import sys
from pathlib import Path

import cv2
import numpy as np
import torch
import ultralytics
from ultralytics.data.augment import LetterBox
from ultralytics.nn.tasks import DetectionModel
from ultralytics.utils.nms import non_max_suppression

image = Path(ultralytics.__file__).parent / "assets" / "bus.jpg"
model = DetectionModel("yolov8n.yaml", verbose=False).eval()
letterbox = LetterBox((96, 96), auto=False)
with torch.inference_mode():
    for _ in range(int(sys.argv[1])):
        frame = cv2.imread(str(image))
        boxed = letterbox(image=frame)
        x = torch.from_numpy(np.ascontiguousarray(boxed[:, :, ::-1].transpose(2, 0, 1))).float()[None] / 255
        detections = non_max_suppression(model(x), 0.25, 0.45)
        sum(float(d.sum()) for d in detections) + float(x.sum())  # the program's own work: "other"
"""


@pytest.mark.slow
def test_collect_on_a_detect_like_program_times_its_stages_and_other(run_hwprof: Any, tmp_path: Path) -> None:
    (tmp_path / "detect.py").write_text(PROGRAM)
    out = run_hwprof(
        "collect", "--only", "timing,torch_profiler", "--iters", "3", "--warmup", "1", "--out", "run", "--no-report",
        "--", "python", "detect.py", "20",
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    run_dir = tmp_path / "run"
    run = json.loads((run_dir / "run.json").read_text())
    stages = run["stages"]
    assert {"load", "preprocess", "forward", "postprocess", "other", "iteration"} <= set(stages)
    assert all(stages[name]["n"] == 3 for name in stages)
    means = sum(stages[name]["mean_ms"] for name in ("load", "preprocess", "forward", "postprocess", "other"))
    assert means == pytest.approx(stages["iteration"]["mean_ms"], rel=1e-6)
    assert stages["load"]["p50_ms"] > 0.1  # decoding a 810x1080 JPEG
    assert stages["forward"]["p50_ms"] > stages["preprocess"]["p50_ms"] > 0
    outcome = run["passes"]["timing"]["program"]
    assert {"load=cv2:imread", "preprocess=ultralytics.data.augment:LetterBox.__call__"} <= set(outcome["stage_calls"])
    assert "postprocess=ultralytics.utils.nms:non_max_suppression" in outcome["stage_calls"]
    report = run_hwprof("report", "run", timeout=120)
    assert report.returncode == 0 and "other" in report.stdout and "stages timed" in report.stdout
    # the program's own torch ops between stages (from_numpy, /255, sum) nest in "other": none is outside a stage.
    # One trace processor for the checks and the query (each start and load of the trace cost 1.4 CPU-s)
    if not availability().available:
        check_trace(run_dir / "trace.pftrace", run_dir)
        return
    with TraceSession(run_dir / "trace.pftrace") as tp:
        check_trace(run_dir / "trace.pftrace", run_dir, tp)
        rows = tp.query(
            """
            select count(*) as n from slice s where s.category = 'aten' and exists
            (select 1 from ancestor_slice(s.id) a where a.category glob 'stage*' and a.name = 'other')
            """
        )
    assert rows[0]["n"] > 0
