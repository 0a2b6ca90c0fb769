"""A process limit of address space (`ulimit -v`) below what a worker needs is refused before any pass, in one
line with the limit and the fix; a worker that still dies by a signal under a limit names it (issue 50). The same
for the processes and threads of one user (`ulimit -u`), and a thread that still cannot start ends the collect
failed with the limit named, never complete with no pass nor blamed on a signal nobody sent (issue 56)."""

from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


# RLIMIT_NPROC (`ulimit -u`, issue 56): the kernel counts every process and thread of the real uid and holds no
# process of uid 0 (nor one with CAP_SYS_ADMIN or CAP_SYS_RESOURCE) to it. Run as root, these tests give the
# collect a real uid of its own with no other process (its files are still reached as root's: /root, which holds
# the interpreter here, is 0700) and take those two capabilities away; run as another user, they run under that
# user's own uid, with the limit set above what it runs already.

NO_PRECHECK = """
import sys
import hwprof.session.rlimits as rlimits
rlimits._check_tasks = lambda config: None  # what happens when a thread still cannot start during the collect
from hwprof.cli.entry import main
sys.argv[0] = "hwprof"
sys.exit(main())
"""
TIMING = ["--model", "yolov7-tiny", "--imgsz", "64", "--iters", "3", "--warmup", "1", "--only", "timing"]
HERMETIC = {"PATH": "/usr/bin:/bin", "COLUMNS": "400"}
"""The environment of the collects under a task limit, with HOME (and so hwprof's cache) a folder of the test's."""
SEED = """
import os, sys
from hwprof.core.config import RunConfig
from hwprof.core.envvars import hwprof_cache
from hwprof.core.host import cpu_model, cpuinfo_text
from hwprof.core.torch_build import torch_build, torch_version
from hwprof.hardware import machine

torch_build(hwprof_cache(), cpuinfo_text())
threads = RunConfig().threads
stand_in = "a stand-in written by tests/test_rlimits.py: the collect under the limit measures no peaks"
machine.save_cached(machine.Peaks(
    gflops=100.0, gbps=10.0, threads=threads, host_key=machine.host_key(threads), cpu_model=cpu_model(),
    logical_cpus=os.cpu_count() or 0, torch_version=torch_version() or "", measured_at="2026-01-01T00:00:00+00:00",
    load_avg_1m=0.0, gflops_method=stand_in, gbps_method=stand_in, quiet_gflops=[100.0],
))
"""
"""hwprof's cache as a user's is once collect has run on this host (`hwprof doctor --peaks` on a quiet host): this
torch build's record and the peaks, so that collect's own process imports no torch. In a folder of its own each
collect read the build from torch and measured the peaks in its own process (8 s of CPU each), whose threads
(torch's OpenMP pool) then counted under the limit too: the rooms below were 2 higher."""


@pytest.fixture(scope="module")
def seeded_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cache folder (HOME/.cache/hwprof) written once, in the environment the collects run in."""
    home = tmp_path_factory.mktemp("seed")
    subprocess.run([sys.executable, "-c", SEED], env={**HERMETIC, "HOME": str(home)}, check=True, timeout=300)
    return home / ".cache" / "hwprof"


def _free_uid() -> int:
    """A uid no process runs as (the limit then counts the collect's own processes and threads only), drawn at random:
    the first free one was the same for every suite run at once on one host, and two collects under one uid's
    limit count each other's threads."""
    import random

    import psutil

    used = {p.info["uids"].real for p in psutil.process_iter(["uids"]) if p.info["uids"] is not None}
    return random.choice([uid for uid in range(61000, 62000) if uid not in used])


def _task_limited(uid: int, limit: int) -> Callable[[], None]:
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
        if os.getuid() == 0:
            libc = ctypes.CDLL(None, use_errno=True)
            for cap in (21, 24):  # CAP_SYS_ADMIN, CAP_SYS_RESOURCE: out of the bounding set, so exec keeps neither
                if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                    raise OSError(ctypes.get_errno(), "PR_CAPBSET_DROP")
            os.setresuid(uid, 0, 0)

    return preexec


def _under_task_limit(
    room: int, args: list[str], home: Path, cache: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`args` run under RLIMIT_NPROC = what the uid runs now + room, with HOME `home` (its hwprof cache a copy of
    `cache`, if given); skipped where the limit cannot be enforced."""
    uid = _free_uid() if os.getuid() == 0 else os.getuid()
    check = "import threading\nfor _ in range(8): threading.Thread(target=threading.Event().wait, daemon=True).start()"
    try:
        probe = subprocess.run(
            [sys.executable, "-c", check], capture_output=True, text=True, preexec_fn=_task_limited(uid, 3)
        )
    except subprocess.SubprocessError as exc:
        pytest.skip(f"RLIMIT_NPROC cannot be set up for uid {uid} here: {exc}")
    if "can't start new thread" not in probe.stderr:
        pytest.skip(f"RLIMIT_NPROC is not enforced on uid {uid} here (CAP_SYS_RESOURCE or CAP_SYS_ADMIN kept)")
    if cache is not None:
        shutil.copytree(cache, home / ".cache" / "hwprof")
    limit = room
    if uid == os.getuid():  # a user's own uid: beside what it runs already
        from hwprof.session.rlimits import user_tasks

        limit += user_tasks(uid)
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        preexec_fn=_task_limited(uid, limit),
        env={**HERMETIC, "HOME": str(home)},
        timeout=300,
    )


def _run_json(out: Path) -> dict[str, Any]:
    return json.loads((out / "run.json").read_text())


def test_a_task_limit_below_a_collect_is_refused_before_any_pass(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = _under_task_limit(8, ["-m", "hwprof", "collect", *TIMING, "--out", str(out)], tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert re.match(r"hwprof: error: RLIMIT_NPROC \(`ulimit -u`: the processes and threads of uid \d+\) is \d+, "
                    r"below what this collect needs: \d+ processes and threads", lines[0]), lines[0]  # fmt: skip
    assert re.search(r"fix: ulimit -u \d+ or more, or run as a user whose limit is higher$", lines[0]), lines[0]
    assert not out.exists(), "refused before the run directory was made"


@pytest.mark.parametrize(
    ("room", "cause"),
    [
        (4, "collect could not start a thread to follow pass timing (can't start new thread)"),  # collect's own
        (6, "pass timing's worker could not start a thread ("),  # torch's OpenMP pool (libgomp)
        (8, "pass timing's worker could not start a thread ("),  # numpy's OpenBLAS, which raises SIGINT on itself
    ],
)
def test_a_collect_that_cannot_start_a_thread_fails_naming_the_limit(
    tmp_path: Path, seeded_cache: Path, room: int, cause: str
) -> None:
    """Before the fix: the first printed a traceback and left run.json complete with no pass; the third said "pass
    timing interrupted: stopped by SIGINT mid-iteration" though no signal was sent (rooms 6 and 10 then, with no
    cache: collect measured the peaks, torch's OpenMP pool in its own process)."""
    out = tmp_path / "run"
    args = ["-c", NO_PRECHECK, "collect", *TIMING, "--no-report", "--out", str(out)]
    done = _under_task_limit(room, args, tmp_path, seeded_cache)
    text = done.stdout + done.stderr
    assert done.returncode == 2, text
    assert "Traceback" not in text and "SIGINT" not in text, text
    errors = [line for line in text.splitlines() if line.startswith("hwprof: error:")]
    assert len(errors) == 1, text
    assert re.match(r"hwprof: error: RLIMIT_NPROC \(`ulimit -u`: the processes and threads of uid \d+\) is \d+: ",
                    errors[0]), errors[0]  # fmt: skip
    assert cause in errors[0] and "fix: ulimit -u " in errors[0] and errors[0].endswith(f"(partial results in {out})")
    run = _run_json(out)
    assert run["status"] == "failed" and "RLIMIT_NPROC" in run["error"]
    assert run["passes"]["timing"]["status"] == "failed" and run["passes"]["timing"]["error"] == run["error"]
    assert run["collectors"]["timing"]["status"] == "failed" and "SIGINT" not in json.dumps(run)
    assert run["passes"]["timing"]["worker_start"] == "started"  # no zygote under a task limit this tight


def test_a_collect_cut_by_its_own_error_is_never_complete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error of collect's own process after its first run.json: the run ended "complete" with `passes: {}`."""
    from hwprof.core.config import RunConfig
    from hwprof.session import collection
    from hwprof.session.plan import PassPlan, Plan
    from hwprof.workload.images import ImageSet

    def fails(_plan: PassPlan) -> None:
        raise RuntimeError("boom")

    session = collection.Session(RunConfig(), tmp_path, ImageSet([]))
    monkeypatch.setattr(collection, "peaks_doc", lambda *_: None)
    monkeypatch.setattr(session, "run_pass", fails)
    with pytest.raises(RuntimeError, match="boom"):
        session.collect(Plan([PassPlan("timing", [])]), ["hwprof", "collect"])
    run = _run_json(tmp_path)
    assert run["status"] == "failed" and run["error"] == "RuntimeError: boom" and run["passes"] == {}


@pytest.mark.parametrize(
    "line",
    [
        "OpenBLAS blas_thread_init: pthread_create failed for thread 1 of 2: Resource temporarily unavailable",
        "OpenBLAS blas_thread_init: pthread_create: Resource temporarily unavailable",  # its other path (a fresh clone)
        "libgomp: Thread creation failed: Resource temporarily unavailable",
        "RuntimeError: can't start new thread",
    ],
)
def test_each_way_a_thread_start_fails_is_read_from_the_worker_log(tmp_path: Path, line: str) -> None:
    from hwprof.session.rlimits import thread_failure

    log = tmp_path / "worker.log"
    log.write_text(f"building the model\n{line}\nOpenBLAS blas_thread_init: RLIMIT_NPROC 8 current, 8 max\n")
    assert thread_failure(log) == line
    log.write_text("building the model\nstopped by SIGINT mid-iteration\n")
    assert thread_failure(log) == ""
