"""Whether a process still runs, as /proc says: what may still write a run's files."""

from __future__ import annotations

import os
from pathlib import Path


def live(pid: int) -> bool:
    """The process exists and is not a zombie whose every thread has exited (such a zombie holds no files and
    writes nothing: a forked worker whose zygote was killed with it stays one until init reaps it, and PID 1 in a
    container may never do so). A zombie leader whose other threads still run is live."""
    proc = Path(f"/proc/{pid}")
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X") or len(os.listdir(proc / "task")) > 1
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
