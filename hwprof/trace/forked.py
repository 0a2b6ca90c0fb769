"""The collect's trace built in a forked child while the report is written: the two took turns on one CPU after
the passes while the other idled (yolov7-tiny at 320 on the 2-CPU EPYC: the report and its plots 4.6 s, then the
trace 2.8 s; yolov7 at 640, the trace 6-7 s).

The child is forked from the collect once the passes are over, with the finished run already read (RunData), so
that it imports and parses nothing again; it is put in a process group of its own (a Ctrl-C at the terminal reaches
the collect alone, which decides), builds trace.pftrace with build_trace and sends the figures the collect prints
through a pipe. Anything else than a trace built (an error of any kind, a child killed) and the collect builds the
trace itself afterwards, as before (hwprof.session.finish.write_trace), so that its errors, full disk and
unwritable folder included, are said and raised exactly as they were. Where forking is not safe (a thread besides
the main one, which a fork would leave half-held locks of) or not possible, the trace is built after the report as
before.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from hwprof.core.atomic import remove_orphaned_temporaries
from hwprof.rundir.reader import RunData

if TYPE_CHECKING:
    from hwprof.trace.perfetto import TraceStats


@dataclass(frozen=True)
class BuiltTrace:
    """What the collect prints of a trace built (hwprof.trace.perfetto.TraceStats's), in the child or by itself."""

    path: Path
    size_bytes: int
    build_s: float
    perf_samples: int

    @classmethod
    def of(cls, stats: TraceStats) -> BuiltTrace:
        return cls(stats.path, stats.size_bytes, stats.build_s, stats.perf_samples)

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "path": str(self.path)})

    @classmethod
    def from_json(cls, text: bytes) -> BuiltTrace:
        """ValueError, KeyError or TypeError where `text` is not one (a child cut short)."""
        got = json.loads(text)
        return cls(Path(got["path"]), int(got["size_bytes"]), float(got["build_s"]), int(got["perf_samples"]))


class TraceChild:
    """`with TraceChild(run_dir, data) as child: ...; built = child.result()`: the trace built beside the block;
    leaving the block by an exception (a stop signal's KeyboardInterrupt) kills the child and removes what it
    was writing."""

    def __init__(self, run_dir: Path, data: RunData) -> None:
        self.run_dir = run_dir
        self.data = data
        self.pid: int | None = None
        self._read_end: int | None = None

    def __enter__(self) -> TraceChild:
        if threading.active_count() > 1 or not hasattr(os, "fork"):
            return self
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # no room for a process: the trace is built after the report
            os.close(read_end)
            os.close(write_end)
            return self
        if pid == 0:  # pragma: no cover (the child's lines run in the forked process)
            os.close(read_end)
            _child(self.run_dir, self.data, write_end)
        os.close(write_end)
        self.pid, self._read_end = pid, read_end
        return self

    def result(self) -> BuiltTrace | None:
        """The trace the child built (waited for); None where it did not (the caller builds it itself)."""
        if self.pid is None or self._read_end is None:
            return None
        with os.fdopen(self._read_end, "rb") as pipe:
            self._read_end = None
            message = pipe.read()
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            remove_orphaned_temporaries(self.run_dir)
            return None
        try:
            return BuiltTrace.from_json(message)
        except (ValueError, KeyError, TypeError):
            return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._read_end is not None:
            os.close(self._read_end)
            self._read_end = None
        if self.pid is not None:  # left without its result: a stop signal, an error in the report
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.pid = None
            remove_orphaned_temporaries(self.run_dir)


def _child(run_dir: Path, data: RunData, write_end: int) -> None:
    """The forked child: build the trace, send its figures, exit without the collect's exit handlers (they are
    the collect's: its lock, its console)."""
    code = 1
    gc.disable()  # a process that exits once the trace is written: the collect's objects and its own never walked
    try:
        _die_with_parent()
        os.setpgid(0, 0)
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(number, signal.SIG_DFL)
        from hwprof.trace.perfetto import build_trace

        built = BuiltTrace.of(build_trace(run_dir, None, data=data))
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(built.to_json().encode())
        code = 0
    finally:  # any exception ends here too, unprinted: the collect builds the trace itself and says what failed
        os._exit(code)


def _die_with_parent() -> None:
    """SIGKILL this child when the collect dies (prctl PR_SET_PDEATHSIG), as a SIGKILL of the collect would have
    ended a trace it built itself; where the collect is already gone, exit."""
    import ctypes

    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


PR_SET_PDEATHSIG = 1
