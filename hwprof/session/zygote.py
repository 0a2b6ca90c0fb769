"""Start-up paid once per collect (or advise): a process that imports what every pass's worker imports (torch,
ultralytics, OpenCV, hwprof's runners) and forks a worker for each pass that may start from it. Its owner names
the worker modules it may run (`python -P -m MODULE ARGS` becomes MODULE.main(ARGS) in the fork): a collect's,
hwprof.session.worker; advise's, hwprof.advisor.paired_worker, whose four processes per candidate each imported
torch again (the advise of tests/test_advise_real.py: 16 of them).

Why: a pass's worker spent 2.0-2.5 s importing before it built its model (2-CPU EPYC: `python -c "import torch,
ultralytics, hwprof.session.worker"` 2.5 s), once per pass; the zygote's imports run once, beside the collect's
own start, and a forked worker begins with them done.

Which passes start from it (`forkable`): those whose command is `python -P -m` one of its modules (the pass worker,
or a collector's launcher that wraps it: Scalene's CPU mode, Collector.zygote_modules; valgrind, ncu and Scalene's
memory mode exec the worker themselves) and whose environment is the zygote's, but for variables read when first
used, not when a library loads (LAZY_ENV); never a user's program's passes (a program expects a fresh interpreter),
nor under a tight task limit (RLIMIT_NPROC under TASK_ROOM: the zygote's two tasks would count against the passes'
threads). Every other pass is started as before (`python -P -m hwprof.session.worker`), and so is every pass when the
zygote cannot start.

Fork safety: the zygote only imports; no parallel region ran (OpenMP's team is made in the worker, after the
fork), and its one other thread, OpenBLAS's server, is rebuilt in the child by OpenBLAS's own fork handler. A
forked worker calls setsid (a session of its own, as `start_new_session`), takes the stdin, stdout and stderr the
collect sends with its request (SCM_RIGHTS), its working directory and environment, and runs
the module's main as `python -m` would.

Its owner's `imports` (what a collector's first use imports: torch.profiler's Inductor and Dynamo, 0.8 s) come
after the first fork when that first worker does not need them (a collect's timing pass): the zygote imports them
while that worker builds its model, and the worker waits for them to end before its warm-up
(hwprof.session.late_imports), so that no forward it times runs beside them. Before, the first pass waited for them
before it could start.

The zygote reports a worker's exit without reaping it (waitid WNOWAIT) until the collect asks it to: the worker's
pid, its session's id, is not given to another process before the collect has stopped what is left in that
session (hwprof.session.child). The collect kills the zygote when its passes are done (it holds nothing to save);
it also exits when the collect's end of its socket closes (a collect killed with SIGKILL).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any, NoReturn

from hwprof.core.procs import live
from hwprof.session.child import Worker
from hwprof.session.late_imports import LateImports, import_all

PRELOAD = (
    "torch",
    "torch.profiler",
    "numpy",
    "cv2",
    "ultralytics",
    "ultralytics.nn.tasks",
    "pyperf",
    "hwprof.workload.pipeline",
)
"""What the zygote imports, then the worker modules it may run: what a built-in pipeline's worker imports at start,
costliest first. One that fails to import is left to the worker, which then says why."""
PASS_WORKER = "hwprof.session.worker"
"""A collect's zygote runs this module: its passes' worker."""
LAZY_ENV = frozenset({"ONEDNN_JIT_PROFILE"})
"""Variables a forked worker may differ in from the zygote: read when first used (oneDNN's, at its first JIT
kernel), which the zygote never reaches."""
TASK_ROOM = 4096
"""The zygote is not started under a task limit (RLIMIT_NPROC) below this: a limit set to bound a collect's
threads (a container's, a test's) is left to the passes; the usual default is tens of thousands."""
READY_S = 120.0
"""How long a pass waits for the zygote's imports before it starts the usual way (and the zygote is closed)."""
MESSAGE_BYTES = 1 << 20
POLL_S = 0.05


class ZygoteGone(RuntimeError):
    """The zygote exited or did not answer: the pass starts the usual way."""


def _send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.send(data)


# --- the collect's side ---------------------------------------------------------------------------------------


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
                _send(self.sock, request, [stdin, write_end, stderr.fileno()])
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
            _send(self.sock, {"op": "reap", "pid": pid})

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


# --- the zygote's side ----------------------------------------------------------------------------------------


@dataclass
class Spawn:
    """A request the zygote's child carries out: it becomes the worker."""

    module: str
    args: list[str]
    cwd: str
    env: dict[str, str]
    fds: list[int]


def _status(pid: int) -> int | None:
    """The exited child's status as Popen's returncode (negative: its signal), without reaping it."""
    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def serve(sock: socket.socket, late: LateImports | None = None) -> Spawn | None:
    """Fork a worker for each request and report each one's exit, until the collect closes the socket (None);
    in a forked child, the request it must carry out."""
    pidfds: dict[int, int] = {}
    while True:
        readable, _, _ = select.select([sock.fileno(), *pidfds.values()], [], [])
        for pid, pidfd in list(pidfds.items()):
            if pidfd in readable and (status := _status(pid)) is not None:
                os.close(pidfds.pop(pid))
                _send(sock, {"exited": pid, "status": status})
        if sock.fileno() not in readable:
            continue
        data, fds, _, _ = socket.recv_fds(sock, MESSAGE_BYTES, 3)
        if not data:
            return None
        request = json.loads(data)
        if request["op"] == "reap":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(int(request["pid"]), 0)
            continue
        if late is not None and request.get("imports", True) and not _made(late):
            return None
        try:
            pid = os.fork()
        except OSError as exc:
            _send(sock, {"errno": exc.errno, "error": exc.strerror or str(exc)})
            pid = -1
        if pid == 0:
            for pidfd in pidfds.values():
                os.close(pidfd)
            if late is not None:
                late.forked()
            return Spawn(request["module"], request["args"], request["cwd"], request["env"], fds)
        for fd in fds:
            os.close(fd)
        if pid > 0:
            pidfds[pid] = os.pidfd_open(pid)
            _send(sock, {"pid": pid})
        if late is not None and not _made(late):  # beside the worker just forked, which waits for them to end
            return None


def _made(late: LateImports) -> bool:
    """The late imports made (once); False when they initialised CUDA, which no later fork could use: the zygote
    ends (its passes start the usual way)."""
    late.make()
    return not cuda_initialised()


def become_worker(spawn: Spawn, modules: tuple[str, ...]) -> int:
    """In the forked child: take the request's session, files, folder and environment, then run the worker
    module's main (one the zygote was started with)."""
    os.setsid()
    for target, fd in enumerate(spawn.fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(spawn.cwd)
    os.environ.clear()
    os.environ.update(spawn.env)
    if spawn.module not in modules:
        raise SystemExit(f"hwprof's zygote runs {', '.join(modules)}, not {spawn.module}")
    worker = importlib.import_module(spawn.module)
    sys.argv = [str(worker.__file__), *spawn.args]
    code: int = worker.main(spawn.args)
    return code


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


def end_forked(code: int) -> NoReturn:
    """A forked worker's end, without Python's teardown of a process that holds torch: 0.8 s a worker on the
    2-CPU EPYC (a forked timing worker of yolov8n@64: 1.2-1.4 s with it, 0.45-0.57 s without). What must happen
    at exit still does: the atexit functions (logging's flush among them), then stdout and stderr flushed. Where a
    thread that is not a daemon still runs, the usual exit, which waits for it."""
    main_thread = threading.main_thread()
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not main_thread):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def cuda_initialised() -> bool:
    """Whether an import initialised CUDA: a child forked after that cannot use it ("Cannot re-initialize CUDA in
    forked subprocess"). torch initialises it on first use only; no module the zygote imports uses it (checked on
    an H100, scripts/gpu_check/forkprobe.py), but one that did would break every forked pass of a GPU run."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        return bool(cuda is not None and cuda.is_initialized())
    except Exception:
        return False


def main(fd: int, imports: tuple[str, ...], modules: tuple[str, ...]) -> int:
    sock = socket.socket(fileno=fd)
    import_all((*PRELOAD, *modules))
    if cuda_initialised():
        return 1  # never ready: every pass starts the usual way (zygote.start, on ZygoteGone)
    gc.freeze()  # what the imports made is never collected: a forked worker's collections skip it (gc.freeze's own use)
    _send(sock, {"ready": True})
    spawn = serve(sock, LateImports.of(imports) if imports else None)
    if spawn is None:
        return 0
    sock.close()
    end_forked(become_worker(spawn, modules))


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), tuple(filter(None, sys.argv[2].split(","))), tuple(sys.argv[3:])))
