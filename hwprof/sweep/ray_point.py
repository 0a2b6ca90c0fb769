"""What a Ray worker node does for one sweep point: the ordinary `hwprof collect` in a child process, its
run directory packed as one tar.gz in memory for the object store, and the node's description.

A collect whose worker dies (its node went away, its driver or job ended, the worker was killed) is stopped
by its keeper (hwprof/sweep/point_keeper.py), which then removes the point's scratch folder. A sweep that
stops (Ctrl-C, SIGTERM, `hwprof sweep stop`) tells its points through the control actor: each collect is
stopped as Ctrl-C stops it and its run, finalised as interrupted, comes back.

Nothing here imports ray at module level: the functions are plain Python that hwprof/sweep/ray.py turns into
Ray tasks, and the packing is the same code on both ends.
"""

from __future__ import annotations

import io
import os
import platform
import shutil
import subprocess
import tarfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwprof.analysis.sweep.rows import SweepPoint
from hwprof.schema.codec import JsonObject
from hwprof.sweep.point_keeper import (
    KILL_GRACE_S,
    STOP_GRACE_S,
    DetachedKeeper,
    keeper_of,
    make_scratch,
    remove_stale,
    start_detached,
    stop_gently,
)
from hwprof.sweep.points import collect_command

LOG = "collect.log"
POLL_S = 1.0
"""How often a running point asks the sweep's control actor whether to stop."""


class SweepControl:
    """The sweep's control actor on the driver's node (hwprof/sweep/ray.py makes it a Ray actor): points tell
    it when they start, and ask it whether the sweep is stopping (Ctrl-C, SIGTERM, `hwprof sweep stop`), so
    that a stopped point finalises its run and brings it back instead of being cancelled."""

    def __init__(self) -> None:
        self.started: list[PointStarted] = []
        self.stopping = False

    def put(self, item: PointStarted) -> bool:
        self.started.append(item)
        return self.stopping

    def take(self) -> list[PointStarted]:
        taken, self.started = self.started, []
        return taken

    def stop(self) -> None:
        self.stopping = True

    def should_stop(self) -> bool:
        return self.stopping


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
    stopped: bool = False
    """The sweep asked the point to stop (its run, if any, is the interrupted one)."""
    cleaned: list[str] = field(default_factory=list)
    """Scratch folders of gone points that this point removed from its node's temporary folder."""


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


def _asked_to_stop(ray: Any, control: Any | None) -> bool:
    """True when the sweep is stopping, or its control actor is gone with the driver."""
    if control is None:
        return False
    try:
        return bool(ray.get(control.should_stop.remote(), timeout=POLL_S * 5))
    except ray.exceptions.GetTimeoutError:
        return False
    except ray.exceptions.RayError:
        return True


def _wait(ray: Any, keeper: DetachedKeeper, control: Any | None, timeout_s: float | None) -> tuple[int | None, bool]:
    """(exit status, stopped by the sweep) of the point's keeper; status None when it ran past timeout_s."""
    end = time.monotonic() + timeout_s if timeout_s else None
    while True:
        try:
            return keeper.wait(timeout=POLL_S), False
        except subprocess.TimeoutExpired:
            pass
        if end is not None and time.monotonic() > end:
            stop_gently(keeper, STOP_GRACE_S + KILL_GRACE_S)
            return None, False
        if _asked_to_stop(ray, control):
            return stop_gently(keeper, STOP_GRACE_S + KILL_GRACE_S), True


def run_point(
    key: int, point: SweepPoint, shared: Sequence[str], timeout_s: float | None, control: Any | None
) -> PointReturn:
    """The Ray task: collect one point on this node, exactly as a local sweep does, and pack its run. The
    collect runs under a keeper (hwprof.sweep.point_keeper) that removes the scratch folder if this worker is
    killed; a stop asked through the control actor ends the collect as Ctrl-C does and its partial run,
    finalised as interrupted, comes back."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    started_at = time.time()
    work, lock_fd = None, -1
    try:  # a cancel (KeyboardInterrupt) may come at any line, the first included
        work, lock_fd = make_scratch(key)
        cleaned = remove_stale(work.parent, keep=work)
        if control is not None and ray.get(control.put.remote(PointStarted(key, node_id, platform.node(), started_at))):
            return PointReturn(key, node_id, platform.node(), None, b"", b"", 0, 0, 0.0, 0.0, started_at, time.time(),
                               stopped=True, cleaned=cleaned)  # fmt: skip
        run_dir = work / point.name
        t0 = time.monotonic()
        code, stopped = _collect(ray, work, lock_fd, collect_command(point, run_dir, shared), control, timeout_s)
        collect_s = time.monotonic() - t0
        t1 = time.monotonic()
        archive, files, size = pack(run_dir) if run_dir.is_dir() else (b"", 0, 0)
        return PointReturn(
            key, node_id, platform.node(), code, (work / LOG).read_bytes(), archive, files, size, collect_s,
            time.monotonic() - t1, started_at, time.time(), stopped=stopped, cleaned=cleaned,
        )  # fmt: skip
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
        if lock_fd >= 0:
            os.close(lock_fd)


def _collect(
    ray: Any, work: Path, lock_fd: int, command: list[str], control: Any | None, timeout_s: float | None
) -> tuple[int | None, bool]:
    """Run the point's collect under its keeper; (exit status, stopped by the sweep) as _wait gives them.
    Interrupted anywhere (ray.cancel raises KeyboardInterrupt in the task), the keeper is stopped first,
    found through its pid file when the interrupt came while it was starting."""
    keeper: DetachedKeeper | None = None
    with open(work / LOG, "wb") as log:
        try:
            # Ray kills the worker's process group, and its children, with it: the keeper must be neither
            keeper = start_detached(
                work, command, stdout=log, stderr=subprocess.STDOUT, env=_collect_env(), pass_fds=(lock_fd,)
            )
            return _wait(ray, keeper, control, timeout_s)
        except BaseException:
            keeper = keeper or keeper_of(work)
            if keeper is not None:
                stop_gently(keeper, STOP_GRACE_S + KILL_GRACE_S)
            raise


def describe_node(wanted: dict[str, str]) -> JsonObject:
    """The Ray task that tells the driver what machine a node is (hwprof.core.host.host_info, as in run.json), or,
    under "missing", which of hwprof's dependencies (wanted: name -> the driver's version) it lacks."""
    import ray

    from hwprof.core.host import host_info
    from hwprof.sweep.ray_env import missing_here

    missing = missing_here(wanted)
    if missing:
        return {"missing": missing}
    return {"node_id": ray.get_runtime_context().get_node_id(), **host_info().to_json()}
