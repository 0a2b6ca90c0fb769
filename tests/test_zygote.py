"""The collect's zygote (hwprof.session.zygote): a real zygote process forks real workers; what a collect needs of
one (its own session, its files, its folder, its exit status, unreaped until asked) is checked on the process."""

from __future__ import annotations

import os
import resource
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hwprof.advisor.children import PAIRED_WORKER, child_env, run_child
from hwprof.session import child
from hwprof.session.stopping import StopSignals
from hwprof.session.zygote import LAZY_ENV, ForkedWorker, Zygote, ZygoteGone

WORKER = [sys.executable, "-P", "-m", "hwprof.session.worker"]


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    started = Zygote.start({**os.environ, "HWPROF_ZYGOTE_TEST": "1"})
    assert started is not None
    yield started
    started.close()


def test_a_forked_worker_gets_its_files_folder_and_exit_status(zygote: Zygote, tmp_path: Path) -> None:
    log = (tmp_path / "worker.log").open("w")
    worker = zygote.spawn([*WORKER, "one-argument"], str(tmp_path), zygote.env, log)
    assert worker.wait(60) == 2  # worker.main's usage error
    assert "usage: python -m hwprof.session.worker" in (tmp_path / "worker.log").read_text()
    assert worker.stdout.read() == ""  # its stdout was the pipe, closed at its exit


def test_a_worker_runs_in_its_own_session_and_stays_unreaped_until_waited(zygote: Zygote, tmp_path: Path) -> None:
    """A worker blocked reading its config (a FIFO) is killed: its session is its own, its folder the one asked
    for, and after it died its pid stays taken (a zombie) until wait() asks the zygote to reap it."""
    os.mkfifo(tmp_path / "config.json")
    log = (tmp_path / "worker.log").open("w")
    worker = zygote.spawn([*WORKER, str(tmp_path), "timing", "timing"], str(tmp_path / ".."), zygote.env, log)
    deadline = time.monotonic() + 60
    while os.readlink(f"/proc/{worker.pid}/cwd") != str(tmp_path.parent) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.getsid(worker.pid) == worker.pid and os.getpgid(worker.pid) == worker.pid
    assert os.readlink(f"/proc/{worker.pid}/cwd") == str(tmp_path.parent)
    assert not child.exited(worker) and worker.poll() is None
    os.killpg(worker.pid, signal.SIGKILL)
    while not child.exited(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child.exited(worker)
    assert Path(f"/proc/{worker.pid}").exists()  # not reaped: the session id cannot be reused yet
    assert worker.wait(10) == -signal.SIGKILL
    while Path(f"/proc/{worker.pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{worker.pid}").exists()


def test_only_unwrapped_workers_with_the_zygotes_environment_are_forked(zygote: Zygote) -> None:
    command = [*WORKER, "run", "timing", "timing"]
    assert zygote.forkable(command, zygote.env)
    assert zygote.forkable(command, {**zygote.env, **dict.fromkeys(LAZY_ENV, "2")})
    assert not zygote.forkable(command, {**zygote.env, "OMP_NUM_THREADS": "7"})
    assert not zygote.forkable(command, {k: v for k, v in zygote.env.items() if k != "HWPROF_ZYGOTE_TEST"})
    assert not zygote.forkable(["scalene", "run", "--", *command[1:]], zygote.env)
    assert not zygote.forkable(["/usr/bin/python3.9", *command[1:]], zygote.env)
    assert not zygote.forkable([*WORKER[:3], PAIRED_WORKER, "spec.json"], zygote.env)  # not one of its modules


def test_advises_zygote_forks_its_paired_worker_and_no_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """advise's zygote runs hwprof.advisor.paired_worker's main through run_child, as a started worker would:
    a spec that is not there is its one failure, said in its log and exit status."""
    forks = Zygote.start(child_env(), (PAIRED_WORKER,))
    assert forks is not None
    try:
        command = [*WORKER[:3], PAIRED_WORKER, str(tmp_path / "missing.spec.json")]
        assert forks.forkable(command, child_env()) and not forks.forkable([*WORKER, "x"], child_env())
        spawned: list[ForkedWorker] = []
        spawn = forks.spawn

        def counted(*args: Any) -> ForkedWorker:
            spawned.append(spawn(*args))
            return spawned[-1]

        monkeypatch.setattr(forks, "spawn", counted)
        outcome = run_child(command, tmp_path / "paired.log", 60, StopSignals(), lambda _e: None, forks=forks)
        assert outcome.returncode == 1 and "missing.spec.json" in outcome.error, outcome
        assert len(spawned) == 1 and spawned[0].returncode == 1  # forked, and waited for through the zygote
        assert forks.exits == {} and not forks.gone  # reaped, the zygote still there
    finally:
        forks.close()


def test_a_zygote_that_died_is_said_gone_and_not_asked_again(tmp_path: Path) -> None:
    zygote = Zygote.start(dict(os.environ))
    assert zygote is not None
    zygote.proc.kill()
    zygote.proc.wait()
    with pytest.raises(ZygoteGone):
        zygote.spawn([*WORKER, "x"], str(tmp_path), zygote.env, (tmp_path / "log").open("w"))
    assert not zygote.forkable([*WORKER, "x"], zygote.env)
    zygote.close()


def test_no_zygote_under_a_tight_task_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resource, "getrlimit", lambda _which: (64, 64))
    assert Zygote.start(dict(os.environ)) is None


def test_a_zygote_whose_imports_initialised_cuda_is_never_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child forked after CUDA's initialisation cannot use CUDA: such a zygote exits before "ready", and each
    pass then starts the usual way (zygote.start on ZygoteGone). torch's CUDA faked: this host may have none."""
    import socket
    import types

    from hwprof.session import zygote as zygote_module

    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: True))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    assert zygote_module.cuda_initialised()
    ours, theirs = socket.socketpair()
    ours.shutdown(socket.SHUT_WR)  # a zygote that went on to serve would read the end at once and return 0
    assert zygote_module.main(theirs.detach(), (), ()) == 1
    ours.settimeout(5)
    assert ours.recv(1024) == b"", "the zygote said nothing (no ready) and closed its end"
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=bool)))
    assert not zygote_module.cuda_initialised()


LATE_MODULE = """
import os, time
time.sleep(1.0)
with open(os.environ["LATE_STAMP"], "w") as out:
    out.write(repr(time.monotonic()))
"""
PROBE_WORKER = """
import json, sys, time
from hwprof.session.late_imports import wait_imports

def main(argv):
    before = "late_slow" in sys.modules
    waited = wait_imports()
    with open(argv[0], "w") as out:
        json.dump({"before": before, "waited": waited, "at": time.monotonic()}, out)
    return 0
"""


def _late_zygote(tmp_path: Path) -> tuple[Zygote, dict[str, str]]:
    (tmp_path / "late_slow.py").write_text(LATE_MODULE)
    (tmp_path / "late_probe.py").write_text(PROBE_WORKER)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "LATE_STAMP": str(tmp_path / "stamp")}
    started = Zygote.start(env, ("late_probe",), ("late_slow",))
    assert started is not None
    return started, env


def _probe(zygote: Zygote, tmp_path: Path, name: str, needs_imports: bool) -> dict[str, Any]:
    import json

    command = [*WORKER[:3], "late_probe", str(tmp_path / f"{name}.json")]
    worker = zygote.spawn(command, str(tmp_path), zygote.env, (tmp_path / f"{name}.log").open("w"), needs_imports)
    assert worker.wait(60) == 0, (tmp_path / f"{name}.log").read_text()
    found: dict[str, Any] = json.loads((tmp_path / f"{name}.json").read_text())
    return found


def test_a_first_worker_that_needs_none_of_the_late_imports_is_forked_before_them_and_waits_for_them(
    tmp_path: Path,
) -> None:
    """The zygote's late imports (hwprof.session.late_imports): a first worker that needs none of them (a collect's
    timing pass) is forked before them and goes on only once the zygote made them (the module's 1 s import ended
    before it went on); a worker forked after has them and waits for nothing."""
    zygote, _ = _late_zygote(tmp_path)
    try:
        first = _probe(zygote, tmp_path, "first", needs_imports=False)
        imported_at = float((tmp_path / "stamp").read_text())
        assert not first["before"] and first["waited"] > 0.2 and first["at"] >= imported_at, first
        second = _probe(zygote, tmp_path, "second", needs_imports=False)
        assert second["before"] and second["waited"] == 0.0, second
    finally:
        zygote.close()


def test_a_first_worker_that_needs_the_late_imports_is_forked_after_them(tmp_path: Path) -> None:
    zygote, _ = _late_zygote(tmp_path)
    try:
        first = _probe(zygote, tmp_path, "first", needs_imports=True)
        assert first["before"] and first["waited"] == 0.0, first
    finally:
        zygote.close()
