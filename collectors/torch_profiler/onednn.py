"""oneDNN's verbose mode: its lines captured from fd 1 and parsed into timed primitive executions.

oneDNN prints with C stdio to fd 1, which is the worker's progress pipe: StdoutToFile points fd 1
at a file while Python's `sys.stdout` is moved to a duplicate of the original fd, so the progress
lines keep flowing. Each `primitive,exec` line (with ONEDNN_VERBOSE_TIMESTAMP=1: wall-clock ms at
the primitive's start) becomes a OneDnnExec on the monotonic clock.
"""

from __future__ import annotations

import ctypes
import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path


class StdoutToFile:
    """fd 1 (C stdio, where oneDNN prints) goes to a file; Python's sys.stdout stays on the old fd 1."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._libc = ctypes.CDLL(None)

    def __enter__(self) -> StdoutToFile:
        sys.stdout.flush()
        self._libc.fflush(None)
        self._saved_fd = os.dup(1)
        self._saved_stdout = sys.stdout
        encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
        sys.stdout = io.TextIOWrapper(open(os.dup(self._saved_fd), "wb"), encoding=encoding, line_buffering=True)
        self._file = open(self.path, "ab")
        os.dup2(self._file.fileno(), 1)
        return self

    def __exit__(self, *exc: object) -> None:
        self._libc.fflush(None)
        sys.stdout.flush()
        os.dup2(self._saved_fd, 1)
        os.close(self._saved_fd)
        sys.stdout.close()
        sys.stdout = self._saved_stdout
        self._file.close()


@dataclass
class OneDnnExec:
    ts_ns: int
    """Monotonic ns at the primitive's start."""
    kind: str
    impl: str
    prop: str
    problem: str
    exec_ms: float

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.impl}"


@dataclass
class OneDnnLog:
    execs: list[OneDnnExec]
    info: dict[str, str]
    lines: int
    untimed: int


def parse_onednn(path: Path, wall_to_mono_ns: int) -> OneDnnLog:
    """`onednn_verbose,v1,<ts ms>,primitive,exec,cpu,<kind>,<impl>,<prop>,<md>,<attr>,<aux>,<desc>,<ms>`."""
    execs, info, lines, untimed = [], {}, 0, 0
    with open(path, errors="replace") as handle:
        for line in handle:
            if not line.startswith("onednn_verbose,"):
                continue
            lines += 1
            parts = line.rstrip("\n").split(",")
            if len(parts) > 3 and parts[2] == "info":
                if parts[3] == "cpu" and len(parts) > 4 and ":" in parts[4]:
                    key, _, value = parts[4].partition(":")
                    info[key] = value
                elif parts[3].startswith("oneDNN"):
                    info["version"] = parts[3]
                continue
            if len(parts) < 14 or parts[3] != "primitive" or parts[4] != "exec":
                if len(parts) > 3 and parts[2] == "primitive" and parts[3] == "exec":
                    untimed += 1
                continue
            try:
                ts_ns = round(float(parts[2]) * 1e6) + wall_to_mono_ns
                exec_ms = float(parts[-1])
            except ValueError:
                untimed += 1
                continue
            execs.append(OneDnnExec(ts_ns, parts[6], parts[7], parts[8], parts[-2], exec_ms))
    return OneDnnLog(execs, info, lines, untimed)
