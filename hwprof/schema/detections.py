"""What NMS kept in a pass's measured iterations (result.json's `detections`, copied to run.json's `detections`
from the pass the stages come from): per image, the boxes kept and of which class; for a video, a summary over
its frames (frames, boxes per frame, boxes by class) rather than one entry per frame.

A run written before hwprof recorded them has no `detections`: readers take None for "not recorded".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hwprof.schema.bounds import Count, NonNegative, Share
from hwprof.schema.codec import Record


@dataclass(kw_only=True)
class ClassBoxes(Record):
    """The boxes of one class: its id in the model's output and its name (the checkpoint's, else the id)."""

    id: int | None = None
    name: str | None = None
    boxes: Count = 0


@dataclass(kw_only=True)
class ImageDetections(Record):
    """One image's boxes, as its first measured iteration kept them, largest class first."""

    image: str | None = None
    """The image's file name."""
    boxes: Count = 0
    classes: list[ClassBoxes] = field(default_factory=list)
    iterations: Count | None = None
    """Measured iterations that ran the image (an image list is read round and round)."""
    differed: Count | None = None
    """Of those, the iterations whose boxes by class were not the first one's (0: all the same)."""
    drawn: Count | None = None
    """Boxes `--annotate` drew on the image (None: no --annotate)."""


@dataclass(kw_only=True)
class VideoDetections(Record):
    """A video's measured frames: how many boxes per frame, and by class over them all."""

    video: str | None = None
    """The video's file name."""
    frames: Count = 0
    boxes: Count = 0
    """Boxes over all the frames."""
    per_frame_min: Count | None = None
    per_frame_median: NonNegative | None = None
    per_frame_max: Count | None = None
    frames_with_boxes: Count | None = None
    classes: list[ClassBoxes] = field(default_factory=list)
    drawn: Count | None = None
    """Boxes `--annotate` drew over the frames (None: no --annotate)."""

    @property
    def per_frame(self) -> float:
        return self.boxes / self.frames if self.frames else 0.0


@dataclass(kw_only=True)
class DetectionsDoc(Record):
    """The boxes NMS kept (confidence over `conf`, overlap under `iou`) in one pass's measured iterations."""

    pass_name: str | None = field(default=None, metadata={"key": "pass"})
    conf: Share | None = None
    iou: Share | None = None
    images: list[ImageDetections] | None = None
    """One entry per image, in the order first run (None for a video input)."""
    video: VideoDetections | None = None
