"""Which frames are the program's own code: where --program-model's name is looked up, and where a model's name
and place come from.

A frame is the program's when its module is the program's main (`__name__ == "__main__"`: the script, or the
module `-m` ran, wherever it is installed), or its file is outside every library folder: the interpreter's
standard library, every site-packages and dist-packages (sysconfig's and site's paths, and any folder of those
names on another path), hwprof and torch. A library's local names are its internals: ultralytics' DetectionModel
calls each of its layers `m` (`for m in self.model`), and its constructor runs that loop once to find its strides,
before the program's own `m` is even bound.
"""

from __future__ import annotations

import importlib.util
import os
import site
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import FrameType

_TORCH_SPEC = importlib.util.find_spec("torch")
TORCH_DIR = Path(str(_TORCH_SPEC.origin if _TORCH_SPEC else "torch/__init__.py")).parent
"""torch's folder, found without importing it: the command line imports this module, and torch costs a second."""
_HWPROF_DIR = Path(__file__).parents[1]
LIBRARY_FOLDER_NAMES = ("site-packages", "dist-packages")


def _with_sep(path: str | Path) -> str:
    return os.path.join(str(path), "")


@cache
def library_dirs() -> tuple[str, ...]:
    """The folders whose files are not the program's (each as written and resolved, with a trailing separator)."""
    paths = sysconfig.get_paths()
    found: list[str | Path] = [paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths]
    found += site.getsitepackages() if hasattr(site, "getsitepackages") else []
    found.append(site.getusersitepackages())
    found += [_HWPROF_DIR, TORCH_DIR]
    out = {_with_sep(p) for p in found} | {_with_sep(Path(p).resolve()) for p in found}
    return tuple(sorted(out))


@cache
def is_library_file(filename: str) -> bool:
    """A file of the standard library, an installed package, hwprof or torch (or frozen: importlib's own)."""
    if filename.startswith("<frozen"):
        return True
    if filename.startswith(library_dirs()):
        return True
    return any(f"{os.sep}{name}{os.sep}" in filename for name in LIBRARY_FOLDER_NAMES)


@cache
def _is_hwprof_or_torch(filename: str) -> bool:
    return filename.startswith((_with_sep(_HWPROF_DIR), _with_sep(TORCH_DIR))) or filename.startswith(
        (_with_sep(_HWPROF_DIR.resolve()), _with_sep(TORCH_DIR.resolve()))
    )


def is_program_frame(frame: FrameType) -> bool:
    filename = frame.f_code.co_filename
    if _is_hwprof_or_torch(filename):
        return False  # hwprof's launcher runs the program as __main__ too: its own frames are never the program's
    return frame.f_globals.get("__name__") == "__main__" or not is_library_file(filename)


def program_frames(start: FrameType | None = None) -> Iterator[FrameType]:
    """The program's frames, innermost first, from `start` (the caller's caller by default) outward."""
    frame: FrameType | None = start if start is not None else sys._getframe(2)
    while frame is not None:
        if is_program_frame(frame):
            yield frame
        frame = frame.f_back


def library_frames(start: FrameType) -> Iterator[FrameType]:
    """The frames of libraries other than hwprof and torch, innermost first, from `start` outward."""
    frame: FrameType | None = start
    while frame is not None:
        if not _is_hwprof_or_torch(frame.f_code.co_filename) and not is_program_frame(frame):
            yield frame
        frame = frame.f_back


@dataclass(frozen=True)
class Place:
    """A line of the program's code: where a frame was when hwprof looked (the call running there)."""

    file: str
    line: int

    @classmethod
    def of(cls, frame: FrameType) -> Place:
        return cls(shown_path(frame.f_code.co_filename), frame.f_lineno or 0)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def shown_path(filename: str) -> str:
    """A file as a user reads it: relative to the program's folder where it is below it."""
    try:
        relative = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if relative.startswith("..") else relative
