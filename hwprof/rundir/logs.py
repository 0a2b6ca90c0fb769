"""Child processes' logs in a run directory or a sweep's folder: a pass's worker.log, an advise worker's or
collect's log, a sweep point's log. The child writes its stderr into the file this opens; its readers take
the lines back (why it failed is in its last lines)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from hwprof.core.atomic import atomic_write_bytes


@contextmanager
def child_log(path: Path) -> Iterator[TextIO]:
    """The log `path`, created empty and open for a child process's stderr (not atomic: it grows while
    the child runs, and what it wrote before a crash is what tells why)."""
    with open(path, "w") as log:
        yield log


def log_lines(path: Path) -> list[str]:
    """The log's lines (undecodable bytes replaced); none when it cannot be read."""
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def write_log(path: Path, content: bytes) -> None:
    """A log a child wrote elsewhere (a cluster sweep's point, on its node), written whole."""
    atomic_write_bytes(path, content)
