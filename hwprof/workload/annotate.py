"""The pipeline's output (`collect --annotate OUT`): each frame with its boxes drawn, written as a video or as
images.

- annotate: the detections drawn on the frame (OpenCV rectangles and labels), in place.
- encode: a video input's frames go to one video through `cv2.VideoWriter` (FFmpeg's encoder inside OpenCV:
  what the `encode` stage times); a folder's images each to an image file of the same name (`cv2.imwrite`).

Each pass writes its own copy in its pass folder, so that every pass runs (and measures) the same stages; the
session keeps one of them at OUT when the passes are done (hwprof.session.annotated). OUT is checked before
the first pass by writing a one-frame file beside it (check_target).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hwprof.core.uservalue import shown
from hwprof.workload.video import VideoError, VideoInfo, quiet_opencv

if TYPE_CHECKING:
    import numpy as np

VIDEO_FOURCC = {".mp4": "mp4v", ".m4v": "mp4v", ".mov": "mp4v", ".mkv": "mp4v", ".avi": "MJPG"}
"""The codec written per container suffix: MPEG-4 part 2 (encoded by the FFmpeg inside the opencv-python wheel;
its H.264 encoder is not there) and Motion JPEG for AVI."""
DEFAULT_FPS = 30.0
"""The frame rate of the output when the input video states none."""
PASS_OUTPUT = "annotated"
"""A pass's own copy: passes/<pass>/annotated<.suffix> (a video) or passes/<pass>/annotated/ (images)."""
BOX_COLOUR = (56, 56, 255)
TEXT_COLOUR = (255, 255, 255)


def draw_detections(image: np.ndarray, detections: Any, names: Mapping[int, str] | None = None) -> np.ndarray:
    """Each box (x1 y1 x2 y2 conf cls rows, in the image's pixels) drawn on `image` with its class (its name where
    `names` has it: a trained model's "Normal") and score."""
    draw_boxes(image, detections, names)
    return image


def draw_boxes(image: np.ndarray, detections: Any, names: Mapping[int, str] | None = None) -> int:
    """draw_detections in place; the boxes drawn (the run's detections record says it beside the boxes kept)."""
    import cv2

    rows = detections.detach().cpu().numpy() if hasattr(detections, "detach") else detections
    drawn = 0
    for x1, y1, x2, y2, conf, cls in rows[:, :6]:
        p1, p2 = (int(x1), int(y1)), (int(x2), int(y2))
        cv2.rectangle(image, p1, p2, BOX_COLOUR, 2, cv2.LINE_AA)
        label = f"{(names or {}).get(int(cls), int(cls))} {conf:.2f}"
        (w, h), base = cv2.getTextSize(label, cv2.FONT_HERSHEY_SIMPLEX, 0.5, 1)
        top = max(p1[1] - h - base, 0)
        cv2.rectangle(image, (p1[0], top), (p1[0] + w, top + h + base), BOX_COLOUR, -1)
        cv2.putText(image, label, (p1[0], top + h), cv2.FONT_HERSHEY_SIMPLEX, 0.5, TEXT_COLOUR, 1, cv2.LINE_AA)
        drawn += 1
    return drawn


class FrameSink(Protocol):
    path: Path
    written: int

    def write(self, frames: Sequence[np.ndarray], names: Sequence[str]) -> None: ...

    def close(self) -> None: ...


class VideoSink:
    """Frames into one video file; the writer opens at the first frame (its size is the frame's)."""

    def __init__(self, path: Path, fps: float | None) -> None:
        self.path = path
        self.fps = fps or DEFAULT_FPS
        self.written = 0
        self._writer: Any = None

    def write(self, frames: Sequence[np.ndarray], names: Sequence[str]) -> None:

        for frame in frames:
            if self._writer is None:
                self._writer = open_writer(self.path, self.fps, frame.shape[1], frame.shape[0])
            self._writer.write(frame)
            self.written += 1

    def close(self) -> None:
        """Flush the encoder and write the container's index: a video never released cannot be read."""
        if self._writer is not None:
            self._writer.release()
            self._writer = None


class ImageSink:
    """Each image into a folder under its own name (a name read again is written again, with the same boxes)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder
        self.written = 0

    def write(self, frames: Sequence[np.ndarray], names: Sequence[str]) -> None:
        import cv2

        self.path.mkdir(parents=True, exist_ok=True)
        for frame, name in zip(frames, names, strict=True):
            target = self.path / name
            if not cv2.imwrite(str(target), frame):
                raise OSError(f"OpenCV could not write {shown(target)}")
            self.written += 1

    def close(self) -> None:
        return None


def open_writer(path: Path, fps: float, width: int, height: int) -> Any:
    """cv2.VideoWriter for `path`'s container; VideoError (one line) when OpenCV refuses it."""
    fourcc = VIDEO_FOURCC.get(path.suffix.lower())
    if fourcc is None:
        raise VideoError(f"{shown(path)}: a video output is one of {', '.join(VIDEO_FOURCC)}")
    with quiet_opencv() as cv2:
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), fps, (width, height))
    if not writer.isOpened():
        raise VideoError(f"OpenCV cannot write a {fourcc} video to {shown(path)}")
    return writer


def pass_output(pass_dir: Path, target: Path, video: bool) -> Path:
    """Where a pass writes its own copy of the output going to `target`."""
    return pass_dir / (PASS_OUTPUT + target.suffix.lower() if video else PASS_OUTPUT)


def open_sink(path: Path, video: bool, fps: float | None) -> FrameSink:
    return VideoSink(path, fps) if video else ImageSink(path)


@dataclass
class Target:
    """OUT, checked: a video file or a folder of images, and what it will hold in words."""

    path: Path
    video: bool

    def describe(self) -> str:
        if self.video:
            return f"a {VIDEO_FOURCC[self.path.suffix.lower()]} video"
        return "a folder of images"


def check_target(out: Path, inputs: Sequence[Path], video: VideoInfo | None) -> Target:
    """OUT as the passes will write it, checked before they start: ValueError (one line) when it cannot be
    written. A video input writes a video (its suffix picks the codec: VIDEO_FOURCC), probed by writing one
    frame beside it; images write a folder, which may not be the one they are read from."""
    if out.is_dir() and video is not None:
        raise ValueError(f"--annotate {shown(out)} is a folder; a video input writes a video file (e.g. OUT.mp4)")
    if video is None:
        return _check_folder(out, inputs)
    if out.suffix.lower() not in VIDEO_FOURCC:
        raise ValueError(f"--annotate {shown(out)}: a video output ends in one of {', '.join(VIDEO_FOURCC)}")
    if out.resolve() == Path(video.path).resolve():
        raise ValueError(f"--annotate {shown(out)} is the input video itself")
    _writable_parent(out)
    probe = out.with_name(f".{out.stem}.hwprof-check{out.suffix}")
    try:
        writer = open_writer(probe, DEFAULT_FPS, video.width, video.height)
        import numpy as np

        writer.write(np.zeros((video.height, video.width, 3), dtype=np.uint8))
        writer.release()
        if not probe.is_file() or probe.stat().st_size == 0:
            raise ValueError(f"--annotate {shown(out)}: OpenCV wrote nothing there (a full disk?)")
    except VideoError as exc:
        raise ValueError(f"--annotate: {exc}") from None
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()
    return Target(out, True)


def _check_folder(out: Path, inputs: Sequence[Path]) -> Target:
    if out.suffix.lower() in VIDEO_FOURCC and not out.is_dir():
        raise ValueError(
            f"--annotate {shown(out)} is a video name, but the input is images (of different sizes): give a "
            "folder for the annotated images, or a video as --images"
        )
    if out.exists() and not out.is_dir():
        raise ValueError(f"--annotate {shown(out)} exists and is not a folder; annotated images go to a folder")
    if out.is_dir():
        sources = {p.resolve().parent for p in inputs}
        if out.resolve() in sources:
            raise ValueError(f"--annotate {shown(out)} is where the images are read from: they would be overwritten")
        if not os.access(out, os.W_OK | os.X_OK):
            raise ValueError(f"--annotate {shown(out)}: the folder is not writable")
        return Target(out, False)
    _writable_parent(out)
    return Target(out, False)


def _writable_parent(out: Path) -> None:
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"--annotate {shown(out)}: the folder {shown(parent)} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"--annotate {shown(out)}: the folder {shown(parent)} is not writable")
