"""The boxes NMS kept (issue 57): counted per image and class from the pipeline's own postprocess output, recorded
in result.json and run.json (an old run.json without them reads fine), shown on the first screen for trained
weights, in summary.json and as hwprof.load's `detections` table; --annotate draws the same boxes."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import torch
from rich.console import Console

import hwprof
from hwprof.render.weights_line import VALUE_WIDTH, detections_summary
from hwprof.schema.check import RunDirError
from hwprof.schema.detections import DetectionsDoc
from hwprof.schema.run import RunDoc
from hwprof.session.finish import report_run
from hwprof.workload.detections import DetectionTally

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_report"
NAMES = {0: "person", 1: "bicycle", 5: "bus", 27: "tie"}


def boxes(*classes: int) -> torch.Tensor:
    """An NMS output (x1 y1 x2 y2 conf cls rows) with one box per class id given."""
    rows = [[10.0 * k, 10.0, 10.0 * k + 5, 20.0, 0.9, float(c)] for k, c in enumerate(classes)]
    return torch.tensor(rows).reshape(-1, 6)


def test_images_read_round_and_round_keep_their_first_boxes_and_count_other_ones() -> None:
    tally = DetectionTally(NAMES, 0.25, 0.45)
    tally.add(["bus.jpg"], [boxes(0, 0, 5, 0, 0)], drawn=[5])
    tally.add(["zidane.jpg"], [boxes(0, 27, 0)], drawn=[3])
    tally.add(["bus.jpg"], [boxes(0, 0, 5, 0, 0)], drawn=[5])
    tally.add(["zidane.jpg"], [boxes(0, 0)], drawn=[2])  # a score at the threshold: another box set
    tally.add(["empty.jpg"], [boxes()], drawn=[0])
    doc = tally.doc("timing")
    assert doc is not None and doc.pass_name == "timing" and (doc.conf, doc.iou) == (0.25, 0.45)
    bus, zidane, empty = doc.images or []
    assert (bus.image, bus.boxes, bus.iterations, bus.differed, bus.drawn) == ("bus.jpg", 5, 2, 0, 5)
    assert [(c.id, c.name, c.boxes) for c in bus.classes] == [(0, "person", 4), (5, "bus", 1)], "largest first"
    assert (zidane.boxes, zidane.iterations, zidane.differed) == (3, 2, 1)
    assert [(c.name, c.boxes) for c in zidane.classes] == [("person", 2), ("tie", 1)]
    assert (empty.boxes, empty.classes) == (0, [])
    full = "bus.jpg 4 person, 1 bus; zidane.jpg 2 person, 1 tie (varied in 1 of 2 runs); empty.jpg none"
    assert detections_summary(doc, width=200) == full
    assert detections_summary(doc) == "bus.jpg 4 person, 1 bus; 2 more images", "cut to 69 columns, whole images"


def test_a_class_the_checkpoint_does_not_name_is_its_id_and_no_run_gives_no_record() -> None:
    tally = DetectionTally({}, 0.25, 0.45)
    assert tally.doc("timing") is None
    tally.add(["a.jpg", "b.jpg"], [boxes(3), boxes()])  # a batch of two; no --annotate
    doc = tally.doc("timing")
    assert doc is not None and [(i.image, i.drawn) for i in doc.images or []] == [("a.jpg", None), ("b.jpg", None)]
    assert (doc.images or [])[0].classes[0].name == "3"


def test_a_videos_frames_are_summed_up_not_listed() -> None:
    tally = DetectionTally(NAMES, 0.25, 0.45, video="street.mp4")
    per_frame = [boxes(0, 0, 1), boxes(), boxes(0, 5), boxes(0)]
    for det in per_frame:
        tally.add([], [det], drawn=[len(det)])
    doc = tally.doc("timing")
    assert doc is not None and doc.images is None and doc.video is not None
    v = doc.video
    assert (v.video, v.frames, v.boxes, v.per_frame_min, v.per_frame_median, v.per_frame_max) == (
        "street.mp4", 4, 6, 0, 1.5, 3,
    )  # fmt: skip
    assert (v.frames_with_boxes, v.drawn) == (3, 6)
    assert [(c.name, c.boxes) for c in v.classes] == [("person", 4), ("bicycle", 1), ("bus", 1)]
    full = "street.mp4 4 frames, 1.5 boxes/frame (0-3): 4 person, 1 bicycle, 1 bus"
    assert detections_summary(doc, width=len(full)) == full
    assert (
        detections_summary(doc, width=len(full) - 1)
        == "street.mp4 4 frames, 1.5 boxes/frame (0-3): 4 person and 2 more"
    )


def test_many_images_are_cut_to_one_line_with_how_many_more() -> None:
    tally = DetectionTally(NAMES, 0.25, 0.45)
    for k in range(12):
        tally.add([f"street_{k:02d}.jpg"], [boxes(0, 0, 1)])
    doc = tally.doc("timing")
    assert doc is not None
    line = detections_summary(doc)
    assert len(line) <= VALUE_WIDTH and line.startswith("street_00.jpg 2 person, 1 bicycle; ")
    shown = line.count("street_")
    assert line.endswith(f"; {12 - shown} more images"), line


def run_doc(extra: dict[str, Any]) -> dict[str, Any]:
    doc = json.loads((FIXTURE / "run.json").read_text())
    doc.update(extra)
    return doc


def test_an_old_run_json_without_detections_reads_fine_and_the_record_round_trips() -> None:
    old = RunDoc.read(run_doc({}), "run.json")
    assert old.detections is None and "detections" not in old.to_json()
    tally = DetectionTally(NAMES, 0.25, 0.45)
    tally.add(["bus.jpg"], [boxes(0, 5)], drawn=[2])
    record = tally.doc("timing")
    assert record is not None
    written = json.loads(json.dumps(record.to_json()))
    doc = run_doc({"detections": written})
    new = RunDoc.read(doc, "run.json")
    assert new.detections == DetectionsDoc.from_json(written, "run.json") and new.to_json() == doc
    assert new.unknown_keys() == []
    written["images"][0]["boxes"] = -1
    with pytest.raises(RunDirError, match=r'field "detections\.images\.0\.boxes" must be a number >= 0'):
        RunDoc.read(run_doc({"detections": written}), "run.json")


def test_an_old_run_has_an_empty_table_that_says_why() -> None:
    run = hwprof.load(FIXTURE)
    assert run.detections.height == 0 and run.detections.columns == ["image", "frames", "class_id", "class", "count"]
    assert "records no detections" in str(run.why("detections"))
    assert "detections" in hwprof.api.run.TABLE_NAMES


# ----------------------------------------------------------------------------- a real run


@pytest.fixture(scope="module")
def people_run(tmp_path_factory: pytest.TempPathFactory, people: Path) -> Path:
    """One small collect of the trained yolov8s-people at 320 on bus.jpg and zidane.jpg, with --annotate."""
    root = tmp_path_factory.mktemp("people")
    hwprof.collect(
        "yolov8s-people", imgsz=320, iters=3, warmup=1, only=["timing"], annotate=root / "ann", out=root / "run"
    )
    return root


def _direct_counts(images: list[Path]) -> dict[str, dict[str, int]]:
    """The boxes by class per image that the pipeline's own stages give in this process, outside any collect."""
    from hwprof.core.config import RunConfig
    from hwprof.core.markers import MarkerBus
    from hwprof.workload.pipeline import Pipeline
    from hwprof.workload.zoo import build_model

    built = build_model("yolov8s-people")
    pipeline = Pipeline(RunConfig(model="yolov8s-people", imgsz=320), MarkerBus(), images, built)
    out = {}
    for path in images:
        batch, boxed = pipeline.preprocess(pipeline.load([path]))
        (det,) = pipeline.postprocess(pipeline.forward(batch), batch, boxed)
        names = [built.class_names[int(c)] for c in det[:, 5].tolist()]
        out[path.name] = {n: names.count(n) for n in set(names)}
    return out


@pytest.mark.slow
def test_a_trained_run_records_the_boxes_it_kept_per_image(people_run: Path, bus_images) -> None:
    run_dir = people_run / "run"
    doc = RunDoc.load(run_dir / "run.json")
    found = doc.detections
    assert found is not None and found.pass_name == "timing" and found.images is not None
    by_image = {i.image: i for i in found.images}
    assert sorted(by_image) == ["bus.jpg", "zidane.jpg"]
    assert by_image["bus.jpg"].iterations == 2 and by_image["zidane.jpg"].iterations == 1
    assert all(i.boxes >= 1 and i.differed == 0 for i in found.images), "the trained model finds people in both"
    recorded = {i.image: {c.name: c.boxes for c in i.classes} for i in found.images}
    assert recorded == _direct_counts(bus_images)
    per_iteration = json.loads((run_dir / "passes" / "timing" / "result.json").read_text())["detections_per_iteration"]
    order = ["bus.jpg", "zidane.jpg", "bus.jpg"]
    assert per_iteration == [by_image[name].boxes for name in order], "the same NMS output as the pass's own count"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["detections"] == found.to_json()
    table = hwprof.load(run_dir).detections
    assert table.schema["count"] == pl.Int64 and table.schema["class"] == pl.String
    rows = {(r["image"], r["class"]): r["count"] for r in table.iter_rows(named=True)}
    assert rows == {(i.image, c.name): c.boxes for i in found.images for c in i.classes}


@pytest.mark.slow
def test_annotate_draws_the_same_boxes(people_run: Path) -> None:
    import cv2

    found = RunDoc.load(people_run / "run" / "run.json").detections
    assert found is not None and found.images is not None
    for image in found.images:
        assert image.drawn == image.boxes, image
        drawn = cv2.imread(str(people_run / "ann" / str(image.image)))
        assert drawn is not None, f"--annotate wrote {image.image}"


@pytest.mark.slow
def test_the_first_screen_says_what_the_trained_model_found(people_run: Path) -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=80, color_system=None, force_terminal=False, legacy_windows=False)
    report_run(people_run / "run", console=console, write=False)
    found = RunDoc.load(people_run / "run" / "run.json").detections
    assert found is not None
    head = buf.getvalue().splitlines()[:12]
    line = next(line for line in head if line.startswith("detections "))
    assert line[len("detections ") :].rstrip() == detections_summary(found)
    assert line.rstrip().startswith("detections bus.jpg ") and "Normal" in line and "zidane.jpg" in line
    weights = next(i for i, line in enumerate(head) if line.startswith("weights "))
    assert head[weights + 1].startswith(" "), "the weights take their second line"
    assert head[weights + 2].startswith("detections"), "and no third"


@pytest.mark.slow
def test_a_video_run_sums_its_frames(tmp_path: Path, bus_images, people: Path) -> None:
    """The pipeline on a clip of bus.jpg's frames: one summary of the frames, the boxes per frame as kept."""
    import cv2

    from hwprof.core.config import RunConfig
    from hwprof.core.markers import MarkerBus
    from hwprof.workload.pipeline import Pipeline
    from hwprof.workload.zoo import build_model

    bus = cv2.imread(str(next(p for p in bus_images if p.name == "bus.jpg")))
    clip = tmp_path / "bus.mp4"
    writer = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"mp4v"), 10.0, (bus.shape[1], bus.shape[0]))
    for k in range(4):
        writer.write(bus if k % 2 == 0 else cv2.flip(bus, 1))
    writer.release()
    built = build_model("yolov8s-people")
    pipeline = Pipeline(
        RunConfig(model="yolov8s-people", imgsz=320), MarkerBus(), [clip], built, None, tmp_path / "o.mp4"
    )
    pipeline.run_iteration(0, warmup=True)
    kept = [len(pipeline.run_iteration(i, warmup=False)[0]) for i in range(1, 4)]
    pipeline.close()
    doc = pipeline.tally.doc("timing")
    assert doc is not None and doc.images is None and doc.video is not None
    v = doc.video
    assert (v.video, v.frames, v.boxes, v.per_frame_max, v.drawn) == ("bus.mp4", 3, sum(kept), max(kept), sum(kept))
    assert v.boxes >= 3 and {c.name for c in v.classes} <= {"Normal", "Fall"}
    assert detections_summary(doc).startswith(f"bus.mp4 3 frames, {sum(kept) / 3:.1f} boxes/frame")
