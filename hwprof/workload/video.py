"""A video as the pipeline's input: probed once before the passes, then read frame by frame in each pass.

Frames are read with OpenCV's `cv2.VideoCapture` (its FFmpeg backend: demuxing, the codec's decoder and the
conversion to BGR all happen inside `read()`, which is what the pipeline's `decode` stage times). A batch is
made of consecutive frames. When the video ends before the pass does, the reader starts again from its first
frame (it loops): a pass's iterations are set by the collectors (warm-up, measured, a paired pass's clean
ones, a sampler's wish for more), so stopping at the last frame would cut passes short in ways no option
controls. The rewind happens inside the decode stage of the iteration that needed it and is counted.

A video whose frame size changes (clips of two sizes joined) is refused by the probe, with the sizes and the frame
where they change: OpenCV would give every frame at the first size, rescaled without a word, so the timings of
two workloads would read as one (hwprof.workload.coded_size says which codecs this is checked for).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.core.uservalue import shown
from hwprof.workload.coded_size import HEADER_BYTES, packet_size

if TYPE_CHECKING:
    import numpy as np

FFMPEG_QUIET = "-8"
"""OPENCV_FFMPEG_LOGLEVEL for FFmpeg's AV_LOG_QUIET: a file that is not a video must give one line (ours), not
FFmpeg's "moov atom not found" before it. A user's own setting of the variable is kept."""
CONVERT_FIX = "fix: convert it, e.g. `ffmpeg -i IN -c:v mpeg4 -q:v 3 OUT.mp4`"
SIZE_SCAN_PACKETS = 50_000
"""How many packets (frames) the probe reads for a change of frame size: demuxing only, no decoding (a few
seconds at most); a pass that reads further than this reads frames whose size was not checked."""


class VideoError(ValueError):
    """A video hwprof cannot read or write: a one-line message for the user."""


@contextlib.contextmanager
def quiet_opencv() -> Iterator[Any]:
    """cv2 with FFmpeg's and OpenCV's own log lines off while a file is probed (restored after)."""
    os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", FFMPEG_QUIET)
    import cv2

    level = cv2.utils.logging.getLogLevel()
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)
    try:
        yield cv2
    finally:
        cv2.utils.logging.setLogLevel(level)


def fourcc_text(code: float) -> str:
    """OpenCV's CAP_PROP_FOURCC as its four characters ("FMP4"), or "" when it is none or not printable."""
    raw = (int(code) & 0xFFFFFFFF).to_bytes(4, "little")
    text = raw.decode("ascii", errors="replace")
    return text if text.isprintable() and raw != b"\0\0\0\0" and raw != b"\xff\xff\xff\xff" else ""


@dataclass
class VideoInfo:
    """What the probe read of a video: its size, frame count and rate as the container states them."""

    path: str
    width: int
    height: int
    frames: int | None
    """CAP_PROP_FRAME_COUNT; None where the container does not say (a stream)."""
    fps: float | None
    """CAP_PROP_FPS; None where the container does not say."""
    codec: str
    """The FOURCC OpenCV reports ("FMP4" for MPEG-4 part 2, "h264", "MJPG"); "" when it reports none."""
    backend: str

    def to_json(self) -> dict[str, Any]:
        """images.json's and run.json's `images.video` (read back as hwprof.schema.frames.VideoDoc)."""
        return asdict(self)

    def describe(self) -> str:
        frames = f"{self.frames:,} frames" if self.frames is not None else "frame count not stated"
        fps = f" at {self.fps:g} fps" if self.fps else ""
        codec = f", {self.codec}" if self.codec else ""
        return f"video {Path(self.path).name} ({self.width}x{self.height}, {frames}{fps}{codec})"


def probe_video(path: Path, known_video: bool) -> VideoInfo:
    """Open `path` as a video and decode its first frame; VideoError (one line) when OpenCV cannot.
    `known_video`: the name has a video suffix (the message then blames the codec, not the file's kind)."""
    with quiet_opencv() as cv2:
        capture = cv2.VideoCapture(str(path))
        try:
            if not capture.isOpened():
                if known_video:
                    raise VideoError(
                        f"OpenCV cannot open the video {shown(path)}: damaged, or in a container or codec its FFmpeg "
                        f"does not read; {CONVERT_FIX}"
                    )
                raise VideoError(f"{shown(path)} is neither an image nor a video OpenCV can open")
            codec = fourcc_text(capture.get(cv2.CAP_PROP_FOURCC))
            ok, frame = capture.read()
            if not ok or frame is None:
                raise VideoError(
                    f"OpenCV opened {shown(path)} ({codec or 'codec not named'}) but decodes no frame from it: an "
                    f"empty video or a codec its FFmpeg cannot decode; {CONVERT_FIX}"
                )
            sizes = frame_sizes(path)
            if sizes is not None and len(sizes) > 1:
                raise VideoError(size_change_message(path, sizes))
            count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
            fps = float(capture.get(cv2.CAP_PROP_FPS))
            return VideoInfo(
                str(path),
                int(frame.shape[1]),
                int(frame.shape[0]),
                count if count > 0 else None,
                fps if fps > 0 and fps == fps else None,
                codec,
                str(capture.getBackendName()),
            )
        finally:
            capture.release()


def frame_sizes(path: Path, limit: int = SIZE_SCAN_PACKETS) -> list[tuple[int, tuple[int, int]]] | None:
    """Each frame size the video's packets state, with the first frame (packet, in decoding order) that has it;
    None when its first packet states none (a codec or container hwprof.workload.coded_size does not read: not
    checked). Reads the packets undecoded (OpenCV's CAP_PROP_FORMAT -1)."""
    with quiet_opencv() as cv2:
        capture = cv2.VideoCapture(str(path))
        try:
            if not capture.isOpened() or not capture.set(cv2.CAP_PROP_FORMAT, -1):
                return None
            fourcc = fourcc_text(capture.get(cv2.CAP_PROP_FOURCC))
            sizes: list[tuple[int, tuple[int, int]]] = []
            for index in range(limit):
                ok, packet = capture.read()
                if not ok or packet is None:
                    break
                size = packet_size(packet.reshape(-1)[:HEADER_BYTES].tobytes(), fourcc)
                if size is None and index == 0:
                    return None
                if size is not None and (not sizes or sizes[-1][1] != size):
                    sizes.append((index, size))
            return sizes
        finally:
            capture.release()


def size_change_message(path: Path, sizes: list[tuple[int, tuple[int, int]]]) -> str:
    """One line: the sizes and where each begins, and what to do."""
    spans = []
    for k, (first, (width, height)) in enumerate(sizes):
        if k + 1 < len(sizes):
            spans.append(f"{width}x{height} up to frame {sizes[k + 1][0] - 1:,}")
        else:
            spans.append(f"{width}x{height} from frame {first:,}")
    width, height = sizes[0][1]
    return (
        f"video {shown(path)} changes frame size: {', '.join(spans)} (clips joined?); OpenCV would rescale every "
        f"frame to {width}x{height} without a word and time them as one workload; fix: cut it at the change, or "
        f"scale it to one size, e.g. `ffmpeg -i IN -vf scale={width}:{height} -c:v mpeg4 -q:v 3 OUT.mp4`"
    )


class VideoReader:
    """Consecutive frames of one video, `batch` at a time, looping at its end; opened at the first read (a
    pipeline built for a one-off forward never opens it)."""

    def __init__(self, path: Path, batch: int) -> None:
        self.path = path
        self.batch = batch
        self._capture: Any = None
        self.frames_read = 0
        """Frames decoded by read_batch (warm-up and clean iterations included)."""
        self.rewinds = 0
        """Times the video ended and reading began again at its first frame."""
        self.fps: float | None = None
        self._first: list[np.ndarray] | None = None

    def _open(self) -> Any:
        import cv2

        capture = cv2.VideoCapture(str(self.path))
        if not capture.isOpened():
            raise VideoError(f"video {shown(self.path)} could not be opened any more")
        fps = float(capture.get(cv2.CAP_PROP_FPS))
        self.fps = fps if fps > 0 and fps == fps else None
        return capture

    def read_batch(self) -> list[np.ndarray]:
        """The next `batch` frames; at the end of the video, the first frames again."""
        if self._capture is None:
            self._capture = self._open()
        frames: list[np.ndarray] = []
        while len(frames) < self.batch:
            ok, frame = self._capture.read()
            if ok and frame is not None:
                frames.append(frame)
                continue
            self._rewind(any_read=bool(frames) or self.frames_read > 0)
        self.frames_read += len(frames)
        return frames

    def _rewind(self, any_read: bool) -> None:
        """Back to the first frame (by reopening: a seek to frame 0 is not exact in every container)."""
        if not any_read:
            raise VideoError(f"video {shown(self.path)} gave no frame")
        self._capture.release()
        self._capture = self._open()
        self.rewinds += 1

    def first_frames(self) -> list[np.ndarray]:
        """The first batch of the video, read once by a capture of its own (the pass's reader is untouched): the
        sample input of one-off measurements outside the iterations."""
        if self._first is None:
            reader = VideoReader(self.path, self.batch)
            try:
                self._first = reader.read_batch()
                self.fps = reader.fps
            finally:
                reader.close()
        return [f.copy() for f in self._first]

    def close(self) -> None:
        if self._capture is not None:
            self._capture.release()
            self._capture = None

    @property
    def frame_rate(self) -> float | None:
        """The video's frame rate (opening it when it has not been)."""
        if self.fps is None and self._capture is None:
            capture = self._open()
            capture.release()
        return self.fps
