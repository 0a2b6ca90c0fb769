"""One collect per run directory: an exclusive flock on `<run dir>/.hwprof.lock`, held for the whole collect.

Two collects started together into one `--out` both saw an empty folder and both ran: markers were
appended twice and run.json said n=4 with a forward p50 of 863 ms (3.5 ms alone), marked complete.
The lock closes that race: the second collect finds the lock held and refuses with the holder's pid.

flock, not the lock file's existence, is what counts: the kernel drops a flock when its holder dies,
however it dies, so a lock file left by a killed collect is stale and is taken over (with a note).
The file holds the holder's pid, host and start time, for the refusal message and for readers that
want to know whether a run that says "running" still has a collect behind it (`holder`).

The space reserve (core.atomic.SpaceReserve) is only ever held under this lock, so whoever takes the lock
removes a reserve it finds: it was left by a holder that died (SIGKILL) and would otherwise stay for ever.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from hwprof.core.atomic import RESERVE_NAME

LOCK_NAME = ".hwprof.lock"


class RunDirBusy(RuntimeError):
    """Another live process holds the run directory's lock: a one-line message for the user."""


@dataclass(frozen=True)
class LockInfo:
    pid: int
    host: str
    started: float
    """time.time() of the holder's claim."""
    command: str = "collect"
    """The hwprof command that holds it (collect, advise; a file written before it was recorded: collect)."""

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


def _read_info(path: Path) -> LockInfo | None:
    try:
        data = json.loads(path.read_text())
        command = str(data.get("command", "collect"))
        return LockInfo(int(data["pid"]), str(data["host"]), float(data["started"]), command)
    except (OSError, ValueError, KeyError, TypeError):
        return None


class RunDirLock:
    """The exclusive lock of one run directory. `acquire()` or refuse; `release()` removes the file."""

    def __init__(self, run_dir: Path, command: str = "collect", fix: str = "choose another --out") -> None:
        """`command`: the hwprof command taking it (recorded for whoever finds it held); `fix`: what that command's
        user can do when it is held, besides waiting."""
        self.path = Path(run_dir) / LOCK_NAME
        self.command = command
        self.fix = fix
        self._fd: int | None = None
        self.took_over: LockInfo | None = None
        """The holder recorded in a stale lock file (its process gone) that this lock took over."""

    def acquire(self) -> RunDirLock:
        """Take the lock, or raise RunDirBusy naming the holder. Loops when the file it locked was
        replaced meanwhile (a holder that released and removed it between our open and our flock)."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            if not _try_exclusive(fd):
                os.close(fd)
                holder = _read_info(self.path)
                what = f"hwprof {holder.command} ({holder.describe()})" if holder else "hwprof command"
                raise RunDirBusy(
                    f"{self.path.parent} is in use by another {what}; wait for it to finish"
                    + (f" or {self.fix}" if self.fix else "")
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            previous = _read_info(self.path)
            if previous is not None and previous.pid != os.getpid():
                self.took_over = previous
            info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(), "command": self.command}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode(), 0)
            self._fd = fd
            with contextlib.suppress(OSError):  # a dead holder's reserve (no live one holds it without the lock)
                (self.path.parent / RESERVE_NAME).unlink(missing_ok=True)
            return self

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> RunDirLock:
        return self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self.release()


def _try_exclusive(fd: int, tries: int = 5, wait_s: float = 0.02) -> bool:
    """flock LOCK_EX without blocking, a few times: a reader asking `holder()` holds LOCK_SH for an instant."""
    for k in range(tries):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if k + 1 < tries:
                time.sleep(wait_s)
    return False


def holder(run_dir: Path) -> LockInfo | None:
    """Who holds the run directory's lock now; None when nobody does (no file, or a stale one)."""
    path = Path(run_dir) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_info(path) or LockInfo(-1, "?", 0.0)
    finally:
        os.close(fd)
    return None


def clear_dead_holders_reserve(run_dir: Path) -> bool:
    """Remove the space reserve a collect that died (SIGKILL) left in run_dir, when nobody holds the lock now
    (`hwprof report` of such a run); whether one was removed. A live collect, a read-only copy: left alone.
    The lock file itself is kept as it is: it names the dead holder for the next collect's refusal."""
    reserve = Path(run_dir) / RESERVE_NAME
    if not reserve.exists():
        return False
    try:
        fd = os.open(Path(run_dir) / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:  # a holder creates the lock file before its reserve and removes it after
        fd = None
    except OSError:
        return False
    try:
        if fd is not None and not _try_exclusive(fd, tries=1):
            return False  # a collect holds it: the reserve is its own
        reserve.unlink(missing_ok=True)
        return True
    except OSError:
        return False
    finally:
        if fd is not None:
            os.close(fd)
