"""Shared fixtures. Tests import the installed hwprof (tox runs them from tests/ against the wheel)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


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


RAY_MODULES = frozenset(
    {
        "test_sweep_advice",
        "test_sweep_job",
        "test_sweep_ray",
        "test_sweep_ray_env",
        "test_sweep_ray_record",
        "test_sweep_ray_sigterm",
    }
)
"""Modules that start local Ray clusters: under pytest-xdist they run in one worker, one after another (two
clusters on one machine would share its ports and its Ray session folder)."""


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the groups into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `pytest -n N --dist loadgroup` (tox), a module's tests stay in one worker, so that its module-scoped
    fixture (one real collect shared by the tests that read it) runs once; the Ray modules share one group."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        module = item.module.__name__ if item.module is not None else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group("ray" if module in RAY_MODULES else module))
