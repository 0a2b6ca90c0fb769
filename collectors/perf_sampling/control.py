"""FIFOs between the kernels pass's worker and the perf record the parent attaches to it.

perf is attached when the worker is about to measure, not when it starts: `perf record -p PID`
reads the process's mappings when it attaches, so every library torch loaded by then gets its
symbols (a perf started earlier with its events disabled, `-D -1`, loses the mmap events of the
libraries loaded while it waits: perf 6.1 records no side-band events while disabled), and the
model build and warm-up are neither sampled nor slowed. Under `hwprof attach` the worker is a running service whose
libraries are loaded long since: there perf joins it as the tool is made (PerfRecordTool), and "ready" only enables it.

    worker start():  write "ready" to perf.ready, wait for "go" on perf.go
    parent thread:   on "ready", launch perf record -D -1 --control fifo:perf.ctl,perf.ack,
                     send "enable" and wait for perf's ack, then write "go"
    worker pause()/resume(): "disable"/"enable" around each clean iteration of the paired pass
    worker stop():   send "disable" on perf.ctl (perf keeps running until the worker exits)

Every open on the worker's side is non-blocking and every wait has a time-out: a worker whose
perf is gone, or that runs without one, measures on unhindered.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Callable
from pathlib import Path

CONTROL_FIFO = "perf.ctl"
ACK_FIFO = "perf.ack"
READY_FIFO = "perf.ready"
GO_FIFO = "perf.go"
FIFOS = (CONTROL_FIFO, ACK_FIFO, READY_FIFO, GO_FIFO)
ACK_TIMEOUT_S = 10.0
GO_TIMEOUT_S = 60.0
READER_WAIT_S = 5.0


def make_fifos(folder: Path) -> list[Path]:
    paths = [folder / name for name in FIFOS]
    for path in paths:
        path.unlink(missing_ok=True)
        os.mkfifo(path)
    return paths


def remove_fifos(folder: Path) -> None:
    for name in FIFOS:
        (folder / name).unlink(missing_ok=True)


def _wait_read(fd: int, timeout_s: float) -> bytes:
    ready, _, _ = select.select([fd], [], [], timeout_s)
    if not ready:
        return b""
    try:
        return os.read(fd, 64)
    except OSError:
        return b""


class PerfControl:
    """The writing end of perf record's control FIFO: enable or disable its events, wait for the ack."""

    def __init__(self, ctl: int, ack: int) -> None:
        self.ctl = ctl
        self.ack = ack

    @classmethod
    def connect(cls, folder: Path) -> PerfControl | None:
        """None when no perf record reads the FIFO (not attached, or gone)."""
        try:
            ctl = os.open(folder / CONTROL_FIFO, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            ack = os.open(folder / ACK_FIFO, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            os.close(ctl)
            return None
        return cls(ctl, ack)

    @classmethod
    def wait_for(cls, folder: Path, alive: Callable[[], bool], timeout_s: float = ACK_TIMEOUT_S) -> PerfControl | None:
        """Connect as soon as a starting perf opens its control FIFO."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and alive():
            control = cls.connect(folder)
            if control is not None:
                return control
            time.sleep(0.01)
        return None

    def send(self, command: str, timeout_s: float = ACK_TIMEOUT_S) -> bool:
        try:
            os.write(self.ctl, f"{command}\n".encode())
        except OSError:
            return False
        return _wait_read(self.ack, timeout_s).startswith(b"ack")

    def close(self) -> None:
        for fd in (self.ctl, self.ack):
            with contextlib.suppress(OSError):
                os.close(fd)


def request_attach(folder: Path, timeout_s: float = GO_TIMEOUT_S) -> bool:
    """Worker side: ask the parent to attach perf now; True once perf samples this process, False
    when there is no perf to ask or it failed to start (the worker measures on either way)."""
    try:
        go = os.open(folder / GO_FIFO, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        ready = _open_writer(folder / READY_FIFO, READER_WAIT_S)
        if ready is None:
            return False  # nobody waits for us: no perf in this run
        os.write(ready, b"ready\n")
        os.close(ready)
        return _wait_read(go, timeout_s).startswith(b"go")
    finally:
        os.close(go)


def _open_writer(path: Path, wait_s: float) -> int | None:
    """The FIFO's writing end; None if it does not exist, or no reader opened it within wait_s
    (the FIFO exists from the moment the parent's tool is made, its reader a thread start later)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError:
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.01)


def disable(folder: Path) -> bool:
    return _send(folder, "disable")


def enable(folder: Path) -> bool:
    """Worker side: sample again after disable() (the clean iterations of a paired pass lie between)."""
    return _send(folder, "enable")


def _send(folder: Path, command: str) -> bool:
    control = PerfControl.connect(folder)
    if control is None:
        return False
    try:
        return control.send(command)
    finally:
        control.close()


class AttachOnRequest:
    """Parent side: a thread that runs `launch` when the worker writes "ready", then answers "go"."""

    def __init__(self, folder: Path, launch: Callable[[], bool]) -> None:
        self.folder = folder
        self.launch = launch
        self.requested = False
        self.launched = False
        self.cancelled = False
        self.thread = threading.Thread(target=self._serve, name="hwprof-perf-attach", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        with open(self.folder / READY_FIFO, "rb") as ready:  # blocks until the worker (or cancel) opens it
            request = ready.read(16)
        if self.cancelled or not request.startswith(b"ready"):
            return
        self.requested = True
        try:
            self.launched = self.launch()
        finally:
            try:
                go = os.open(self.folder / GO_FIFO, os.O_WRONLY | os.O_NONBLOCK)
                os.write(go, b"go\n" if self.launched else b"no perf\n")
                os.close(go)
            except OSError:
                pass  # the worker gave up waiting

    def cancel(self) -> None:
        """Release the thread if the worker never asked (it failed before measuring): open the FIFO's
        writing end until the thread, blocked opening its reading end, has seen it and ended."""
        self.cancelled = True
        deadline = time.monotonic() + ACK_TIMEOUT_S
        while self.thread.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                os.close(os.open(self.folder / READY_FIFO, os.O_WRONLY | os.O_NONBLOCK))
            self.thread.join(timeout=0.02)
