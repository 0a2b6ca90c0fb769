"""The pipeline's input: the images shipped in the ultralytics wheel (the default), a user's folder or image, or a
video file (read frame by frame: hwprof.workload.video)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from hwprof.core.uservalue import shown
from hwprof.workload.video import VideoInfo, probe_video

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp"}
VIDEO_SUFFIXES = {".mp4", ".m4v", ".mov", ".mkv", ".avi", ".webm", ".mpg", ".mpeg", ".wmv", ".flv", ".ts", ".3gp"}
"""Names that say "video": such a file OpenCV cannot open is blamed on its codec, not on its kind. Any other file
that is not an image is tried as a video all the same."""
DEFAULT_IMAGES = ("bus.jpg", "zidane.jpg")


SHOWN_SKIPPED = 3
"""The unreadable images a warning names one by one; the rest are counted."""


class ImageError(ValueError):
    """No usable image: a one-line message for the user (`skipped`: the files that could not be decoded)."""

    def __init__(self, message: str, skipped: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.skipped = skipped or []


@dataclass
class ImageSet:
    paths: list[Path]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """(path, reason) of files that could not be decoded."""
    source: str = "default"
    video: VideoInfo | None = None
    """The video the frames are read from (paths then holds it alone), or None for images."""


def is_video_input(paths: list[Path]) -> bool:
    """Whether the pipeline's input list is a video: discover() passes on only image files, or one video."""
    return len(paths) == 1 and paths[0].suffix.lower() not in IMAGE_SUFFIXES


def default_image_dir() -> Path:
    spec = importlib.util.find_spec("ultralytics")
    if spec is None or not spec.submodule_search_locations:
        raise ImageError("ultralytics is not installed, so its default images are missing; pass --images DIR")
    return Path(next(iter(spec.submodule_search_locations))) / "assets"


def _decodes(path: Path) -> str | None:
    """None when OpenCV decodes the file, else the reason it cannot."""
    import cv2

    try:
        image = cv2.imread(str(path))
    except cv2.error as exc:  # pragma: no cover - depends on the OpenCV build
        return f"OpenCV error: {exc}"
    if image is None:
        return "not a decodable image (unreadable, corrupt, or an unsupported format)"
    return None


def discover(images: str | None) -> ImageSet:
    """The validated image list; raises ImageError for a missing, empty or useless folder."""
    if images is None:
        folder = default_image_dir()
        paths = [folder / name for name in DEFAULT_IMAGES]
        missing = [p for p in paths if not p.is_file()]
        if missing:
            raise ImageError(f"default images missing from the ultralytics wheel: {missing}; pass --images DIR")
        return ImageSet(paths, source=f"default ({folder})")
    root = Path(images)
    if not root.exists():
        raise ImageError(f"image folder {shown(root)} does not exist")
    if root.is_file() and root.suffix.lower() not in IMAGE_SUFFIXES:
        info = probe_video(root, known_video=root.suffix.lower() in VIDEO_SUFFIXES)
        return ImageSet([root.resolve()], source=str(root.resolve()), video=info)
    files = [root] if root.is_file() else sorted(p for p in root.iterdir() if p.is_file())
    candidates = [p for p in files if p.suffix.lower() in IMAGE_SUFFIXES]
    if not candidates:
        videos = [p for p in files if p.suffix.lower() in VIDEO_SUFFIXES]
        hint = f"; a video is given as the file itself (--images {shown(videos[0])})" if videos else ""
        raise ImageError(f"no image files ({', '.join(sorted(IMAGE_SUFFIXES))}) in {shown(root)}{hint}")
    good: list[Path] = []
    skipped: list[tuple[str, str]] = []
    for path in candidates:
        reason = _decodes(path)
        if reason is None:
            good.append(path.resolve())
        else:
            skipped.append((str(path), reason))
    if not good:
        raise ImageError(
            f"none of the {len(candidates):,} image files in {shown(root)} could be read; fix: pass --images with "
            "images OpenCV decodes (JPEG, PNG, BMP, TIFF, WebP)",
            skipped,
        )
    return ImageSet(good, skipped, source=str(root.resolve()))


def skipped_lines(skipped: list[tuple[str, str]]) -> list[str]:
    """The unreadable images as a bounded warning: the first SHOWN_SKIPPED by name and reason, then a count of
    the rest (1,000 unreadable images are four lines, not 1,000)."""
    lines = [f"skipping {shown(path)}: {reason}" for path, reason in skipped[:SHOWN_SKIPPED]]
    if len(skipped) > SHOWN_SKIPPED:
        lines.append(f"... and {len(skipped) - SHOWN_SKIPPED:,} more unreadable images")
    return lines
