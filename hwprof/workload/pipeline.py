"""The YOLO CPU pipeline: load (or decode) -> preprocess -> forward -> postprocess [-> annotate -> encode], each
stage a marked span.

- load: read the batch's images from disk (OpenCV, BGR uint8); or, for a video input,
  decode: the batch's consecutive frames from the video (cv2.VideoCapture: hwprof.workload.video).
- preprocess: letterbox to imgsz (square by default; `rect` pads only to a stride multiple, as
  YOLOv7's detect.py does), BGR->RGB, HWC->CHW, float /255, stack into a batch.
- forward: the fused model in eval mode under torch.inference_mode, or the run's runtime
  (ONNX Runtime, OpenVINO; see runtime.py) on the same batch.
- postprocess: ultralytics' NMS (conf, IoU) and boxes scaled back to each original image.
- annotate, encode (only with an output, `collect --annotate`): the boxes drawn on each frame, then the frame
  written to a video (cv2.VideoWriter) or to an image file (hwprof.workload.annotate).

The methods are named as the stages: py-spy's and Scalene's frames are charged to a stage by them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.core.input_shapes import shape_text
from hwprof.core.markers import MarkerBus
from hwprof.hardware.torch_threads import torch_threads
from hwprof.workload.detections import DetectionTally
from hwprof.workload.images import is_video_input
from hwprof.workload.video import VideoReader
from hwprof.workload.zoo import OUTPUT_XYWH_OBJ_CLS, BuiltModel

CALIBRATION_IMAGES = 64
"""At most this many of the run's images calibrate a static int8 model (ORT's min-max over each batch)."""

if TYPE_CHECKING:
    import numpy as np
    import torch

    from hwprof.core.config import RunConfig
    from hwprof.workload.annotate import FrameSink
    from hwprof.workload.runtime import Calibration, Runtime

PAD_VALUE = 114


@dataclass
class Letterboxed:
    image: np.ndarray
    ratio: float
    pad: tuple[float, float]
    """(left, top) padding in pixels."""
    original_shape: tuple[int, int]


def letterbox(image: np.ndarray, size: int, stride: int = 32, rect: bool = False) -> Letterboxed:
    """Resize keeping the aspect ratio and pad to size x size (or to a stride multiple if rect)."""
    import cv2
    import numpy as np

    h, w = image.shape[:2]
    ratio = min(size / h, size / w)
    new_w, new_h = round(w * ratio), round(h * ratio)
    if rect:
        target_w = int(np.ceil(new_w / stride) * stride)
        target_h = int(np.ceil(new_h / stride) * stride)
    else:
        target_w = target_h = size
    if (new_w, new_h) != (w, h):
        image = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    dw, dh = (target_w - new_w) / 2, (target_h - new_h) / 2
    top, bottom = round(dh - 0.1), round(dh + 0.1)
    left, right = round(dw - 0.1), round(dw + 0.1)
    padded = cv2.copyMakeBorder(image, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(PAD_VALUE,) * 3)
    return Letterboxed(padded, ratio, (left, top), (h, w))


def to_yolo_layout(prediction: torch.Tensor, output_format: str) -> torch.Tensor:
    """Convert a head's output to (batch, 4 + nc, anchors) with class confidences, for NMS."""
    import torch

    if output_format == OUTPUT_XYWH_OBJ_CLS:
        boxes, obj, cls = prediction[..., :4], prediction[..., 4:5], prediction[..., 5:]
        return torch.cat((boxes, cls * obj), dim=-1).transpose(1, 2)
    return prediction


class Pipeline:
    """One model and one input (an image list, or a video); run_iteration() runs every stage once.
    `annotate_to`: where the annotated frames go (a video file for a video input, else a folder), or None."""

    own_forwards_in_loop = True
    """hwprof may run forwards of its own while the workload runs (the timing reference after each measured
    iteration, the FLOP count in prepare): hwprof owns this loop and puts them between its iterations, outside
    every timed one. A user's program owns its loop (hwprof.program.pipeline.ProgramPipeline): there they would run
    inside the program's own call of its model, so they run after the program (Collector.after_workload) or not
    at all, and `own_forwards_why` says why."""
    own_forwards_why = ""

    def __init__(
        self,
        config: RunConfig,
        bus: MarkerBus,
        images: list[Path],
        built: BuiltModel,
        runtime: Runtime | None = None,
        annotate_to: Path | None = None,
    ) -> None:
        if not images:
            raise ValueError("the pipeline needs at least one image")
        self.config = config
        self.bus = bus
        self.images = images
        self.video = VideoReader(images[0], config.batch) if is_video_input(images) else None
        """The video the frames are decoded from (None: images are loaded)."""
        self.annotate_to = annotate_to
        self.sink: FrameSink | None = None
        """The writer of the annotated frames, opened at the first encode."""
        self.built = built
        self.model = built.module
        """The fused torch model (also under another runtime: FLOPs and the layer table come from it)."""
        self.runtime = runtime
        self.rect = bool(config.extra.get("rect", False)) and config.batch == 1
        self.detections: list[int] = []
        self.tally = DetectionTally(
            built.class_names, config.conf, config.iou, self.video.path.name if self.video is not None else None
        )
        """The boxes NMS kept in the measured iterations, per image and class (result.json's `detections`)."""
        self.drawn: list[int] | None = None
        """The boxes the last annotate stage drew on each image (None: no --annotate)."""
        self.candidates: list[int] = []
        """Per warm-up iteration, the boxes NMS had to consider (best class score over conf): a seeded random
        init may give NMS none, which is not the stage a trained model has. Counted after the warm-up iterations
        only, so that the count's ops never enter the measured iterations, their figures or their trace."""

    def batch_paths(self, iteration: int) -> list[Path]:
        start = max(iteration, 0) * self.config.batch
        return [self.images[(start + k) % len(self.images)] for k in range(self.config.batch)]

    def input_names(self) -> str:
        """The first batch's input in words (the images' names, or the video's first frames)."""
        if self.video is not None:
            return f"{self.video.path.name}, frame 0" + (f"-{self.config.batch - 1}" if self.config.batch > 1 else "")
        return ", ".join(p.name for p in self.batch_paths(0))

    def decode(self) -> list[np.ndarray]:
        """The next batch of consecutive frames of the video (looping at its end)."""
        assert self.video is not None
        return self.video.read_batch()

    def load(self, paths: list[Path]) -> list[np.ndarray]:
        import cv2

        images = []
        for path in paths:
            image = cv2.imread(str(path))
            if image is None:
                raise OSError(f"image {path} could not be read any more")
            images.append(image)
        return images

    def preprocess(self, images: list[np.ndarray]) -> tuple[torch.Tensor, list[Letterboxed]]:
        import numpy as np
        import torch

        boxed = [letterbox(im, self.config.imgsz, self.built.stride, self.rect) for im in images]
        chw = [np.ascontiguousarray(b.image[:, :, ::-1].transpose(2, 0, 1)) for b in boxed]
        batch = torch.from_numpy(np.stack(chw)).float().div_(255.0)
        return batch, boxed

    def forward(self, batch: torch.Tensor, iteration: int | None = None, warmup: bool = False) -> Any:
        if self.runtime is not None:
            return self.runtime.run(batch, iteration, warmup)
        import torch

        with torch.inference_mode():
            return self.model(batch)

    def postprocess(self, output: Any, batch: torch.Tensor, boxed: list[Letterboxed]) -> list[torch.Tensor]:
        from ultralytics.utils.ops import scale_boxes

        results = self.nms(output)
        for det, b in zip(results, boxed, strict=True):
            if len(det):
                shape = (int(batch.shape[2]), int(batch.shape[3]))
                ratio_pad = ((b.ratio, b.ratio), b.pad)
                det[:, :4] = scale_boxes(shape, det[:, :4], b.original_shape, ratio_pad=ratio_pad)
        return results

    def nms(self, output: Any) -> list[Any]:
        from ultralytics.utils.nms import non_max_suppression

        prediction = output[0] if isinstance(output, tuple | list) else output
        return list(
            non_max_suppression(to_yolo_layout(prediction, self.built.output_format), self.config.conf, self.config.iou)
        )

    def count_candidates(self, output: Any) -> int:
        """Boxes whose best class score passes the confidence threshold, before NMS."""
        from hwprof.workload.outputs import head_of

        prediction = to_yolo_layout(head_of(output).float().cpu(), self.built.output_format)
        return int((prediction[:, 4:, :].amax(dim=1) > self.config.conf).sum())

    def count_detections(self, output: Any) -> int:
        return sum(len(d) for d in self.nms(output))

    def annotate(self, images: list[np.ndarray], detections: list[torch.Tensor]) -> list[np.ndarray]:
        """The boxes drawn on each frame (in place: the frame is not read again); `drawn` counts them."""
        from hwprof.workload.annotate import draw_boxes

        names = self.built.class_names
        self.drawn = [draw_boxes(im, det, names) for im, det in zip(images, detections, strict=True)]
        return images

    def encode(self, images: list[np.ndarray], paths: list[Path]) -> None:
        """The annotated frames written: to the video (encoded), or each image to its own file."""
        if self.sink is None:
            from hwprof.workload.annotate import open_sink

            assert self.annotate_to is not None
            fps = self.video.frame_rate if self.video is not None else None
            self.sink = open_sink(self.annotate_to, self.video is not None, fps)
        self.sink.write(images, [p.name for p in paths])

    def close(self) -> None:
        """The video released and the output flushed (a video writer never released leaves a file no player
        reads)."""
        if self.video is not None:
            self.video.close()
        if self.sink is not None:
            self.sink.close()

    def first_images(self) -> list[np.ndarray]:
        """The first batch's frames or images, read outside the iterations (a video's reader is untouched)."""
        if self.video is not None:
            return self.video.first_frames()
        return self.load(self.batch_paths(0))

    def sample_batch(self) -> torch.Tensor:
        """A preprocessed batch (the first), for one-off measurements outside the timed loop."""
        return self.preprocess(self.first_images())[0]

    def calibration(self, limit: int = CALIBRATION_IMAGES) -> Calibration:
        """The run's own letterboxed batches to calibrate a quantized model on: each of its images once (at most
        `limit`, whole batches), or a video's first batch of frames; made when the runtime asks."""
        from hwprof.workload.runtime import Calibration

        shape = "x".join(map(str, self.sample_batch().shape))
        if self.video is not None:
            return Calibration(lambda: [self.sample_batch()], f"{self.input_names()} ({shape})")
        count = max(1, min(len(self.images), limit) // self.config.batch)
        names = [p.name for i in range(count) for p in self.batch_paths(i)]
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")

        def batches() -> list[torch.Tensor]:
            return [self.preprocess(self.load(self.batch_paths(i)))[0] for i in range(count)]

        return Calibration(batches, f"{len(names)} images ({shown}) in {count} batch(es) of {shape}")

    def run_iteration(self, iteration: int, warmup: bool, clean: bool = False) -> list[torch.Tensor]:
        """One pass over the stages; `clean`: the "off" iteration of a paired pass (see hwprof.session.paired)."""
        glue = self.runtime.glue_threads() if self.runtime is not None else self.config.threads
        with torch_threads(glue):
            return self._run_stages(iteration, warmup, clean)

    def _run_stages(self, iteration: int, warmup: bool, clean: bool) -> list[torch.Tensor]:
        bus = self.bus
        bus.iteration, bus.warmup, bus.clean = iteration, warmup, clean
        paths = self.batch_paths(iteration) if self.video is None else []
        with bus.span("iteration", "iteration"):
            if self.video is not None:
                with bus.span("stage", "decode"):
                    images = self.decode()
            else:
                with bus.span("stage", "load"):
                    images = self.load(paths)
            with bus.span("stage", "preprocess"):
                batch, boxed = self.preprocess(images)
            to_device = getattr(self.runtime, "to_device", None)
            if to_device is not None:
                with bus.span("stage", "h2d"):
                    batch = to_device(batch)
            with bus.span("stage", "forward"):
                output = self.forward(batch, iteration, warmup)
            bus.input_shape(shape_text(batch.shape))
            with bus.span("stage", "postprocess"):
                detections = self.postprocess(output, batch, boxed)
                if to_device is not None:
                    self.runtime.synchronize()  # type: ignore[union-attr]
            if self.annotate_to is not None:
                with bus.span("stage", "annotate"):
                    drawn = self.annotate(images, detections)
                with bus.span("stage", "encode"):
                    self.encode(drawn, paths)
        if not warmup and not clean:  # counted after the iteration's span: outside every timed figure
            self.detections.append(sum(len(d) for d in detections))
            self.tally.add([p.name for p in paths], detections, self.drawn if self.annotate_to is not None else None)
        if warmup:  # counted outside the measured iterations: its ops never enter their figures or their trace
            self.candidates.append(self.count_candidates(output))
        return detections
