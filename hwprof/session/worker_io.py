"""What a pass's worker tells the session, and how: progress lines on stdout, the exit status of a full disk
(with its path on stdout: worker.log is on the same full disk), a stderr that survives a full disk, and the
one-line error of a failed pass."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from hwprof.core.atomic import DiskFullError

EXIT_DISK_FULL = 4
"""The disk filled up: the session marks the run failed with the path (sent as a `disk_full` progress line,
since worker.log is on the same full disk)."""


_PINNED: list[TextIO] = []
"""The worker's own stdout, pinned before a user's program runs in it (hwprof.program.launch sends the program's
sys.stdout to the log): the progress lines must still reach hwprof."""


def pin_stdout() -> None:
    """Progress lines go to a descriptor of hwprof's own from now on, a duplicate of the current stdout's: whatever
    sys.stdout becomes, and whatever the program does to descriptor 1 (a program that closed it first made
    hwprof's own progress line, written from its model-call hook, fail the run as the program's OSError)."""
    sys.stdout.flush()
    try:
        own: TextIO = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")  # dup: not inherited by exec
    except (OSError, ValueError, AttributeError):  # no descriptor behind it (a test's capture): as it is
        own = sys.stdout
    _PINNED[:] = [own]


@contextlib.contextmanager
def progress_to(stream: Any) -> Iterator[None]:
    """Progress lines go to `stream` for the block (an attached service's window: hwprof.agent)."""
    saved = list(_PINNED)
    _PINNED[:] = [stream]
    try:
        yield
    finally:
        _PINNED[:] = saved


def progress(**fields: Any) -> None:
    print(json.dumps(fields), file=_PINNED[0] if _PINNED else sys.stdout, flush=True)


@dataclass(frozen=True)
class ProgressEvent:
    """A worker's progress line read back: its phase and how far it got (done of total), or the path a full
    disk refused (disk_full_exit)."""

    phase: str = ""
    done: int | None = None
    total: int | None = None
    disk_full: str | None = None
    disk_full_errno: int = errno.ENOSPC
    """What refused it: ENOSPC, EDQUOT, or EFBIG (the file-size limit)."""


def progress_from_json(line: str) -> ProgressEvent | None:
    """A line of a worker's stdout as a progress event; None when it is not a JSON object (other output)."""
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    return ProgressEvent(
        str(doc.get("phase", "")),
        doc.get("done"),
        doc.get("total"),
        str(doc["disk_full"]) if "disk_full" in doc else None,
        doc["errno"] if isinstance(doc.get("errno"), int) else errno.ENOSPC,
    )


def disk_full_exit(exc: DiskFullError) -> int:
    """Tell the session which path found the disk full (stdout is a pipe, not the full disk)."""
    progress(disk_full=str(exc.path), errno=exc.errno)
    return EXIT_DISK_FULL


class LossyStream:
    """stderr (worker.log) that drops what a full disk refuses: a failed log line must not stop the pass
    from closing its collectors and writing its result."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except OSError:
            return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError):
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def is_user_error(exc: BaseException) -> bool:
    from hwprof.workload.images import ImageError
    from hwprof.workload.runtime import RuntimeUnavailable
    from hwprof.workload.video import VideoError
    from hwprof.workload.zoo import UnknownModelError

    user_errors: tuple[type[BaseException], ...] = (
        UnknownModelError,
        ImageError,
        VideoError,
        OSError,
        RuntimeUnavailable,
    )
    try:
        from hwprof.workload.checkpoint_globals import WeightsError

        user_errors += (WeightsError,)
    except ImportError:  # pragma: no cover
        pass
    return isinstance(exc, user_errors)


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
