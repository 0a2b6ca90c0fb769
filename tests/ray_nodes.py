"""What the tests of sweeps on local Ray clusters share: the environment the nodes start with (their own
temporary folder, TMPDIR, where the points' scratch folders go, so a test can see what is left behind;
RAY_TMPDIR keeps Ray's sockets in /tmp, whose path is short enough for them; this Python first on PATH, as a
Ray Job's entrypoint runs `python` from the head's PATH), the sweep CLI as a user runs it, and the collects
running."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
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


def sweep_cli(address: str, out: Path, *more: str) -> subprocess.Popen[str]:
    """`hwprof sweep --ray ADDRESS ...` in a child process, its output line by line."""
    return subprocess.Popen(
        [sys.executable, "-P", "-m", "hwprof", "sweep", "--ray", address, "--out", str(out), *more],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=out.parent,
        env={**os.environ, "COLUMNS": "200"},
    )


def collect_pids(name: str = "") -> list[int]:
    """The `hwprof collect` processes running this point (every point: "") on any node, their keepers left out."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if (
            "collect" in cmd
            and "hwprof.sweep.point_keeper" not in cmd
            and any("hwprof-point-" in a and a.endswith(name) for a in cmd)
        ):
            found.append(p.pid)
    return found
