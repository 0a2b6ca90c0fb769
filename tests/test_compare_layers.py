"""compare matches layers as a user means them (issue 45): by name, else by position; a class that differs is
shown in the row, never a refusal; the layers not in every run are listed in one line; a layer whose nested
layers differ between runs is compared by inclusive time."""

from __future__ import annotations

import io
import json
import shutil
import warnings
from pathlib import Path

import pytest
from rich.console import Console
from test_analysis import make_run

import hwprof
from hwprof.analysis.compare import compare_runs
from hwprof.render.compare.views import comparison_markdown, render_comparison

FIXTURES = Path(__file__).parent / "fixtures"


def _retype(run: Path, renames: dict[str, str], key: str = "type") -> Path:
    """Every model.json of a run with some layers' class (or name) changed, as another model code writes it."""
    for path in run.glob("passes/*/model.json"):
        doc = json.loads(path.read_text())
        for layer in doc["layers"]:
            layer[key] = renames.get(layer[key], layer[key])
        path.write_text(json.dumps(doc))
    return run


def _text(c: object) -> str:
    buf = io.StringIO()
    render_comparison(c, Console(file=buf, width=160, color_system=None))  # type: ignore[arg-type]
    return " ".join(buf.getvalue().split())


def test_a_class_that_differs_is_a_note_in_the_row(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a")
    b = _retype(make_run(tmp_path / "b"), {"Detect": "IDetect"})
    c = compare_runs([a, b])
    assert c.layers_refused is None and c.layers is not None
    assert [r.key for r in c.layers] == ["0 Conv", "1 C2f", "2 Concat", "3 Detect / IDetect"]
    assert all(v is not None for r in c.layers for v in r.values)
    assert any("another class per run (shown A / B)" in n for n in c.layer_notes)
    text = _text(c)
    assert "layers not compared" not in text and "3 Detect / IDetect" in text


def test_nested_layers_in_one_run_only_are_listed_and_their_parent_compared_inclusive(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a")
    per = {"model.0": 80.0, "model.1": 60.0, "model.1.cv1": 30.0, "model.2": 20.0, "model.3": 20.0}
    b = make_run(tmp_path / "b", layer_ms=(per,) * 3, nested=True)
    c = compare_runs([a, b])
    assert c.layers is not None and c.layers_refused is None
    rows = {r.key: r for r in c.layers}
    assert list(rows) == ["0 Conv", "1 C2f (incl.)", "2 Concat", "3 Detect"]
    incl = rows["1 C2f (incl.)"]  # A: model.1 alone; B: model.1 with its model.1.cv1, the same 60 of 200 ms
    assert incl.values[1] == pytest.approx(incl.values[0]) and incl.shares == [None, None]
    assert c.layer_notes[0] == "1 layer is not in every run and not compared (in the runs named): model.1.cv1 (B)"
    md = comparison_markdown(c)
    assert "model.1.cv1 (B)" in md and "(incl.): the runs nest different layers" in md


def test_no_name_in_common_matches_by_position_or_refuses(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a")
    renamed = {f"model.{i}": f"net.{i}" for i in range(4)}
    b = _retype(make_run(tmp_path / "b"), renamed, key="name")
    c = compare_runs([a, b])
    assert c.layers is not None and c.layers[0].key == "0 Conv"
    assert c.layer_notes == ["no layer name is in every run: the 4 layers are matched by position"]
    for path in b.glob("passes/*/model.json"):
        doc = json.loads(path.read_text())
        doc["layers"] = doc["layers"][:3]
        path.write_text(json.dumps(doc))
    refused = compare_runs([a, b])
    assert refused.layers is None
    assert refused.layers_refused == (
        "no layer name is in every run and their counts differ (A 4, B 3): layers are not compared"
    )


def test_a_programs_run_against_a_builtin_run_with_another_head_class(tmp_path: Path) -> None:
    """The recorded runs: a program's yolov8n (timing pass only) and the built-in yolov8n, the program's head
    renamed as the official YOLOv7 code names its own (IDetect), one layer dropped from the built-in run."""
    program = _retype(Path(shutil.copytree(FIXTURES / "program_run", tmp_path / "program")), {"Detect": "IDetect"})
    builtin = Path(shutil.copytree(FIXTURES / "rundir_small", tmp_path / "builtin"))
    for path in builtin.glob("passes/*/model.json"):
        doc = json.loads(path.read_text())
        doc["layers"] = [x for x in doc["layers"] if x["name"] != "model.21"]
        path.write_text(json.dumps(doc))
    c = compare_runs([builtin, program])
    assert c.layers_refused is None and c.layers is not None
    assert len(c.layers) == 22 and c.layers[-1].key == "22 Detect / IDetect"
    assert c.layer_notes[0] == "1 layer is not in every run and not compared (in the runs named): model.21 (B)"
    assert all(r.values[0] is not None for r in c.layers)  # the built-in run's layer times, matched by name
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        frame = hwprof.compare(builtin, program)
    assert "22 Detect / IDetect" in frame.filter(frame["section"] == "layer")["key"].to_list()
    assert any("model.21 (B)" in str(w.message) for w in seen)
