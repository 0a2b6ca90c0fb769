from __future__ import annotations

import numpy as np
import pytest
import torch

from hwprof.core.config import RunConfig
from hwprof.core.markers import MarkerBus, MarkerLog, attach_layer_markers
from hwprof.workload.images import ImageError, discover
from hwprof.workload.pipeline import Pipeline, letterbox, to_yolo_layout
from hwprof.workload.runtime import Runtime, TorchRuntime
from hwprof.workload.zoo import (
    MODEL_NAMES,
    OUTPUT_XYWH_OBJ_CLS,
    UnknownModelError,
    build_model,
    family_of,
    meta_flops,
)


def test_letterbox_square_and_rect() -> None:
    image = np.zeros((720, 1280, 3), np.uint8)
    square = letterbox(image, 640)
    assert square.image.shape == (640, 640, 3)
    assert square.ratio == pytest.approx(0.5)
    assert square.pad == (0, 140)
    rect = letterbox(image, 640, stride=32, rect=True)
    assert rect.image.shape == (384, 640, 3)
    assert rect.image[0, 0].tolist() == [114, 114, 114]


def test_yolov7_layout_multiplies_objectness_into_classes() -> None:
    pred = torch.zeros(1, 2, 5 + 3)
    pred[0, 0, :4] = torch.tensor([10.0, 20.0, 4.0, 6.0])
    pred[0, 0, 4] = 0.5
    pred[0, 0, 5:] = torch.tensor([0.2, 0.8, 0.4])
    out = to_yolo_layout(pred, OUTPUT_XYWH_OBJ_CLS)
    assert out.shape == (1, 4 + 3, 2)
    assert out[0, :, 0].tolist() == pytest.approx([10, 20, 4, 6, 0.1, 0.4, 0.2])


def test_unknown_model_lists_names() -> None:
    with pytest.raises(UnknownModelError, match="known models: yolov7, yolov7-tiny"):
        family_of("yolov99")
    assert "yolo11x" in MODEL_NAMES and "yolov5su" in MODEL_NAMES


def test_image_folder_errors(tmp_path) -> None:
    with pytest.raises(ImageError, match="does not exist"):
        discover(str(tmp_path / "missing"))
    with pytest.raises(ImageError, match="no image files"):
        discover(str(tmp_path))
    (tmp_path / "broken.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(ImageError, match="could be read"):
        discover(str(tmp_path))


def test_unreadable_images_are_skipped(tmp_path, bus_images) -> None:
    (tmp_path / "a.jpg").write_bytes(bus_images[0].read_bytes())
    (tmp_path / "b.jpg").write_bytes(b"\xff\xd8 truncated")
    found = discover(str(tmp_path))
    assert [p.name for p in found.paths] == ["a.jpg"]
    assert found.skipped and found.skipped[0][0].endswith("b.jpg")


def test_default_images_are_the_wheels_photos() -> None:
    assert [p.name for p in discover(None).paths] == ["bus.jpg", "zidane.jpg"]


def test_ultralytics_flops_on_meta() -> None:
    built = build_model("yolov8n")
    assert built.params_fused == 3_151_904
    assert meta_flops(built.module, 640) / 1e9 == pytest.approx(8.74, rel=0.005)


def test_pipeline_stages_and_layer_markers(bus_images) -> None:
    torch.set_num_threads(2)
    config = RunConfig(model="yolov8n", imgsz=256, batch=2)
    bus, log = MarkerBus(), MarkerLog()
    bus.subscribe(log)
    pipeline = Pipeline(config, bus, bus_images, build_model("yolov8n"))
    attach_layer_markers(pipeline.model, bus)
    detections = pipeline.run_iteration(0, warmup=False)
    stages = [m.name for m in log.markers if m.kind == "stage" and m.phase == "B"]
    assert stages == ["load", "preprocess", "forward", "postprocess"]
    layers = [m for m in log.markers if m.kind == "layer"]
    assert len(layers) == 2 * len(pipeline.model.model)
    forward = [m.t_ns for m in log.markers if m.name == "forward"]
    assert all(forward[0] <= m.t_ns <= forward[1] for m in layers)
    assert len(detections) == 2
    for det, path in zip(detections, pipeline.batch_paths(0), strict=True):
        import cv2

        h, w = cv2.imread(str(path)).shape[:2]
        if len(det):
            assert float(det[:, [0, 2]].max()) <= w + 1 and float(det[:, [1, 3]].max()) <= h + 1


class _PooledRuntime(Runtime):
    """A runtime with its own thread pool (as ONNX Runtime's and OpenVINO's): runs the torch model and keeps
    torch's thread count at each forward."""

    name = "pooled-test"

    def _execute(self, batch: torch.Tensor) -> object:
        self.threads_seen = torch.get_num_threads()
        with torch.inference_mode():
            return self.built.module(batch)


@pytest.mark.parametrize(("runtime_class", "glue"), [(_PooledRuntime, 1), (TorchRuntime, 2)])
def test_a_runtime_with_its_own_pool_gets_its_glue_on_one_torch_thread(
    bus_images, tmp_path, runtime_class: type[Runtime], glue: int
) -> None:
    """Preprocess and NMS on one torch thread around a pooled runtime's forward (torch's OpenMP threads would
    spin into it), on the run's --threads around torch's; the count set back after the iteration, and runtime.json
    saying so where it differs."""
    torch.set_num_threads(2)
    config = RunConfig(model="yolov8n", imgsz=128, threads=2)
    runtime = runtime_class(config, build_model("yolov8n"), tmp_path, tmp_path, False)
    pipeline = Pipeline(config, MarkerBus(), bus_images, runtime.built, runtime)
    seen: dict[str, int] = {}
    preprocess, nms = pipeline.preprocess, pipeline.nms

    def preprocess_seen(images):  # type: ignore[no-untyped-def]
        seen["preprocess"] = torch.get_num_threads()
        return preprocess(images)

    def nms_seen(output):  # type: ignore[no-untyped-def]
        seen["postprocess"] = torch.get_num_threads()
        return nms(output)

    pipeline.preprocess, pipeline.nms = preprocess_seen, nms_seen  # type: ignore[method-assign]
    pipeline.run_iteration(0, warmup=False)
    assert seen == {"preprocess": glue, "postprocess": glue}
    assert torch.get_num_threads() == 2
    assert runtime.info.glue_threads == (1 if glue == 1 else None)
