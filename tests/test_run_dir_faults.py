"""What happens to a run directory from outside, named for what it is (issue 38): removed during a collect,
left by a collect killed with SIGKILL (its header and its space reserve), on a read-only mount (`hwprof trace`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from fault_harness import SMALL, run_json, start, wait_for

pytestmark = pytest.mark.fault

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_small"


def _dead_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def _error_lines(text: str) -> list[str]:
    return [line for line in " ".join(text.split("\n")).split("hwprof: error:")[1:]]


# ----------------------------------------------------------------------------- removed during a collect


def test_a_write_into_a_removed_folder_names_the_folder_not_its_temporary_file(tmp_path: Path) -> None:
    from hwprof.core.atomic import FolderGoneError, atomic_write_text

    run = tmp_path / "parent" / "run"
    run.mkdir(parents=True)
    shutil.rmtree(tmp_path / "parent")
    with pytest.raises(FolderGoneError) as caught:
        atomic_write_text(run / "run.json", "{}")
    assert caught.value.folder == run and caught.value.removed == tmp_path / "parent"
    assert ".tmp" not in str(caught.value)
    assert str(caught.value) == (
        f"the folder {run} was removed while hwprof was writing into it (with {tmp_path / 'parent'}, which is "
        "gone): nothing more can be saved there"
    )


@pytest.mark.slow
def test_a_run_directory_removed_during_collect_is_one_line_naming_it_and_stops_the_pass(tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    out = parent / "run"
    small = [a if a != "3" else "400" for a in SMALL]  # --iters 400: the pass outlasts the removal by far
    proc = start(["collect", *small, "--only", "timing", "--out", str(out)], tmp_path)
    wait_for(out / "passes" / "timing" / "markers.jsonl", proc)
    worker = int((out / "passes" / "timing" / "worker.pid").read_text().split()[0])
    shutil.rmtree(parent)
    removed_at = time.monotonic()
    text, _ = proc.communicate(timeout=120)
    assert time.monotonic() - removed_at < 30, "the pass was not stopped when its run directory vanished"
    assert proc.returncode == 1, text
    assert "Traceback" not in text
    errors = _error_lines(text)
    assert len(errors) == 1, text
    assert f"the run directory {out} was removed during the collect" in " ".join(errors[0].split())
    assert "nothing more can be saved there" in " ".join(errors[0].split())
    assert ".tmp" not in errors[0]
    assert not parent.exists(), "the collect recreated the removed folder"
    time.sleep(0.5)
    assert not psutil.pid_exists(worker) or psutil.Process(worker).status() == psutil.STATUS_ZOMBIE


# ----------------------------------------------------------------------------- a collect killed with SIGKILL


def _killed_run(tmp_path: Path, holder_pid: int | None) -> Path:
    """A copy of a run as a collect killed with SIGKILL leaves it: run.json "running", its lock file naming
    the dead collect, and its space reserve."""
    from hwprof.core.atomic import RESERVE_NAME, SpaceReserve

    run_dir = tmp_path / "killed"
    shutil.copytree(FIXTURE, run_dir)
    run = run_json(run_dir)
    run["status"], run["finished"] = "running", None
    (run_dir / "run.json").write_text(json.dumps(run))
    if holder_pid is not None:
        (run_dir / ".hwprof.lock").write_text(json.dumps({"pid": holder_pid, "host": "here", "started": 0}))
    SpaceReserve(run_dir)
    assert (run_dir / RESERVE_NAME).stat().st_size == 128 * 1024
    return run_dir


def _report_header(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> str:
    from hwprof.cli.main import main

    assert main(["report", str(run_dir), "--top", "3"]) == 0
    return " ".join(capsys.readouterr().out.split())


def test_the_report_of_a_killed_collect_says_so_and_removes_its_reserve_a_live_ones_stay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hwprof.core.atomic import RESERVE_NAME
    from hwprof.rundir.lock import RunDirLock

    dead = _dead_pid()
    run_dir = _killed_run(tmp_path, dead)
    text = _report_header(run_dir, capsys)
    assert "[running]" not in text
    assert "[not finished: its collect was killed or crashed]" in text
    assert "was killed or crashed before it finished" in text  # the warning beneath it stays
    assert not (run_dir / RESERVE_NAME).exists()
    assert f'"pid": {dead}' in (run_dir / ".hwprof.lock").read_text()  # kept: the next collect names the dead one

    (run_dir / ".hwprof.lock").unlink()
    with RunDirLock(run_dir):  # a collect still running: its header and its own reserve stay
        (run_dir / RESERVE_NAME).write_bytes(b"\0" * 1024)
        text = _report_header(run_dir, capsys)
        assert "[running]" in text and "still being collected" in text
        assert (run_dir / RESERVE_NAME).exists()


def test_compare_names_a_killed_run_as_not_finished(tmp_path: Path) -> None:
    from hwprof.analysis.run_analysis import analyse
    from hwprof.analysis.run_head import head
    from hwprof.rundir.reader import RunData

    run_dir = _killed_run(tmp_path, _dead_pid())
    assert head(analyse(RunData.load(run_dir)), run_dir).status == "not finished: its collect was killed or crashed"


def test_the_next_collect_that_takes_over_the_lock_removes_the_dead_ones_reserve(tmp_path: Path) -> None:
    from hwprof.core.atomic import RESERVE_NAME, SpaceReserve
    from hwprof.session.plan import claim_out_dir

    out = tmp_path / "died-early"  # killed before its first file: only its lock and its reserve
    out.mkdir()
    dead = _dead_pid()
    (out / ".hwprof.lock").write_text(json.dumps({"pid": dead, "host": "here", "started": 0}))
    SpaceReserve(out)
    run_dir, lock = claim_out_dir(out)
    try:
        assert lock.took_over is not None and lock.took_over.pid == dead
        assert not (run_dir / RESERVE_NAME).exists()
    finally:
        lock.release()


# ----------------------------------------------------------------------------- a read-only run directory


@contextlib.contextmanager
def read_only_bind(source: Path, where: Path) -> Iterator[Path]:
    """source mounted read-only at where (root only: skipped otherwise), always unmounted."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "--bind", str(source), str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {done.stderr.strip()}")
    try:
        ro = subprocess.run(["mount", "-o", "remount,ro,bind", str(where)], capture_output=True, text=True)
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {ro.stderr.strip()}")
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _one_not_writable_error(text: str, folder: Path) -> str:
    errors = _error_lines(text)
    assert len(errors) == 1, text
    line = " ".join(errors[0].split())
    assert f"{folder} cannot be written (" in line, line
    assert "rename" not in line and "stale" not in line, line
    return line


def test_trace_on_a_read_only_mount_is_one_error_with_the_fix(tmp_path: Path, run_hwprof) -> None:
    source = tmp_path / "src"
    shutil.copytree(FIXTURE, source / "run")
    (source / "run" / "trace.pftrace").write_bytes(b"an earlier build")
    with read_only_bind(source, tmp_path / "ro") as ro:
        done = run_hwprof("trace", str(ro / "run"))
        assert done.returncode == 2, done.stdout
        assert "Traceback" not in done.stdout + done.stderr
        line = _one_not_writable_error(done.stderr, ro / "run")
        assert "read-only file system" in line and f"hwprof trace {ro / 'run'} --out" in line
        assert (ro / "run" / "trace.pftrace").read_bytes() == b"an earlier build"
        elsewhere = tmp_path / "elsewhere.pftrace"
        done = run_hwprof("trace", str(ro / "run"), "--out", str(elsewhere))
        assert done.returncode == 0, done.stdout
        assert elsewhere.stat().st_size > 1000


def test_trace_into_a_folder_that_refuses_writes_is_one_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same without a mount: EROFS injected where the trace's file and the old trace's rename are made."""
    import hwprof.rundir.writer as writer
    from hwprof.cli.main import main

    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    (run_dir / "trace.pftrace").write_bytes(b"an earlier build")

    @contextlib.contextmanager
    def refused(path: Path) -> Iterator[Path]:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        yield path  # pragma: no cover

    def no_rename(self: Path, target: Path) -> Path:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))

    monkeypatch.setattr(writer, "atomic_path", refused)
    monkeypatch.setattr(Path, "replace", no_rename)
    assert main(["trace", str(run_dir)]) == 2
    _one_not_writable_error(capsys.readouterr().err, run_dir)
    assert (run_dir / "trace.pftrace").read_bytes() == b"an earlier build"
