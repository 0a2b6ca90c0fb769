"""The official YOLOv7 detect.py traced (without --no-trace), run unmodified under hwprof: its TracedModel runs
the traced Model, then its eager head (model.77 IDetect on yolov7-tiny) itself. The head keeps its layer (live
markers on the eager module, hwprof/program/eager_parts.py), and every measured iteration of the trace pass is
in the layer table, though detect.py's images come in two shapes (bus and zidane in turn), which give the traced
graph other op sequences than the warm-up forward's (aligned by op name: collectors/torch_profiler/
module_layers.py)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from official_runs import detect_args, make_workdir, official_env, require_official

from hwprof.core.markers import read_markers
from hwprof.core.spans import measured_spans

HEAD = ("model.77", "IDetect")
"""yolov7-tiny's last layer (78 layers)."""


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One collect of the traced program: yolov7-tiny at 160, 12 images, 1 warm-up and 4 measured calls."""
    require_official()
    work = make_workdir(tmp_path_factory.mktemp("official_traced"), tmp_path_factory, "yolov7-tiny", images=12)
    out = work / "run"
    options = ["--only", "timing,torch_profiler", "--iters", "4", "--warmup", "1", "--no-report", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", "collect", *options, "--", "python", *detect_args(160, trace=True)],
        cwd=work,
        env=official_env(),
        text=True,
        capture_output=True,
        timeout=900,
    )
    return out, done


def _doc(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "run.json").read_text()))


@pytest.mark.slow
def test_the_eager_detect_layer_has_its_time(traced_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, done = traced_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with (out / "layers.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 78 and (rows[-1]["name"], rows[-1]["type"]) == HEAD
    assert all(r["time_ms"] and float(r["time_ms"]) > 0 for r in rows), [r["name"] for r in rows if not r["time_ms"]]
    program = _doc(out)["passes"]["trace"]["program"]
    assert program["scripted"] and any(n.startswith("model.77 (IDetect): run eagerly") for n in program["notes"])


@pytest.mark.slow
def test_every_measured_iteration_is_in_the_layer_table(
    traced_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, done = traced_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = _doc(out)
    measured = doc["passes"]["trace"]["program"]["measured_calls"]
    assert measured == 4
    spans = measured_spans(read_markers(out / "passes" / "trace" / "markers.jsonl"))
    forwards = {s.iteration for s in spans if s.kind == "stage" and s.name == "forward"}
    layers: dict[int, set[str]] = {i: set() for i in forwards}
    for s in spans:
        if s.kind == "layer":
            layers[s.iteration].add(s.name)
    assert len(forwards) == measured
    assert all(len(names) == 78 for names in layers.values()), {i: 78 - len(n) for i, n in layers.items()}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["layers"]["time_pass"] == "trace" and summary["layers"]["iterations"] == measured
    module_layers = doc["collectors"]["torch_profiler"]["summary"]["module_layers"]
    assert module_layers["forwards_unmatched"] == 0
    aligned, left = module_layers["forwards_aligned"], module_layers["ops_unaligned"]
    print(f"forwards aligned by op name: {aligned}, ops with no counterpart: {left}")
