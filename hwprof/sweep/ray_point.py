"""What a Ray worker node does for one sweep point: the ordinary `hwprof collect` in a child process, its
run directory packed as one tar.gz in memory for the object store, and the node's description.

A collect whose worker dies (its node went away, or the worker was killed) does not outlive it: Ray kills
a dead worker's child processes (checked here with kill -9 of the worker and with a removed node).
Nothing here imports ray at module level: the functions are plain Python that hwprof/sweep/ray.py turns
into Ray tasks, and the packing is the same code on both ends.
"""

from __future__ import annotations

import io
import os
import platform
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwprof.analysis.sweep_rows import SweepPoint
from hwprof.sweep.run import collect_command

STOP_GRACE_S = 10.0
"""After Ctrl-C (ray.cancel) the collect gets SIGINT and this long to stop its passes before SIGKILL."""


@dataclass(frozen=True)
class PointStarted:
    """A point's attempt starting on a node, as the task tells the driver (Ray may start a point again after
    its worker or node died: each start is an attempt)."""

    key: int
    node_id: str
    hostname: str
    at: float
    """time.time() on the node when the task started."""


@dataclass
class PointReturn:
    """One finished point as it travels back to the driver."""

    key: int
    node_id: str
    hostname: str
    code: int | None
    """collect's exit status; None when it ran past the point's time-out and was stopped."""
    log: bytes
    archive: bytes
    """The run directory as tar.gz (b"" when collect left none)."""
    files: int
    run_bytes: int
    """Bytes of the run directory's files before compression."""
    collect_s: float
    pack_s: float
    started_at: float = 0.0
    """time.time() on the node when the task started, and when it returned."""
    ended_at: float = 0.0


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _collect_env() -> dict[str, str]:
    """The worker's environment less OMP_NUM_THREADS, which Ray sets for its workers (1 for a task that asks
    for no CPU): collect sets each pass's threads itself, as it does when started from a shell."""
    return {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}


def pack(run_dir: Path) -> tuple[bytes, int, int]:
    """(tar.gz of run_dir with paths relative to it, files, uncompressed bytes); everything is kept."""
    buf = io.BytesIO()
    files = size = 0
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for path in sorted(run_dir.rglob("*")):
            if path.is_file() and not path.is_symlink():
                tar.add(path, arcname=str(path.relative_to(run_dir)), recursive=False)
                files += 1
                size += path.stat().st_size
    return buf.getvalue(), files, size


def unpack(archive: bytes, run_dir: Path) -> None:
    """Write a packed run directory to run_dir: into a sibling first, renamed when whole."""
    partial = run_dir.with_name(run_dir.name + ".receiving")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(partial, filter="data")
    partial.rename(run_dir)


def run_point(
    key: int, point: SweepPoint, shared: Sequence[str], timeout_s: float | None, started: Any | None
) -> PointReturn:
    """The Ray task: collect one point on this node, exactly as a local sweep does, and pack its run."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    started_at = time.time()
    if started is not None:
        started.put(PointStarted(key, node_id, platform.node(), started_at))
    work = Path(tempfile.mkdtemp(prefix="hwprof-point-"))
    try:
        run_dir = work / point.name
        log_path = work / "collect.log"
        t0 = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                collect_command(point, run_dir, shared),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_collect_env(),
            )
            code: int | None
            try:
                code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _stop(proc)
                code = None
            except BaseException:  # ray.cancel raises KeyboardInterrupt here: stop the collect, then go
                _stop(proc)
                raise
        collect_s = time.monotonic() - t0
        t1 = time.monotonic()
        archive, files, size = pack(run_dir) if run_dir.is_dir() else (b"", 0, 0)
        return PointReturn(
            key, node_id, platform.node(), code, log_path.read_bytes(), archive, files, size, collect_s,
            time.monotonic() - t1, started_at, time.time(),
        )  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


def describe_node(wanted: dict[str, str]) -> dict[str, Any]:
    """The Ray task that tells the driver what machine a node is (hwprof.host.host_info, as in run.json), or,
    under "missing", which of hwprof's dependencies (wanted: name -> the driver's version) it lacks."""
    import ray

    from hwprof.host import host_info
    from hwprof.sweep.ray_env import missing_here

    missing = missing_here(wanted)
    if missing:
        return {"missing": missing}
    return {"node_id": ray.get_runtime_context().get_node_id(), **host_info()}
