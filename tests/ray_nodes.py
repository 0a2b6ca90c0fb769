"""What the tests of sweeps on local Ray clusters share: the environment the nodes start with (their own
temporary folder, TMPDIR, where the points' scratch folders go, so a test can see what is left behind;
RAY_TMPDIR keeps Ray's sockets in /tmp, whose path is short enough for them; this Python first on PATH, as a
Ray Job's entrypoint runs `python` from the head's PATH), the sweep CLI as a user runs it, the collects
running, and waiting for them. The session's cluster is tests/ray_cluster.py's."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil


@contextlib.contextmanager
def nodes_env(scratch: Path) -> Iterator[None]:
    """While nodes are started: TMPDIR=scratch, RAY_TMPDIR=/tmp, this Python's folder first on PATH."""
    saved = {k: os.environ.get(k) for k in ("TMPDIR", "RAY_TMPDIR", "PATH")}
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ.update(TMPDIR=str(scratch), RAY_TMPDIR="/tmp", PATH=path)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


STARTED: list[subprocess.Popen[str]] = []
"""Every sweep CLI started by sweep_cli: one that a failed test left running is killed after it
(tests/ray_cluster.py), so that its points do not run on into the next test's on the session's cluster."""


def sweep_cli(address: str, out: Path, *more: str) -> subprocess.Popen[str]:
    """`hwprof sweep --ray ADDRESS ...` in a child process, its output line by line."""
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "hwprof", "sweep", "--ray", address, "--out", str(out), *more],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=out.parent,
        env={**os.environ, "COLUMNS": "200"},
    )
    STARTED.append(proc)
    return proc


def wait_until(ready: Callable[[], object], timeout: float, step: float = 0.2) -> bool:
    """Poll `ready` (a file, a process: cheap) until it is true or `timeout` s have passed; whether it came."""
    end = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > end:
            return False
        time.sleep(step)
    return True


def collect_pids(scratch: Path, name: str = "") -> list[int]:
    """The `hwprof collect` processes running this point (every point: "") on any node whose TMPDIR is scratch,
    their keepers left out. Only those: another suite's Ray tests on the same machine (a second checkout's tox)
    run collects of their own, which made this suite's counts wrong."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if (
            "collect" in cmd
            and "hwprof.sweep.point_keeper" not in cmd
            and any(a.startswith(f"{scratch}{os.sep}hwprof-point-") and a.endswith(name) for a in cmd)
        ):
            found.append(p.pid)
    return found
