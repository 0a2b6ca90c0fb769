"""The package is typed (PEP 561): it ships py.typed, and mypy checks a user's code against the API's declared
types. mypy sees hwprof as an installed package (a copy of it on PYTHONPATH, as pip lays it out, collectors
inside), so without py.typed it would skip it and pass anything; the wrong script shows it did not."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import hwprof.collectors
import pytest

import hwprof

ROOT = Path(__file__).resolve().parents[1]

RIGHT = """
from pathlib import Path

import polars as pl

import hwprof


def look(path: str | Path) -> pl.DataFrame:
    run: hwprof.Run = hwprof.load(path)
    fig = run.plot_roofline()
    if fig is not None:
        fig.savefig("roofline.png")
    reason: str | None = run.why("energy_j")
    peaks = run.peaks
    ridge: float = peaks.ridge if peaks is not None else 0.0
    for missing in run.unavailable:
        print(missing.collector, missing.reason, reason, ridge, run.model.gflops, run.config.imgsz)
    advice: pl.DataFrame | None = run.advice
    print(advice, run.layers.height)
    try:
        new = hwprof.collect(model="yolov8n", imgsz=160, iters=3)
    except hwprof.RunError as exc:
        print(exc)
        raise
    return hwprof.compare(run, new)
"""

WRONG = """
import hwprof

run = hwprof.load(3)
rows: int = run.layers
run.plot_roofline().savefig("roofline.png")
status: int = run.status
hwprof.collect(model="yolov8n", imgsz="160")
hwprof.collect(model="yolov8n", imgsize=160)
"""


def test_py_typed_is_shipped() -> None:
    assert (Path(hwprof.__file__).parent / "py.typed").is_file()
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "py.typed" in setuptools["package-data"]["hwprof"] and "hwprof.api" in setuptools["packages"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """hwprof as pip installs it (collectors under hwprof/), in a folder of its own."""
    site = tmp_path_factory.mktemp("site")
    skip = shutil.ignore_patterns("__pycache__", "collectors")
    shutil.copytree(Path(hwprof.__file__).parent, site / "hwprof", ignore=skip)
    collectors = Path(hwprof.collectors.__file__).parent
    shutil.copytree(collectors, site / "hwprof" / "collectors", ignore=shutil.ignore_patterns("__pycache__"))
    return site


def mypy(site: Path, folder: Path, source: str) -> subprocess.CompletedProcess[str]:
    script = folder / "user.py"
    script.write_text(source)
    config = folder / "mypy.ini"
    # the user's own settings, strict; not followed: the heavy libraries hwprof uses inside (untyped, or Ray's and
    # MLflow's 1,300 modules behind `hwprof sweep` and `--track`) and polars' optional backends (SQLAlchemy,
    # Hypothesis, pydantic), none of them in the API's signatures: 2,600 modules parsed -> 1,000, CPU 20 s -> 8 s
    skipped = "torch.*,ultralytics.*,cv2.*,scipy.*,perfetto.*,ray.*,mlflow.*,sqlalchemy.*,hypothesis.*,pydantic.*"
    config.write_text(f"[mypy]\nstrict = True\n[mypy-{skipped}]\nfollow_imports = skip\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    cmd = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(config),
        "--cache-dir",
        str(folder / "cache"),
        str(script),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=folder, timeout=900)


@pytest.mark.slow
def test_mypy_checks_a_users_calls(installed: Path, tmp_path: Path) -> None:
    right = mypy(installed, tmp_path, RIGHT)
    assert right.returncode == 0, right.stdout + right.stderr
    wrong = mypy(installed, tmp_path, WRONG)
    assert wrong.returncode == 1, wrong.stdout
    errors = re.findall(r"user\.py:(\d+): error: (.*)", wrong.stdout)
    assert [int(line) for line, _ in errors] == [4, 5, 6, 7, 8, 9], wrong.stdout
    assert 'incompatible type "int"' in errors[0][1] and '"DataFrame"' in errors[1][1]
    assert "None" in errors[2][1] and '"str"' in errors[3][1]
    # collect's keywords are a real signature: a value of the wrong type and a misspelt option are both seen
    assert 'Argument "imgsz" to "collect" has incompatible type "str"' in errors[4][1], errors[4]
    assert 'Unexpected keyword argument "imgsize"' in errors[5][1], errors[5]
