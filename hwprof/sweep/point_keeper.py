"""The keeper of one sweep point's scratch folder on a Ray node: `python -m hwprof.sweep.point_keeper PARENT WORK
-- COMMAND...` runs the point's `hwprof collect` and outlives the Ray worker that started it.

Why a process of its own: when a task's owner goes away (the sweep's driver closed, its job stopped, a node
lost, a retried attempt), Ray kills the leased worker's whole process group at once, so nothing in the task
can stop the collect or remove its scratch folder. The keeper runs in a session of its own, watches its parent
(the worker), and when that parent is gone it stops the collect the way Ctrl-C does (SIGINT: the collect
finalises its run.json as interrupted), then removes the scratch folder, which nobody will fetch any more.

Every scratch folder holds a lock file that the task and its keeper hold (flock, shared through an inherited
descriptor); a folder whose lock nobody holds belongs to a point that is gone, and the next point on the node
removes it (remove_stale).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PREFIX = "hwprof-point-"
LOCK = ".keeper.lock"
STOP_GRACE_S = 30.0
"""After SIGINT, how long the collect has to finalise its run directory before it is signalled again."""
KILL_GRACE_S = 10.0
"""After the second SIGINT (collect then kills every process of its pass), the wait before SIGKILL."""
WATCH_S = 0.5
NEW_FOLDER_S = 60.0
"""A scratch folder without its lock file is left alone this long: the task that made it may be taking it."""


def make_scratch(key: int) -> tuple[Path, int]:
    """A new scratch folder for point `key` and the descriptor of its held lock (pass it to the keeper)."""
    work = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{key}-"))
    fd = os.open(work / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return work, fd


def remove_stale(root: Path | None = None, keep: Path | None = None) -> list[str]:
    """Remove every point scratch folder under root (the temporary folder) whose point is gone: its lock is
    free, or it has no lock and is older than NEW_FOLDER_S. Returns the names removed."""
    removed = []
    for work in sorted(Path(root or tempfile.gettempdir()).glob(f"{PREFIX}*")):
        if work == keep or not work.is_dir() or work.is_symlink():
            continue
        lock = work / LOCK
        try:
            if not lock.exists():
                if time.time() - work.stat().st_mtime > NEW_FOLDER_S:
                    shutil.rmtree(work, ignore_errors=True)
                    removed.append(work.name)
                continue
            fd = os.open(lock, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # held: its point is running
            continue
        try:
            shutil.rmtree(work, ignore_errors=True)
            removed.append(work.name)
        finally:
            os.close(fd)
    return removed


def stop_gently(proc: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> int:
    """Ctrl-C's way: SIGINT (the run is finalised as interrupted), SIGINT again after grace_s (every process of
    the pass is killed), SIGKILL after KILL_GRACE_S. Returns the exit status."""
    for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGINT, KILL_GRACE_S)):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            return proc.wait(timeout=wait_s)
    proc.kill()
    return proc.wait()


def keep(parent: int, work: Path, command: list[str]) -> int:
    """Run command; stop it if asked (SIGINT or SIGTERM to the keeper) or if parent goes; returns its status."""
    asked: list[int] = []

    def note(signum: int, _frame: object) -> None:
        asked.append(signum)

    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    for sig in stops:
        signal.signal(sig, note)
    # Ray blocks SIGINT in its workers, and a blocked signal stays blocked across fork and exec: unblocked
    # here, the collect below (which inherits this mask) can be stopped the way Ctrl-C stops it.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
    proc = subprocess.Popen(command)
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return proc.wait(timeout=WATCH_S)
        if asked:
            return stop_gently(proc)
        if os.getppid() != parent:  # the worker is gone, and whoever would fetch this run with it
            code = stop_gently(proc)
            shutil.rmtree(work, ignore_errors=True)
            return code


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: python -m hwprof.sweep.point_keeper PARENT_PID WORK_DIR -- COMMAND...", file=sys.stderr)
        return 2
    return keep(int(argv[0]), Path(argv[1]), argv[3:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
