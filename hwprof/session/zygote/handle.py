"""The collect's side of its zygote (the package's docstring says why and how): the process started, a worker
forked by it as the collect uses a subprocess.Popen, and `start`, the one place a worker is forked or started."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import IO, Any

from hwprof.core.procs import live
from hwprof.session.child import Worker
from hwprof.session.turn import TURN_ENV
from hwprof.session.zygote.protocol import MESSAGE_BYTES, send

PASS_WORKER = "hwprof.session.worker"
"""A collect's zygote runs this module: its passes' worker."""
LAZY_ENV = frozenset({"ONEDNN_JIT_PROFILE", TURN_ENV})
"""Variables a forked worker may differ in from the zygote: read when first used (oneDNN's, at its first JIT
kernel; the worker's own wait for its turn, hwprof.session.turn), which the zygote never reaches."""
TASK_ROOM = 4096
"""The zygote is not started under a task limit (RLIMIT_NPROC) below this: a limit set to bound a collect's
threads (a container's, a test's) is left to the passes; the usual default is tens of thousands."""
READY_S = 120.0
"""How long a pass waits for the zygote's imports before it starts the usual way (and the zygote is closed)."""
POLL_S = 0.05


class ZygoteGone(RuntimeError):
    """The zygote exited or did not answer: the pass starts the usual way."""


@dataclass
class ForkedWorker:
    """A pass's worker forked by the zygote: what the collect uses of a subprocess.Popen (pid, stdout,
    returncode, poll, wait), and `exited`, whether it exited while it is still unreaped."""

    zygote: Zygote
    pid: int
    stdout: IO[str]
    returncode: int | None = None

    def exited(self) -> bool:
        return self.returncode is not None or self.zygote.exit_status(self.pid, 0.0) is not None

    def poll(self) -> int | None:
        return self.wait(0.0) if self.exited() else None

    def wait(self, timeout: float | None = None) -> int:
        """Its exit status (negative: the signal that ended it), reaped by the zygote."""
        if self.returncode is None:
            status = self.zygote.exit_status(self.pid, timeout)
            if status is None:
                raise subprocess.TimeoutExpired(f"pass worker {self.pid}", timeout or 0.0)
            self.zygote.reap(self.pid)
            self.returncode = status
        return self.returncode


@dataclass
class Zygote:
    """The collect's handle on its zygote process."""

    proc: subprocess.Popen[bytes]
    sock: socket.socket
    env: dict[str, str]
    """The environment it started with: a forked worker's is this one, but for LAZY_ENV."""
    modules: tuple[str, ...] = (PASS_WORKER,)
    """The worker modules it runs (each has main(argv) -> int)."""
    ready: bool = False
    exits: dict[int, int] = field(default_factory=dict)
    """pid -> exit status of workers that exited and are not reaped yet."""
    gone: bool = False

    @classmethod
    def start(
        cls, env: dict[str, str], modules: tuple[str, ...] = (PASS_WORKER,), imports: tuple[str, ...] = ()
    ) -> Zygote | None:
        """Start one that runs `modules` (its imports, PRELOAD's and `imports` besides, run while its owner goes
        on); None when it cannot be used here."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
        if soft != resource.RLIM_INFINITY and soft < TASK_ROOM:
            return None
        try:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except OSError:  # out of file descriptors: the passes start as before, and say so if they cannot
            return None
        command = [sys.executable, "-P", "-m", "hwprof.session.zygote", str(theirs.fileno()), ",".join(imports)]
        try:
            proc = subprocess.Popen(
                [*command, *modules],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        except OSError:
            ours.close()
            return None
        finally:
            theirs.close()
        return cls(proc, ours, dict(env), modules)

    def forkable(self, command: list[str], env: dict[str, str]) -> bool:
        """Whether a worker with this command and environment may start from the zygote."""
        module = command[3] if len(command) > 3 else None
        if self.gone or command[:3] != [sys.executable, "-P", "-m"] or module not in self.modules:
            return False
        keys = (set(env) | set(self.env)) - LAZY_ENV
        return all(env.get(k) == self.env.get(k) for k in keys)

    def spawn(
        self, command: list[str], cwd: str, env: dict[str, str], stderr: IO[str], needs_imports: bool = True
    ) -> ForkedWorker:
        """Fork a worker running `command` (python -P -m MODULE ARGS, MODULE one of self.modules); OSError as
        Popen raises it when the fork failed, ZygoteGone when the zygote cannot be asked. `needs_imports`: the
        worker uses the zygote's `imports` (else it may be forked before them, the first one)."""
        self._wait_ready()
        read_end, write_end = os.pipe()
        stdin = 0 if _is_open(0) else os.open(os.devnull, os.O_RDONLY)
        try:
            request: dict[str, object] = {"op": "spawn", "module": command[3], "args": command[4:], "cwd": cwd}
            request |= {"env": env, "imports": needs_imports}
            try:
                send(self.sock, request, [stdin, write_end, stderr.fileno()])
            except OSError as exc:
                raise self._lost(f"could not be asked ({exc})") from None
        finally:
            os.close(write_end)
            if stdin != 0:
                os.close(stdin)
        reply = self._receive(None, until=lambda m: "pid" in m or "errno" in m)
        if "errno" in reply:
            os.close(read_end)
            raise OSError(reply["errno"], reply["error"])
        return ForkedWorker(self, int(reply["pid"]), os.fdopen(read_end, "r"))

    def exit_status(self, pid: int, timeout: float | None) -> int | None:
        """The worker's exit status once it exited (not reaped yet); None while it runs past `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if pid not in self.exits and not self.gone:
            with contextlib.suppress(TimeoutError, ZygoteGone):  # gone: killed with the pass (a second signal)
                self._receive(timeout, until=lambda m: m.get("exited") == pid)
        if pid in self.exits:
            return self.exits[pid]
        if not self.gone:
            return None
        while live(pid):  # its status died with the zygote: the process itself is watched (a zombie is not live)
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(POLL_S)
        return -signal.SIGKILL  # what kills a zygote kills its workers (StopSignals.kill_everything)

    def reap(self, pid: int) -> None:
        self.exits.pop(pid, None)
        with contextlib.suppress(OSError):
            send(self.sock, {"op": "reap", "pid": pid})

    def close(self) -> None:
        """End the zygote at once: it holds nothing to save, and its workers were waited for (a collect stopped
        while it still imported waited for the imports to end before it read its socket's end)."""
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.proc.wait()

    def _wait_ready(self) -> None:
        if not self.ready:
            try:
                self._receive(READY_S, until=lambda m: m.get("ready") is True)
            except TimeoutError:
                raise self._lost(f"did not finish its imports in {READY_S:.0f} s") from None
            self.ready = True

    def _receive(self, timeout: float | None, until: Any) -> dict[str, Any]:
        """Read messages (recording exits) until one satisfies `until`; TimeoutError past `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([self.sock], [], [], left)
            if not readable:
                raise TimeoutError
            try:
                data = self.sock.recv(MESSAGE_BYTES)
            except OSError as exc:
                raise self._lost(f"could not be read ({exc})") from None
            if not data:
                raise self._lost("exited")
            message = json.loads(data)
            if "exited" in message:
                self.exits[int(message["exited"])] = int(message["status"])
            if until(message):
                return message

    def _lost(self, why: str) -> ZygoteGone:
        self.gone = True
        return ZygoteGone(f"the collect's zygote {why}")


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def start(
    zygote: Zygote | None,
    command: list[str],
    cwd: str,
    env: dict[str, str],
    stderr: IO[str],
    needs_imports: bool = True,
) -> Worker:
    """`command` forked by the zygote where it may be, else started with Popen; in a session of its own, its
    stdout a text pipe, either way. A zygote found gone is not asked again (`forkable` is False once gone).
    `needs_imports`: whether the worker uses the zygote's late imports (Zygote.spawn)."""
    if zygote is not None and zygote.forkable(command, env):
        try:
            return zygote.spawn(command, cwd, env, stderr, needs_imports)
        except ZygoteGone:
            zygote.close()
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=stderr, cwd=cwd, text=True, env=env, start_new_session=True
    )
