"""The boxes NMS kept in a pass's measured iterations, counted per image and class from the pipeline's own
postprocess output (the boxes the report's "detections" line, run.json and hwprof.load's table show, and the ones
--annotate draws): the first thing a user checks to trust that their model ran right.

An image list is read round and round, so an image is met in several iterations: its entry holds its first
measured iteration's boxes, and counts the iterations that kept other ones (a model whose scores sit at the
threshold). A video's frames are each met once: they are summed up (frames, boxes per frame, boxes by class),
not listed.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hwprof.schema.detections import ClassBoxes, DetectionsDoc, ImageDetections, VideoDetections


def class_ids(detections: Any) -> list[int]:
    """The class id of each box of one image's NMS output (rows x1 y1 x2 y2 conf cls)."""
    if detections is None or len(detections) == 0:
        return []
    column = detections[:, 5]
    values = column.tolist() if hasattr(column, "tolist") else list(column)
    return [int(v) for v in values]


@dataclass
class _Image:
    counts: Counter[int]
    iterations: int = 1
    differed: int = 0
    drawn: int | None = None


@dataclass
class DetectionTally:
    """Boxes by class per image (or over a video's frames) of the measured iterations, fed by add()."""

    names: Mapping[int, str]
    conf: float
    iou: float
    video: str | None = None
    """The video's file name (None: the input is images)."""
    images: dict[str, _Image] = field(default_factory=dict)
    frame_boxes: list[int] = field(default_factory=list)
    """A video's boxes per measured frame."""
    frame_classes: Counter[int] = field(default_factory=Counter)
    frames_drawn: int | None = None

    def add(self, keys: Sequence[str], detections: Sequence[Any], drawn: Sequence[int] | None = None) -> None:
        """One measured iteration: each image's (or frame's) NMS output, and the boxes --annotate drew on it."""
        for k, det in enumerate(detections):
            ids = class_ids(det)
            shown = None if drawn is None else int(drawn[k])
            if self.video is not None:
                self.frame_boxes.append(len(ids))
                self.frame_classes.update(ids)
                if shown is not None:
                    self.frames_drawn = (self.frames_drawn or 0) + shown
                continue
            counts = Counter(ids)
            seen = self.images.get(keys[k])
            if seen is None:
                self.images[keys[k]] = _Image(counts, drawn=shown)
                continue
            seen.iterations += 1
            seen.differed += int(counts != seen.counts)

    def _classes(self, counts: Counter[int]) -> list[ClassBoxes]:
        """Largest class first (ties by id)."""
        ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return [ClassBoxes.of(id=i, name=str(self.names.get(i, i)), boxes=n) for i, n in ordered]

    def doc(self, pass_name: str | None) -> DetectionsDoc | None:
        """result.json's record; None where no measured iteration ran."""
        out = DetectionsDoc.of(pass_name=pass_name, conf=self.conf, iou=self.iou)
        if self.video is not None:
            if not self.frame_boxes:
                return None
            boxes = self.frame_boxes
            video = VideoDetections.of(
                video=self.video,
                frames=len(boxes),
                boxes=sum(boxes),
                per_frame_min=min(boxes),
                per_frame_median=float(statistics.median(boxes)),
                per_frame_max=max(boxes),
                frames_with_boxes=sum(1 for n in boxes if n),
                classes=self._classes(self.frame_classes),
            )
            if self.frames_drawn is not None:
                video.update(drawn=self.frames_drawn)
            out.update(video=video)
            return out
        if not self.images:
            return None
        entries = []
        for name, image in self.images.items():
            entry = ImageDetections.of(
                image=name,
                boxes=sum(image.counts.values()),
                classes=self._classes(image.counts),
                iterations=image.iterations,
                differed=image.differed,
            )
            if image.drawn is not None:
                entry.update(drawn=image.drawn)
            entries.append(entry)
        out.update(images=entries)
        return out
