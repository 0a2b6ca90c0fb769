"""Real collects stopped from outside, and what they leave: shared by the fault-injection tests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

SMALL = ["--model", "yolov8n", "--imgsz", "64", "--warmup", "1", "--iters", "3", "--no-report"]
PASS_COLLECTORS = {
    "timing": "timing",
    "layers": "flops,perf_events,sysstat",
    "kernels": "perf_sampling",
    "trace": "torch_profiler,pyspy",
    "scalene": "scalene",
}
"""--only for a collect whose one pass is the one under test."""


def hwprof_command(*args: str) -> list[str]:
    return [sys.executable, "-P", "-m", "hwprof", *args]


def start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    """`hwprof ARGS` as a shell would start it in the background: the test signals its pid, as systemd would.
    SIGHUP at its default, as a terminal's shell starts it: under `nohup tox` it would inherit SIGHUP ignored,
    which hwprof rightly leaves ignored (hwprof.session.stopping), and the SIGHUP tests would see no stop."""
    return subprocess.Popen(
        hwprof_command(*args),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        preexec_fn=_sighup_default,
    )


def _sighup_default() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def wait_for(path: Path, proc: subprocess.Popen[str], timeout_s: float = 240) -> None:
    """Until `path` exists with content (the pass's warm-up is over when its markers.jsonl has lines)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if path.exists() and path.stat().st_size > 0:
            return
        if proc.poll() is not None:
            raise AssertionError(f"hwprof exited {proc.returncode} before {path} appeared:\n{proc.stdout.read()}")  # type: ignore[union-attr]
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"{path} did not appear in {timeout_s} s")


def send(proc: subprocess.Popen[str], sig: int, times: int, gap_s: float = 0.03) -> None:
    """`sig` sent `times` times: each after the one before was delivered (no longer pending for the process), then
    gap_s more: long enough for the collect's handler to have taken it (two standard signals pending at once are
    one, and so are two taken before Python runs its handler), short enough that the second comes before run.json
    is final. A forked worker that stops now ends within a few hundredths of a second of the first signal, and a
    collect of a short pass made run.json final within 0.1 s (0.3 s then 0.1 s gaps each saw the run end before the
    second signal). The wait for delivery: on a host whose CPUs other tests kept busy, a collect not scheduled
    within 30 ms took both signals as one (fresh clone of 81cc6f3: kernels-SIGQUIT-twice received 1)."""
    for k in range(times):
        if k:
            _delivered(proc.pid, sig)
            time.sleep(gap_s)
        proc.send_signal(sig)


def _delivered(pid: int, sig: int, timeout_s: float = 2.0) -> None:
    """Until `sig` is no longer pending for `pid` (/proc/PID/status ShdPnd: the process took it), or the process
    is gone, or timeout_s passed."""
    bit = 1 << (sig - 1)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        pending = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("ShdPnd:")), 0)
        if not pending & bit:
            return
        time.sleep(0.001)


@dataclass
class Leftovers:
    processes: list[str] = field(default_factory=list)
    fifos: list[str] = field(default_factory=list)
    temporary: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.processes or self.fifos or self.temporary)


def leftovers(run_dir: Path, settle_s: float = 3.0) -> Leftovers:
    """Processes that still name or work in the run directory, FIFOs and temporary files in it."""
    root = str(run_dir.resolve())
    found = Leftovers()
    end = time.monotonic() + settle_s
    while True:
        found.processes = []
        for proc in psutil.process_iter(["pid", "name", "cmdline", "cwd"]):
            try:
                if root in " ".join(proc.info["cmdline"] or []) or (proc.info["cwd"] or "").startswith(root):
                    found.processes.append(f"{proc.info['pid']} {proc.info['name']} (ppid {proc.ppid()})")
            except psutil.Error:
                continue
        if not found.processes or time.monotonic() > end:
            break
        time.sleep(0.2)
    found.fifos = [str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_fifo()]
    found.temporary = [str(p.relative_to(run_dir)) for p in run_dir.rglob("*.tmp")]
    return found


def kill_leftovers(found: Leftovers) -> None:
    for line in found.processes:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(line.split()[0]), signal.SIGKILL)


def run_json(run_dir: Path) -> dict[str, Any]:
    return dict(json.loads((run_dir / "run.json").read_text()))
