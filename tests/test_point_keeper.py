"""The keeper of a Ray sweep point's scratch folder (hwprof/sweep/point_keeper.py), with real processes: a
keeper whose parent dies stops its command as Ctrl-C does and removes the folder, even when its parent had
SIGINT blocked as Ray's workers have; a folder whose lock nobody holds is removed by the next point."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from hwprof.sweep.point_keeper import LOCK, NEW_FOLDER_S, PREFIX, make_scratch, remove_stale, start_detached

CHILD = """
import signal, sys, time
import os
def mark(path, text):  # whole or not at all: the test reads it as soon as it exists
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
def stop(signum, frame):
    mark(sys.argv[1], str(signum))
    sys.exit(130)
signal.signal(signal.SIGINT, stop)
mark(sys.argv[2], "ready")
while True:
    time.sleep(0.1)
"""

PARENT = """
import os, signal, subprocess, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # as a Ray worker has it
work, stopped, ready = sys.argv[1:4]
keeper = [sys.executable, "-m", "hwprof.sweep.point_keeper", str(os.getpid()), work, "--"]
subprocess.Popen([*keeper, sys.executable, "-c", sys.argv[4], stopped, ready], start_new_session=True)
signal.pause()
"""


def wait_for(path: Path, timeout: float = 20) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < end, f"{path} never came"
        time.sleep(0.05)


def test_a_keeper_whose_parent_dies_stops_the_command_with_sigint_and_removes_the_folder(tmp_path: Path) -> None:
    work = tmp_path / f"{PREFIX}1-x"
    work.mkdir()
    (work / "run.json").write_text("{}")
    stopped, ready = tmp_path / "stopped", tmp_path / "ready"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(work), str(stopped), str(ready), CHILD])
    wait_for(ready)
    parent.kill()  # as Ray kills a worker whose owner is gone
    parent.wait()
    wait_for(stopped)
    assert stopped.read_text() == str(int(signal.SIGINT))
    end = time.monotonic() + 20
    while work.exists() and time.monotonic() < end:
        time.sleep(0.05)
    assert not work.exists()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGQUIT])
def test_a_keeper_asked_to_stop_passes_sigint_on_and_returns_the_status(tmp_path: Path, sig: int) -> None:
    """SIGQUIT too, as a collect stops on it (it killed the keeper with a core, leaving the collect running)."""
    work = tmp_path / f"{PREFIX}2-x"
    work.mkdir()
    stopped, ready = tmp_path / "stopped", tmp_path / "ready"
    keeper = start_detached(work, [sys.executable, "-c", CHILD, str(stopped), str(ready)])
    assert keeper.pid not in [c.pid for c in psutil.Process().children(recursive=True)]  # nobody's child here
    wait_for(ready)
    keeper.send_signal(sig)
    assert keeper.wait(timeout=30) == 130
    assert stopped.exists() and work.exists()  # asked by its task, which packs the run: the folder stays
    assert (work / "keeper.exit").read_text() == "130"
    import shutil

    shutil.rmtree(work)  # the task packed the run and removed its folder: the keeper, lingering till then, goes
    end = time.monotonic() + 10
    while psutil.pid_exists(keeper.pid) and time.monotonic() < end:
        time.sleep(0.1)
    assert not psutil.pid_exists(keeper.pid)


def test_stale_folders_are_removed_and_held_or_new_ones_kept(tmp_path: Path, monkeypatch: object) -> None:
    import tempfile

    setattr(tempfile, "tempdir", str(tmp_path))  # noqa: B010 (make_scratch's mkdtemp goes here)
    try:
        held, fd = make_scratch(7)
        gone, gone_fd = make_scratch(8)
        os.close(gone_fd)  # its task and keeper have died: nobody holds the lock
        no_lock_old = tmp_path / f"{PREFIX}9-old"
        no_lock_old.mkdir()
        old = time.time() - NEW_FOLDER_S - 5
        os.utime(no_lock_old, (old, old))
        no_lock_new = tmp_path / f"{PREFIX}10-new"
        no_lock_new.mkdir()
        mine, mine_fd = make_scratch(11)
        removed = remove_stale(tmp_path, keep=mine)
        assert sorted(removed) == sorted([gone.name, no_lock_old.name])
        assert held.exists() and (held / LOCK).exists() and no_lock_new.exists() and mine.exists()
        os.close(fd)
        os.close(mine_fd)
        assert remove_stale(tmp_path, keep=mine) == [held.name]
    finally:
        setattr(tempfile, "tempdir", None)  # noqa: B010


def test_a_point_starting_beside_another_never_removes_its_new_folder(tmp_path: Path, monkeypatch) -> None:
    """Two points start at once on nodes that share the temporary folder: the other point's remove_stale runs
    at the worst moment, between this point's lock file appearing and its flock. The folder stays (CI before the
    fix: the second point's collect.log 'No such file or directory')."""
    import tempfile

    import hwprof.sweep.point_keeper as point_keeper

    real_flock = fcntl.flock
    removed: list[list[str]] = []

    def flock_after_a_neighbour_looked(fd: int, operation: int) -> None:
        if operation == fcntl.LOCK_EX and not removed:  # make_scratch's own lock, not remove_stale's try
            removed.append(remove_stale(tmp_path))
        real_flock(fd, operation)

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(point_keeper.fcntl, "flock", flock_after_a_neighbour_looked)
    work, fd = make_scratch(3)
    try:
        assert removed == [[]], removed
        assert work.is_dir() and (work / LOCK).exists() and not list(work.glob("*.taking"))
        monkeypatch.setattr(point_keeper.fcntl, "flock", real_flock)
        assert remove_stale(tmp_path) == [], "a held lock was taken for a gone point"
        (work / "collect.log").write_text("the point writes its log")
    finally:
        os.close(fd)
