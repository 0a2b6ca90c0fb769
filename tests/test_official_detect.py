"""The official YOLOv7 detect.py (yolov7detect sdist, unmodified) under `hwprof collect`: nothing of hwprof's own
runs inside the program's calls of its model, so the per-image "Inference" time it prints is its model's forward,
as hwprof times it inside the same call, in every pass (and not a second forward of hwprof's own on top).

The program is run through tests/official/counted_detect.py, which runs `yolov7.detect` as `python -m` does and
counts the calls of its model (the official `Model` class) by their nesting: a forward of hwprof's own made inside
the program's call would be a nested call. One collect (timing pass and layers pass with the FLOP count) shared by
the tests.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from official_runs import OFFICIAL, detect_args, inference_ms, make_workdir, official_env, require_official
from program_runs import collect, run_doc

pytestmark = pytest.mark.slow

IMAGES = 24
ITERS = 6
"""The timing pass's measured calls: 2 calls choose the model, 1 is warm-up, the 6th measured one is stopped before
detect.py prints it: 5 printed measured times. The layers pass runs 12 (ABBA) after its warm-up: 11 printed."""
BOUND = 1.6
"""Median over calls of detect.py's printed inference time / hwprof's forward span of the same call: a forward of
hwprof's own inside each call made it 2x."""


@dataclass
class Runs:
    work: Path
    out: Path
    alone: str
    counts: dict[str, dict[str, int]]
    """Per pass ("alone" outside hwprof): the model's calls, as counted_detect.py counted them."""
    report: str
    """The report the collect printed."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    require_official()
    work = make_workdir(tmp_path_factory.mktemp("official") / "work", tmp_path_factory, images=IMAGES)
    counts = work / "counts.jsonl"
    env = {**official_env(), "COUNTED_CALLS": str(counts)}
    command = [str(OFFICIAL / "counted_detect.py"), *detect_args()[2:]]  # detect_args()[:2]: "-m yolov7.detect"
    alone = subprocess.run(
        [sys.executable, *command], cwd=work, env=env, text=True, capture_output=True, timeout=300, check=True
    )
    out = work / "run"
    options = ["--only", "timing,flops", "--iters", str(ITERS), "--warmup", "1"]
    # the report the collect prints (its analysis of the finished run, as `hwprof report` prints it: a second
    # process to print it again cost 1.6 CPU-s)
    done = collect(out, options, command, timeout=600, env=env, columns=400)
    assert done.returncode == 0, done.stderr[-3000:]
    by_pass = {row["pass"]: row for row in map(json.loads, counts.read_text().splitlines())}
    return Runs(work, out, alone.stdout, by_pass, done.stdout)


def _outcome(runs: Runs, pass_name: str) -> dict[str, Any]:
    program = run_doc(runs.out)["passes"][pass_name]["program"]
    assert program["ended"] == "stopped after the measured calls", program
    return dict(program)


def _forward_spans(runs: Runs, pass_name: str) -> list[float]:
    """The forward stage of each marked call of the pass (warm-up included), in ms, in call order."""
    rows = [json.loads(line) for line in (runs.out / "passes" / pass_name / "markers.jsonl").read_text().splitlines()]
    forwards = [r for r in rows if r[0] == "stage" and r[2] == "forward"]
    begins, ends = forwards[0::2], forwards[1::2]
    assert all(b[1] == "B" and e[1] == "E" for b, e in zip(begins, ends, strict=True))
    return [(e[3] - b[3]) / 1e6 for b, e in zip(begins, ends, strict=True)]


def _printed(runs: Runs, pass_name: str) -> tuple[list[float], list[float], list[float]]:
    """Of the pass's measured (and clean) calls that detect.py printed: its printed inference time under hwprof,
    hwprof's forward span of the same call, and the time it printed alone for the same image, in ms."""
    program = _outcome(runs, pass_name)
    before = program["calls"] - program["warmup_calls"] - program["measured_calls"] - program["clean_calls"]
    first = before + program["warmup_calls"]
    under = inference_ms((runs.out / "passes" / pass_name / "worker.log").read_text())[first:]
    spans = _forward_spans(runs, pass_name)[program["warmup_calls"] :][: len(under)]
    alone = inference_ms(runs.alone)[first : first + len(under)]
    assert len(under) == program["measured_calls"] + program["clean_calls"] - 1  # the stopped call prints nothing
    assert len(alone) == len(spans) == len(under)
    return under, spans, alone


def test_no_forward_of_hwprofs_own_runs_inside_the_programs_calls(runs: Runs) -> None:
    assert set(runs.counts) == {"alone", "timing", "layers"}
    assert runs.counts["alone"]["nested"] == 0 and runs.counts["alone"]["program"] == IMAGES + 1  # + its profile
    for pass_name in ("timing", "layers"):
        counted, program = runs.counts[pass_name], _outcome(runs, pass_name)
        assert counted["nested"] == 0, (pass_name, counted)
        # every call at the outermost level is the program's: the model's and detect.py's own one-off (other_roots)
        assert counted["program"] == program["calls"] + sum(program["other_roots"].values()), (counted, program)
    assert runs.counts["timing"]["after"] == 0  # the timing pass runs no forward of its own at all
    shapes = json.loads((runs.out / "run.json").read_text())["passes"]["layers"]["inputs"]["shapes"]
    # the FLOP count, after the program was stopped, and one more per other input shape (bus and zidane differ)
    assert runs.counts["layers"]["after"] == len(shapes) >= 1


def test_the_programs_printed_inference_time_is_its_forward_in_every_pass(runs: Runs) -> None:
    """Per call, the time detect.py prints around its model call against hwprof's forward span inside it: the
    same call, so the VM's load hits both alike (a forward of hwprof's own inside the call made it 2x). The time it
    printed alone is printed beside them, not asserted: another process's load on this VM moves it several-fold."""
    for pass_name in ("timing", "layers"):
        under, spans, alone = _printed(runs, pass_name)
        ratio = statistics.median(u / s for u, s in zip(under, spans, strict=True))
        print(
            f"{pass_name}: printed {statistics.median(under):.1f} ms under hwprof (median of {len(under)}), "
            f"{statistics.median(alone):.1f} ms alone; printed / hwprof's forward span {ratio:.3f}"
        )
        assert ratio < BOUND, (pass_name, under, spans)


def test_what_a_program_run_cannot_check_is_one_line_not_a_failure(runs: Runs) -> None:
    doc = run_doc(runs.out)
    timing = doc["collectors"]["timing"]
    assert timing["status"] == "ok" and "forward_reference" not in timing["summary"]
    assert "inside the program's call of its model" in timing["summary"]["forward_reference_unavailable"]
    assert doc["collectors"]["flops"]["status"] == "ok"
    lines = [line for line in runs.report.splitlines() if line.startswith("checks not run")]
    assert len(lines) == 1 and "plain model(x) loop" in lines[0], runs.report[:3000]
    model = json.loads((runs.out / "passes" / "timing" / "model.json").read_text())
    assert model["layers"][0]["in_shapes"] == [model["input_shape"]]  # recorded from the program's own call


def test_layer_rows_are_given_per_input_shape(runs: Runs) -> None:
    """detect.py letterboxes bus and zidane to different shapes: each top-level layer gets its time and FLOPs at
    each shape (the layer table's one median mixes them), from the iterations the pass's tally filed under it."""
    from hwprof.analysis.run_analysis import analyse
    from hwprof.render.export import summary_dict
    from hwprof.rundir.reader import RunData

    doc = run_doc(runs.out)
    inputs = doc["passes"]["layers"]["inputs"]
    assert len(inputs["shapes"]) == 2, inputs
    analysis = analyse(RunData.load(runs.out))
    view = analysis.layer_shapes
    assert view is not None and view.time_pass == "layers"
    assert view.shapes == list(inputs["shapes"])
    assert view.iterations == {s: list(inputs["measured"].values()).count(s) for s in view.shapes}
    by_shape = doc["collectors"]["flops"]["summary"]["flops_by_shape"]
    model = json.loads((runs.out / "passes" / "layers" / "model.json").read_text())
    top_level = [row for row in model["layers"] if row["name"].count(".") == 1]
    for shape in view.shapes:
        timed = [layer.cells[shape] for layer in view.layers if layer.cells[shape].ms is not None]
        assert len(timed) == len(view.layers) == len(top_level)  # every top-level layer timed at every shape
        assert all(layer.cells[shape].flops is not None for layer in view.layers)
        layer_flops = sum(layer.cells[shape].flops or 0 for layer in view.layers)
        assert 0.9 * by_shape[shape] < layer_flops <= by_shape[shape], (shape, layer_flops, by_shape)
    small, big = sorted(view.shapes, key=lambda s: by_shape[s])
    assert by_shape[small] < by_shape[big]  # the shapes differ in work, so one median of both is neither's
    assert "layers by input shape" in runs.report and "the forwards had 2 input shapes" in runs.report
    exported = summary_dict(analysis)["layers_by_shape"]
    assert exported["shapes"] == view.shapes and len(exported["layers"]) == len(top_level)
