"""The environment local Ray test clusters' nodes start with: their own temporary folder (TMPDIR, where the
points' scratch folders go, so a test can see what is left behind; RAY_TMPDIR keeps Ray's sockets in /tmp,
whose path is short enough for them) and this Python first on PATH (a Ray Job's entrypoint runs `python`
from the head's PATH, as on a head started from its venv)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path


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
