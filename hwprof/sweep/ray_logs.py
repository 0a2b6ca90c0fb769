"""Ray's own messages on the driver go to a file in the sweep's folder, never to the console.

Two sources reach the console of a connected driver even with log_to_driver=False:
- the C++ core worker's log lines (gRPC retries, "Failed to connect to GCS ...") on file descriptor 2;
- the driver's error subscriber (a thread ray.init starts), which prints every error the cluster publishes
  ("(raylet) Raylet is terminated ...", 20 lines of state dump, "Task run_point failed ...") to
  sys.stdout: about 40 lines, twice, when a node dies.
While connected, descriptor 2 points at the log file and the subscriber's printer writes there too; hwprof's
own lines (progress, table, `hwprof: error:`) go to stdout as before. Everything is restored on stop, after
ray.shutdown, so that a traceback or an error after the sweep reaches the terminal.

Before the sweep's folder exists (connecting and checking the cluster, which must leave nothing behind
when refused) the file is a temporary one; move_to() carries it into the folder when the sweep starts.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hwprof.schema.codec import JsonObject

RAY_LOGS_DIR = "ray_logs"
DRIVER_LOG = "driver.log"


def _printer(fd: int) -> Callable[[JsonObject, bool], None]:
    """Ray's print_to_stdstream(data, ignore_prefix), writing the lines to fd instead of sys.stdout/err."""

    def write(data: JsonObject, ignore_prefix: bool = False) -> None:
        prefix = "" if ignore_prefix else f"({data.get('pid', '')}) "
        text = "".join(f"{prefix}{line}\n" for line in data.get("lines", []))
        os.write(fd, text.encode(errors="replace"))

    return write


class RayLogs:
    """Descriptor 2 and Ray's driver-side printer redirected into one file, from start() to stop()."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self._saved_fd2: int | None = None
        self._original_printer: Any = None

    def start(self) -> RayLogs:
        import ray._private.worker as ray_worker

        fd, name = tempfile.mkstemp(prefix="hwprof-ray-driver-", suffix=".log")
        self.path = Path(name)
        sys.stderr.flush()
        self._saved_fd2 = os.dup(2)
        os.dup2(fd, 2)
        os.close(fd)
        self._original_printer = ray_worker.print_to_stdstream
        ray_worker.print_to_stdstream = _printer(2)  # type: ignore[assignment]
        return self

    def move_to(self, out_root: Path) -> Path:
        """Carry what was written so far into <out_root>/ray_logs/driver.log (appended to an earlier one, as
        a resumed sweep does) and go on writing there."""
        assert self.path is not None, "start() first"
        target = Path(out_root) / RAY_LOGS_DIR / DRIVER_LOG
        if target == self.path:
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        sys.stderr.flush()
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        with open(self.path, "rb") as src, os.fdopen(os.dup(fd), "ab") as dst:
            shutil.copyfileobj(src, dst)
        os.dup2(fd, 2)
        os.close(fd)
        self.path.unlink(missing_ok=True)
        self.path = target
        return target

    def stop(self, keep: bool = True) -> Path | None:
        """Restore descriptor 2 and Ray's printer; returns the log, or None when a temporary one is removed:
        when nothing was written to it, or keep is False (a refusal whose own line says it all)."""
        if self._saved_fd2 is None:
            return self.path
        sys.stderr.flush()
        os.dup2(self._saved_fd2, 2)
        os.close(self._saved_fd2)
        self._saved_fd2 = None
        import ray._private.worker as ray_worker

        ray_worker.print_to_stdstream = self._original_printer
        path = self.path
        temporary = path is not None and path.parent == Path(tempfile.gettempdir())
        if path is not None and temporary and (not keep or not path.stat().st_size):
            path.unlink(missing_ok=True)
            return None
        return path
