"""A process limit of address space (`ulimit -v`) below what a worker needs is refused before any pass, in one
line with the limit and the fix; a worker that still dies by a signal under a limit names it (issue 50)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.fault

ONE_GB_KIB = 1_000_000


def _limited(kib: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (kib * 1024, kib * 1024))


def test_an_address_space_limit_below_a_worker_is_refused_before_any_pass(tmp_path: Path) -> None:
    out = tmp_path / "run"
    options = ["--model", "yolov7-tiny", "--imgsz", "320", "--only", "timing,flops", "--iters", "3"]
    done = subprocess.run(
        [sys.executable, "-m", "hwprof", "collect", *options, "--out", str(out)],
        capture_output=True,
        text=True,
        preexec_fn=lambda: _limited(ONE_GB_KIB),
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "400", "HOME": str(tmp_path)},
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("hwprof: error: RLIMIT_AS (address space, `ulimit -v`) is 976.6 MiB, below what")
    assert "fix: ulimit -v unlimited" in lines[0]
    assert not out.exists(), "refused before the run directory was made"


def test_a_worker_killed_under_a_limit_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from hwprof.session import rlimits
    from hwprof.session.child import exit_reason

    monkeypatch.setattr(rlimits, "finite_limits", lambda: [rlimits.Limit("RLIMIT_AS", 2**30, 2**30)])
    line = exit_reason(-11, Path("/nonexistent/worker.log"))
    assert line.startswith("the worker was killed by signal 11 (SIGSEGV) (under RLIMIT_AS (address space")
    assert "is 1.0 GiB" in line
    monkeypatch.setattr(rlimits, "finite_limits", list)
    assert exit_reason(-11, Path("/nonexistent/worker.log")) == "the worker was killed by signal 11 (SIGSEGV)"


def test_no_limit_measures_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from hwprof.core.config import RunConfig
    from hwprof.session import rlimits

    monkeypatch.setattr(rlimits, "finite_limits", list)
    monkeypatch.setattr(rlimits.subprocess, "run", lambda *a, **k: pytest.fail("a probe ran without a limit"))
    rlimits.check_limits(RunConfig(model="yolov7-tiny"))
