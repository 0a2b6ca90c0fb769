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
from typing import Any, Protocol

import psutil

from hwprof.core.atomic import atomic_write_text

PREFIX = "hwprof-point-"
LOCK = ".keeper.lock"
PID_FILE = "keeper.pid"
EXIT_FILE = "keeper.exit"
STOP_GRACE_S = 30.0
"""After SIGINT, how long the collect has to finalise its run directory before it is signalled again."""
KILL_GRACE_S = 10.0
"""After the second SIGINT (collect then kills every process of its pass), the wait before SIGKILL."""
WATCH_S = 0.5
LINGER_S = 3600.0
"""The longest a keeper waits, after its collect, for its task to pack the run (a huge run on a slow disk)."""
NEW_FOLDER_S = 60.0
"""A scratch folder without its lock file is left alone this long: the task that made it may be taking it."""


def make_scratch(key: int) -> tuple[Path, int]:
    """A new scratch folder for point `key` and the descriptor of its held lock (pass it to the keeper).

    The lock is taken under another name and renamed into place, so it is held from the moment it exists:
    a point starting beside this one on a node that shares the temporary folder (nodes of one machine) runs
    remove_stale at the same moment, and a lock file it found free between its creation and its flock made it
    remove this folder (CI: the second point failed with FileNotFoundError on its collect.log)."""
    work = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{key}-"))
    taking = work / f"{LOCK}.taking"
    fd = os.open(taking, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.rename(taking, work / LOCK)
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


def stop_gently(proc: Stoppable, grace_s: float = STOP_GRACE_S) -> int:
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
    """Run command; stop it if asked (SIGINT, SIGTERM, SIGHUP or SIGQUIT to the keeper) or if parent goes; returns
    its status."""
    asked: list[int] = []

    def note(signum: int, _frame: object) -> None:
        asked.append(signum)

    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)  # a collect's (stopping.SIGNALS) but
    # SIGABRT: an abort() in the keeper itself ends it whatever a handler does
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
        if not psutil.pid_exists(parent):  # the worker is gone, and whoever would fetch this run with it
            code = stop_gently(proc)
            shutil.rmtree(work, ignore_errors=True)
            return code


class Stoppable(Protocol):
    def send_signal(self, sig: int) -> None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def kill(self) -> None: ...


class DetachedKeeper:
    """A keeper that is not a child of the Ray worker (started through a fork whose parent exits at once):
    Ray kills a dying worker's children, which would take the keeper with it. Its status comes through
    WORK/keeper.exit; the methods are those of subprocess.Popen that stop_gently needs."""

    def __init__(self, pid: int, work: Path) -> None:
        self.pid, self.work = pid, work

    def poll(self) -> int | None:
        status = self.work / EXIT_FILE
        if status.exists() and status.read_text().strip():
            return int(status.read_text())
        return None if psutil.pid_exists(self.pid) else -int(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(f"keeper {self.pid}", timeout or 0.0)
            time.sleep(0.1)
        return code

    def send_signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start_detached(work: Path, command: list[str], **popen: Any) -> DetachedKeeper:
    """Start the keeper of `command` for the scratch folder `work`, detached from this process (popen: stdout,
    env, pass_fds, ... of the keeper, which the collect inherits)."""
    keeper = [sys.executable, "-P", "-m", "hwprof.sweep.point_keeper", str(os.getpid()), str(work), "--"]
    subprocess.Popen([*keeper, *command], start_new_session=True, **popen).wait()
    found = keeper_of(work)
    if found is None:
        raise RuntimeError(f"the point's keeper did not start ({work / PID_FILE} never came)")
    return found


def keeper_of(work: Path, wait_s: float = 30.0) -> DetachedKeeper | None:
    """The keeper of scratch folder `work` once it has written its pid (up to wait_s), else None. Also how a
    task interrupted while its keeper was starting finds the keeper to stop: the keeper's collect would
    otherwise run on, recreate the folder the task removed, and linger there for as long as the worker lives."""
    pid_file, end = work / PID_FILE, time.monotonic() + wait_s
    while not (pid_file.exists() and pid_file.read_text().strip()):
        if time.monotonic() > end:
            return None
        time.sleep(0.05)
    return DetachedKeeper(int(pid_file.read_text()), work)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: python -m hwprof.sweep.point_keeper PARENT_PID WORK_DIR -- COMMAND...", file=sys.stderr)
        return 2
    work = Path(argv[1])
    if os.fork():  # the parent returns at once: the keeper goes on as nobody's child but init's
        os._exit(0)
    atomic_write_text(work / PID_FILE, str(os.getpid()))
    parent = int(argv[0])
    code = keep(parent, work, argv[3:])
    if work.is_dir():
        atomic_write_text(work / EXIT_FILE, str(code))
        linger(parent, work)
    return code


def linger(parent: int, work: Path, limit_s: float = LINGER_S) -> None:
    """After the collect ended, stay until the task has packed the run and removed the folder; remove it
    here if the task's worker dies first. (Ray interrupts a task whose driver died, and kills its worker a
    moment later: the task stops the collect, then may not live to remove the folder.)"""
    end = time.monotonic() + limit_s
    while work.exists() and time.monotonic() < end:
        if not psutil.pid_exists(parent):
            shutil.rmtree(work, ignore_errors=True)
            return
        time.sleep(WATCH_S)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
