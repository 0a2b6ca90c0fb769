"""The collect's trace built in a forked child beside the report (hwprof/trace/forked.py): the same bytes as
built in the collect's own process, nothing left behind when the collect is stopped mid-way, and every case where the
child did not build it handed back to the collect (which then builds it itself and says what went wrong)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from hwprof.core.procs import live
from hwprof.rundir.reader import RunData
from hwprof.trace.forked import TraceChild
from hwprof.trace.perfetto import build_trace

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_small"


def _run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    (run_dir / "trace.pftrace").unlink(missing_ok=True)
    return run_dir


def test_the_childs_trace_is_the_one_the_collect_would_have_built(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    with TraceChild(run_dir, RunData.load(run_dir)) as child:
        assert child.pid is not None and child.pid != os.getpid()
        built = child.result()
    assert built is not None and built.path == run_dir / "trace.pftrace"
    alone = build_trace(run_dir, tmp_path / "alone.pftrace")
    assert built.path.read_bytes() == alone.path.read_bytes()
    assert (built.size_bytes, built.perf_samples) == (alone.size_bytes, alone.perf_samples) and built.build_s > 0
    assert not [p.name for p in run_dir.rglob(".*.tmp")]


def test_a_stop_inside_the_report_kills_the_child_and_leaves_no_trace_nor_temporary(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    child = TraceChild(run_dir, RunData.load(run_dir))
    with pytest.raises(KeyboardInterrupt), child:
        pid = child.pid
        assert pid is not None
        time.sleep(0.05)  # the child is building
        raise KeyboardInterrupt
    assert child.pid is None and not live(pid)
    assert not (run_dir / "trace.pftrace").exists() and not [p.name for p in run_dir.rglob(".*.tmp")]


def test_a_trace_the_child_cannot_build_is_handed_back(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    data = RunData.load(run_dir)
    bad = next(run_dir.glob("passes/*/"))
    (bad / "bad.records.jsonl").write_text('{"kind": "span", "name": "x"}\n')  # build_trace raises RunDirError
    with TraceChild(run_dir, data) as child:
        assert child.pid is not None
        assert child.result() is None
    assert not (run_dir / "trace.pftrace").exists()


def test_no_fork_beside_another_thread(tmp_path: Path) -> None:
    """A fork copies a lock another thread holds, held for ever in the child: the collect builds the trace itself."""
    run_dir = _run(tmp_path)
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        with TraceChild(run_dir, RunData.load(run_dir)) as child:
            assert child.pid is None and child.result() is None
    finally:
        release.set()
        other.join()
    assert not (run_dir / "trace.pftrace").exists()
