"""py-spy stopped (SIGSTOP) in a paired pass's clean iterations and continued (SIGCONT) after them.

py-spy runs in its own process, attached by the parent (collector.PySpyTool), so the clean iterations
of the trace pass would otherwise carry its sampling too and the pass's paired cost would leave it
out. The parent writes py-spy's pid into the pass folder (PID_FILE) as it launches it; the worker's
in-process collector stops that process before each clean iteration and continues it after, and
writes what it did (STATS_FILE) when it closes, which the parent adds to py-spy's summary.

What a stop costs the samples: py-spy's timer keeps its schedule, so after SIGCONT it takes the
samples it missed back to back (measured here: a 1 s stop at 50 Hz gave 50 samples within 2 ms of
the SIGCONT, and the same total count as without the stop). The samples of a clean iteration are
therefore not lost in number but taken at the moment of the continue, in the next measured
iteration's load stage (before its forward, which the paired figure times); they carry no time of
their own (a few microseconds each), so their weight in the stage and layer shares is nil. The
stats say how many there were (the stopped time x the rate), per switch and in all.

Not with --pyspy-native: py-spy then stops every thread of the worker for each sample, and a
py-spy stopped in the middle of one would leave the worker's threads stopped with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path

from hwprof.core.atomic import atomic_write_text

PID_FILE = "pyspy.pid"
STATS_FILE = "pyspy.switches.json"


def write_pid(out_dir: Path, pid: int) -> None:
    atomic_write_text(out_dir / PID_FILE, str(pid))


def _is_pyspy_of(pid: int, worker_pid: int) -> bool:
    """The process is `py-spy record -p <worker_pid> ...` (not a recycled pid)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"record" in args and any(a == b"-p" and b == str(worker_pid).encode() for a, b in pairwise(args))


@dataclass
class SwitchStats:
    """What the worker did to py-spy in the clean iterations (py-spy's summary: `switched`)."""

    switches: int = 0
    """Stops, each followed by a continue."""
    stopped_ms: float = 0.0
    """Time py-spy spent stopped, in all."""
    stopped_ms_per_switch: list[float] = field(default_factory=list)
    missed: int = 0
    """Clean iterations in which py-spy was not stopped (its pid not yet known, or it had exited)."""


class PySpySwitch:
    """Stops and continues the py-spy process whose pid the parent wrote into `out_dir`."""

    def __init__(self, out_dir: Path, send: Callable[[int, int], None] = os.kill) -> None:
        self.out_dir = out_dir
        self._send = send
        self.pid: int | None = None
        self.gone = False
        self.stopped_at: int | None = None
        self.stats = SwitchStats()

    def _target(self) -> int | None:
        if self.pid is None and not self.gone:
            with contextlib.suppress(OSError, ValueError):
                pid = int((self.out_dir / PID_FILE).read_text())
                if _is_pyspy_of(pid, os.getpid()):
                    self.pid = pid
        return None if self.gone else self.pid

    def _signal(self, pid: int, sig: int) -> bool:
        try:
            self._send(pid, sig)
        except OSError:  # exited, or not ours to signal (EPERM): py-spy simply keeps sampling
            self.gone = True
            return False
        return True

    def stop(self) -> None:
        pid = self._target()
        if self.stopped_at is not None:
            return
        if pid is None or not self._signal(pid, signal.SIGSTOP):
            self.stats.missed += 1
            return
        self.stopped_at = time.monotonic_ns()

    def cont(self) -> None:
        """Continue py-spy if this switch stopped it (safe to call at any time, any number of times)."""
        if self.stopped_at is None or self.pid is None:
            return
        self._signal(self.pid, signal.SIGCONT)
        ms = (time.monotonic_ns() - self.stopped_at) / 1e6
        self.stopped_at = None
        self.stats.switches += 1
        self.stats.stopped_ms += ms
        self.stats.stopped_ms_per_switch.append(round(ms, 3))

    def save(self) -> None:
        self.cont()
        atomic_write_text(self.out_dir / STATS_FILE, json.dumps(asdict(self.stats)))


def summary_fields(out_dir: Path, rate_hz: int) -> dict[str, object]:
    """py-spy summary fields from the worker's STATS_FILE ({} when the pass never stopped py-spy)."""
    path = out_dir / STATS_FILE
    if not path.exists():
        return {}
    stats = SwitchStats(**json.loads(path.read_text()))
    per_switch = [round(ms / 1e3 * rate_hz, 2) for ms in stats.stopped_ms_per_switch]
    return {
        "paused_switches": stats.switches,
        "paused_ms": round(stats.stopped_ms, 3),
        "paused_samples_deferred": round(stats.stopped_ms / 1e3 * rate_hz),
        "paused_samples_deferred_per_switch": per_switch,
        "paused_missed": stats.missed,
    }
