"""A pass's worker process: relay its progress lines, stop it, and stop what it leaves behind.

The pass ends when the worker exits, not when its stdout reaches EOF: a process forked by the
worker (without exec) holds a copy of the pipe, and if it outlives the worker the pipe never
closes. That happened in the scalene pass with OpenVINO (issue 17): `import openvino` sends a
telemetry event from a thread that forks a multiprocessing child; that child ends with
`os._exit`, which Scalene's shim replaces with `sys.exit`, so it did not end: its main thread
exited, one thread stayed in a futex wait (state Zl), and the child, reparented to init, kept
the pass waiting until its time-out. The other passes, without Scalene, did not hang.

The worker runs in a session of its own (`start_new_session`), so everything it started, even
reparented to init, keeps the worker's pid as its session id: once the worker has exited, what
is left in that session is stopped (SIGTERM, then SIGKILL) and reported as lingering.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, Protocol, TypeAlias

import psutil

from hwprof.core.procs import live
from hwprof.rundir.logs import log_lines


class Forked(Protocol):
    """A worker forked by the collect's zygote (hwprof.session.zygote.ForkedWorker, which imports this module and
    matches this shape): what the collect uses of a Popen, and `exited`, whether it exited while still unreaped."""

    pid: int
    stdout: IO[str]
    returncode: int | None

    def exited(self) -> bool: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


Worker: TypeAlias = "subprocess.Popen[str] | Forked"
"""A pass's worker: started by the collect, or forked by its zygote."""

TERM_GRACE_S = 20.0
"""How long a worker has to close its collectors after SIGTERM."""
LEFTOVER_GRACE_S = 2.0
"""How long a process left in the worker's session has after SIGTERM (a stuck fork often blocks it)."""
DRAIN_S = 1.0
"""How long, after the worker exited, its last buffered lines are read while a copy of the pipe is held elsewhere."""
POLL_S = 0.05
CHILD_ENV = {"PYTHONUNBUFFERED": "1", "YOLO_OFFLINE": "1", "YOLO_VERBOSE": "False"}
"""Every child hwprof starts (a pass's worker, an advice worker): lines unbuffered, ultralytics offline and quiet."""


@dataclass
class Lingering:
    """A process still in the worker's session after the worker exited."""

    pid: int
    name: str
    cmdline: list[str]
    state: str
    """Its state when found, as ps writes it: "Zl" is a main thread that exited while another thread runs."""
    lingered_s: float
    """From the worker's exit until the process was gone (or until hwprof gave up on it)."""
    stopped_by: str
    """"exited" (on its own), "SIGTERM", "SIGKILL", or "survived" (still there when hwprof gave up)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Lines:
    """A worker's stdout lines as they come, each with the monotonic time it came (a reader thread): started with
    the worker, so that a pass launched before the collect follows it (beside the previous pass's close:
    hwprof.session.pass_process) keeps when its lines came."""

    def __init__(self, proc: Worker) -> None:
        self.queue: queue.Queue[tuple[float, str] | None] = queue.Queue()
        stdout = proc.stdout

        def pump() -> None:
            assert stdout is not None
            for line in stdout:
                self.queue.put((time.monotonic(), line))
            self.queue.put(None)

        threading.Thread(target=pump, daemon=True, name=f"stdout of {proc.pid}").start()


def follow(
    proc: Worker,
    timeout_s: float,
    on_line: Callable[[str, float], None],
    stopped_at: Callable[[], float | None] = lambda: None,
    gone: Callable[[], bool] = lambda: False,
    lines: Lines | None = None,
) -> float | None:
    """Relay the worker's stdout lines to on_line (the line, and the monotonic time it came) until the worker exits
    or timeout_s passes. Returns the monotonic time at which the worker's exit was seen, None on time-out. stopped_at:
    the monotonic time of a stop signal forwarded to the worker (hwprof.session.stopping), from which it has
    TERM_GRACE_S to close its collectors. gone: whether the pass's run directory was removed (then it returns None at
    once: nothing the worker does can be saved). lines: its lines' reader where one was started with the worker."""
    pending = (lines or Lines(proc)).queue
    deadline = time.monotonic() + timeout_s
    exited_at: float | None = None
    eof = False
    while True:
        item: tuple[float, str] | None = (0.0, "")
        if not eof:
            with contextlib.suppress(queue.Empty):
                item = pending.get(timeout=0.2 if exited_at is None else POLL_S)
        if item is None:  # nothing holds the pipe any more
            eof = True
        elif item[1]:
            on_line(item[1], item[0])
        now = time.monotonic()
        stop_at = stopped_at()
        if stop_at is not None:
            deadline = min(deadline, stop_at + TERM_GRACE_S)
        if exited_at is None and exited(proc):
            exited_at = now
        if exited_at is not None and (eof or now - exited_at > DRAIN_S):
            return exited_at  # past DRAIN_S: a process the worker left behind still holds the pipe
        if exited_at is None and (now > deadline or gone()):
            return None
        if eof:
            time.sleep(POLL_S)  # a worker that closed its stdout and runs on


def exited(proc: Worker) -> bool:
    """Whether the worker has exited. It is not reaped (waitid's WNOWAIT; a forked worker's zygote does the
    same): until proc.wait(), its pid, which is its session's id, cannot be given to a new process."""
    if proc.returncode is not None:
        return True
    if not isinstance(proc, subprocess.Popen):  # forked: its zygote holds it unreaped
        return proc.exited()
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def stop(proc: Worker, grace_s: float = TERM_GRACE_S) -> None:
    """SIGTERM the worker's process group (it closes its collectors), then SIGKILL after grace_s.
    The worker is left unreaped: stop_session, then proc.wait()."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, None)):
        if exited(proc):
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        until = time.monotonic() + (wait_s if wait_s is not None else TERM_GRACE_S)
        while not exited(proc) and time.monotonic() < until:
            time.sleep(POLL_S)


def session_members(sid: int) -> list[int]:
    """Live processes whose session id is sid (this process excluded); a zombie with no live thread is not live."""
    out = []
    for pid in psutil.pids():
        try:
            if pid != os.getpid() and os.getsid(pid) == sid and live(pid):
                out.append(pid)
        except (ProcessLookupError, PermissionError):
            continue
    return out


def stop_session(sid: int, worker_exited_at: float, grace_s: float = LEFTOVER_GRACE_S) -> list[Lingering]:
    """Stop every live process left in session sid (the worker's); worker_exited_at: monotonic s."""
    found = {pid: Lingering(pid, *_describe(pid), 0.0, "") for pid in session_members(sid)}
    remaining = set(found)
    for sig, wait_s in ((None, 0.0), (signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
        for pid in sorted(remaining):
            if sig is not None:
                _signal(pid, sig)
        until = time.monotonic() + wait_s
        while True:
            for pid in [pid for pid in remaining if not live(pid)]:
                remaining.discard(pid)
                found[pid].lingered_s = round(time.monotonic() - worker_exited_at, 3)
                found[pid].stopped_by = sig.name if sig is not None else "exited"
            if not remaining or time.monotonic() >= until:
                break
            time.sleep(POLL_S)
    for pid in remaining:
        found[pid].lingered_s = round(time.monotonic() - worker_exited_at, 3)
        found[pid].stopped_by = "survived"
    return [found[pid] for pid in sorted(found)]


def _describe(pid: int) -> tuple[str, list[str], str]:
    """Name, command line and state (ps's letter, "l" when multithreaded) from /proc. A zombie leader
    whose threads still run has an empty cmdline of its own; its threads' entries still show it."""
    proc = Path(f"/proc/{pid}")
    name, cmdline, state = "?", [], "?"
    try:
        name = (proc / "comm").read_text().strip()
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        threads = len(os.listdir(proc / "task"))
        for task in [proc, *sorted((proc / "task").iterdir())]:
            cmdline = [a for a in (task / "cmdline").read_bytes().decode(errors="replace").split("\0") if a]
            if cmdline:
                break
    except OSError:
        return name, cmdline, state
    return name, cmdline, state + ("l" if threads > 1 else "")


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def error_line(log: Path) -> str:
    """Why the child failed: its log's last `hwprof-error:` line (the worker's), else its last line."""
    from hwprof.session.pass_runner import ERROR_PREFIX

    lines = log_lines(log)
    for line in reversed(lines):
        if line.startswith(ERROR_PREFIX):
            return line.removeprefix(ERROR_PREFIX)
    return lines[-1].strip() if lines else ""


def exit_reason(returncode: int, log: Path) -> str:
    if returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.Signals._value2member_map_ else "?"
        from hwprof.session.rlimits import limit_note

        what = f"the worker was killed by signal {-returncode} ({name}){limit_note()}"
    else:
        what = f"the worker exited with code {returncode}"
    last = error_line(log)
    return f"{what}: {last}" if last else what
