"""The zygote process itself (`python -P -m hwprof.session.zygote FD IMPORTS MODULES...`): its imports, then a
fork for each request of the collect, each child becoming the worker asked for; the package's docstring says why
and how."""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import select
import socket
import sys
import threading
from dataclasses import dataclass
from typing import NoReturn

from hwprof.session.late_imports import LateImports, import_all
from hwprof.session.zygote.protocol import MESSAGE_BYTES, send

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
                send(sock, {"exited": pid, "status": status})
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
            send(sock, {"errno": exc.errno, "error": exc.strerror or str(exc)})
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
            send(sock, {"pid": pid})
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
    send(sock, {"ready": True})
    spawn = serve(sock, LateImports.of(imports) if imports else None)
    if spawn is None:
        return 0
    sock.close()
    end_forked(become_worker(spawn, modules))
