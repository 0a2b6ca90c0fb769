"""What a run with a video input or an annotated output records: the video (run.json's `images.video`), per pass
the frames it decoded and wrote (result.json's and run.json's `passes.<pass>.frames`), and which pass's output
was kept where (run.json's `annotated`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hwprof.schema.bounds import Count, NonNegative
from hwprof.schema.codec import Record


@dataclass(kw_only=True)
class VideoDoc(Record):
    """The video input as the collect probed it (run.json's and images.json's `images.video`:
    hwprof.workload.video.VideoInfo as written)."""

    path: str | None = None
    width: Count | None = None
    height: Count | None = None
    frames: Count | None = None
    """As the container states it (None: it does not)."""
    fps: NonNegative | None = None
    codec: str | None = None
    """The FOURCC OpenCV reports ("FMP4", "h264", "MJPG")."""
    backend: str | None = None


@dataclass(kw_only=True)
class FramesDoc(Record):
    """One pass's frames: read from the video (warm-up and clean iterations included), the times the video ended
    and was read again from its first frame, and the annotated frames written (and where, in the run
    directory)."""

    read: Count | None = None
    """Frames decoded from the video (None: the input is images)."""
    rewinds: Count | None = None
    """Times the video ended before the pass did and reading began again at its first frame."""
    written: Count | None = None
    """Annotated frames (or images) written (None: no --annotate)."""
    output: str | None = None
    """The pass's own copy of the output, relative to the run directory (moved to --annotate's path when it is
    the copy kept)."""


@dataclass(kw_only=True)
class AnnotatedDoc(Record):
    """The annotated output kept at --annotate's path: the pass whose frames it holds, and how many."""

    path: str | None = None
    pass_name: str | None = field(default=None, metadata={"key": "pass"})
    frames: Count | None = None
    kind: str | None = None
    """"video" or "images"."""
    error: str | None = None
    """Why no output was kept (no pass wrote one, or it could not be moved there)."""
