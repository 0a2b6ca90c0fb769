"""Environment overrides that cannot be used are errors naming the variable, never silent fall-backs;
a relative XDG_CACHE_HOME is ignored, as the XDG Base Directory spec says (issue 24)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hwprof.core.config import RunConfig

pytestmark = pytest.mark.fault

COLLECT = [sys.executable, "-m", "hwprof", "collect", "--model", "yolov8n", "--imgsz", "64", "--iters", "2"]


def _fake_valgrind(path: Path, version: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho valgrind-{version}\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def cached_valgrind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A usable (fake, 3.24) valgrind where scripts/install_valgrind.sh unpacks one: what the override
    must not silently fall back to."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return _fake_valgrind(cache / "hwprof" / "valgrind" / "usr" / "bin" / "valgrind", "3.24.0")


def test_a_valgrind_override_that_is_not_valgrind_is_named_not_replaced(
    cached_valgrind: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hwprof.collectors.callgrind.collector import CallgrindCollector
    from hwprof.collectors.callgrind.tool import find_valgrind

    monkeypatch.setenv("HWPROF_VALGRIND", "/bin/false")
    found, why = find_valgrind()
    assert found is None, f"HWPROF_VALGRIND=/bin/false fell back to {found}"
    assert why.startswith("HWPROF_VALGRIND=/bin/false: ") and "--version" in why
    cap = CallgrindCollector.probe(RunConfig(counters="callgrind"))
    assert not cap.available and "HWPROF_VALGRIND=/bin/false" in cap.reason
    assert cap.fix.startswith("unset HWPROF_VALGRIND or point it at valgrind")
    mine = _fake_valgrind(cached_valgrind.parent.parent.parent.parent / "mine" / "valgrind", "3.25.1")
    monkeypatch.setenv("HWPROF_VALGRIND", str(mine))
    found, _ = find_valgrind()
    assert found is not None and found.binary == str(mine) and found.version == (3, 25), "a good override is used"


def _collect_with(variable: str, value: str, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """`hwprof collect ARGS` with one environment variable set; its non-blank lines on stderr."""
    env = {**os.environ, variable: value}
    done = subprocess.run([*COLLECT, *args], capture_output=True, text=True, env=env, timeout=300)
    return done, [line for line in done.stderr.splitlines() if line.strip()]


def test_collect_asking_for_callgrind_with_a_bad_override_exits_2_naming_it(cached_valgrind: Path) -> None:
    done, lines = _collect_with(
        "HWPROF_VALGRIND",
        "/bin/false",
        "--counters",
        "callgrind",
        "--only",
        "callgrind",
        "--out",
        str(cached_valgrind.parent / "run"),
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(lines) == 1 and lines[0].startswith("hwprof: error: --counters callgrind: unavailable: ")
    assert "HWPROF_VALGRIND=/bin/false" in lines[0] and "unset HWPROF_VALGRIND" in lines[0]


def test_a_powercap_root_that_is_a_file_is_an_error_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hwprof.collectors.rapl.collector import RaplCollector

    from hwprof.core.envvars import EnvVarError, check_environment

    file = tmp_path / "powercap"
    file.write_text("")
    monkeypatch.setenv("HWPROF_POWERCAP_ROOT", str(file))
    with pytest.raises(EnvVarError, match=f"HWPROF_POWERCAP_ROOT={file} is a file, not a powercap directory"):
        check_environment()
    cap = RaplCollector.probe(RunConfig())
    assert not cap.available and f"HWPROF_POWERCAP_ROOT={file} is a file" in cap.reason
    assert "perf" not in cap.reason, "an unusable override must not fall back to perf's power PMU"
    monkeypatch.setenv("HWPROF_POWERCAP_ROOT", str(tmp_path / "missing"))
    with pytest.raises(EnvVarError, match="does not exist, not a powercap directory"):
        check_environment()
    monkeypatch.setenv("HWPROF_POWERCAP_ROOT", str(tmp_path))  # a directory (empty): the probe's business
    check_environment()


def test_collect_with_a_powercap_root_that_is_a_file_exits_2(tmp_path: Path) -> None:
    file = tmp_path / "powercap"
    file.write_text("")
    run = str(tmp_path / "run")
    done, lines = _collect_with("HWPROF_POWERCAP_ROOT", str(file), "--only", "timing,rapl", "--out", run)
    assert done.returncode == 2, done.stdout + done.stderr
    assert lines == [
        f"hwprof: error: HWPROF_POWERCAP_ROOT={file} is a file, not a powercap directory; fix: unset "
        "HWPROF_POWERCAP_ROOT or point it at a powercap directory (/sys/class/powercap)"
    ], lines
    assert not (tmp_path / "run").exists(), "refused before the run directory was made"


@pytest.mark.parametrize("value", ["relcache", "./rel", ""])
def test_a_relative_xdg_cache_home_is_ignored(value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hwprof.collectors.callgrind import tool

    from hwprof.core.envvars import hwprof_cache
    from hwprof.hardware import gpu_peaks, machine

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", value)
    monkeypatch.chdir(tmp_path)
    home_cache = tmp_path / "home" / ".cache" / "hwprof"
    assert hwprof_cache() == home_cache
    assert machine.cache_dir() == home_cache
    assert gpu_peaks.cache_path("k").parent == home_cache
    assert tool.cache_dir() == home_cache / "valgrind"
    assert str(home_cache / "valgrind") in tool.candidates()[0]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # an absolute one is used
    assert machine.cache_dir() == tool.cache_dir().parent == tmp_path / "xdg" / "hwprof"


def _seed_torch_profiler_probe(cache: Path) -> None:
    """The torch.profiler probe this environment already ran and kept, seeded into doctor's fresh cache `cache`:
    read there, not run again in a child (3 s of CPU). A cache path read unnormalised (or relative) still shows:
    the seeded file is missed there, the probe runs, and its result is written along that path."""
    from hwprof.core.host import cpuinfo_text, hwprof_cache_or_none
    from hwprof.core.torch_build import _key

    mine, key = hwprof_cache_or_none(), _key(cpuinfo_text())
    kept = mine / f"torch-profiler-probe-{key}.json" if mine is not None and key is not None else None
    if kept is not None and kept.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        shutil.copy(kept, cache / kept.name)


@pytest.mark.slow  # measures this host's peaks (seconds), unless cached
def test_doctor_peaks_with_a_relative_xdg_cache_home_writes_nothing_in_the_working_directory(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    _seed_torch_profiler_probe(tmp_path / "home" / ".cache" / "hwprof")
    env = {**os.environ, "XDG_CACHE_HOME": "relcache", "HOME": str(tmp_path / "home"), "COLUMNS": "300"}
    done = subprocess.run(
        [sys.executable, "-m", "hwprof", "doctor", "--peaks"], cwd=work, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(work.iterdir()) == [], "a relative XDG_CACHE_HOME made a cache folder in the working directory"
    assert f"cache: {tmp_path / 'home' / '.cache' / 'hwprof'} (XDG_CACHE_HOME=relcache ignored" in done.stdout
    # the peaks are cached there, unless this host was busy while they were measured (never cached then)
    cached = list((tmp_path / "home" / ".cache" / "hwprof").glob("peaks-*.json"))
    assert cached or "busy" in done.stdout, done.stdout


def test_an_xdg_cache_home_through_a_missing_folder_makes_no_folder(tmp_path: Path) -> None:
    """`missing/../..` is normalised before anything is made: no folder appears along the `..` (the raw path,
    made with mkdir -p by hwprof or a library that reads the variable, made `missing`), and doctor says where the
    cache is and how the variable was read."""
    value = f"{tmp_path}/missing/../cache"
    _seed_torch_profiler_probe(tmp_path / "cache" / "hwprof")
    env = {**os.environ, "XDG_CACHE_HOME": value, "COLUMNS": "300"}
    done = subprocess.run([sys.executable, "-m", "hwprof", "doctor"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (tmp_path / "missing").exists()
    assert f"cache: {tmp_path}/cache/hwprof (XDG_CACHE_HOME={value} read as {tmp_path}/cache)" in done.stdout


@pytest.mark.parametrize("command", [["doctor"], ["report", "no-such-run"], ["models"]])
def test_an_xdg_cache_home_too_long_for_a_path_is_one_line(command: list[str]) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": "/" + "a" * 100_000}
    done = subprocess.run([sys.executable, "-m", "hwprof", *command], capture_output=True, text=True, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("hwprof: error: XDG_CACHE_HOME=/aaa"), lines
    assert "is too long for a path; fix: unset XDG_CACHE_HOME" in lines[0]


def test_the_run_records_where_its_peaks_are_cached_and_the_report_says_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hwprof.hardware import machine
    from hwprof.session.run_doc import peaks_doc

    monkeypatch.setenv("XDG_CACHE_HOME", f"{tmp_path}/missing/../cache")

    def no_probe(threads: int) -> None:
        raise RuntimeError("not measured in this test")

    monkeypatch.setattr(machine, "measure_peaks", no_probe)
    doc = peaks_doc(2, "run.json")
    assert doc.status == "unavailable"
    assert doc.cache_file is not None and doc.cache_file.startswith(f"{tmp_path}/cache/hwprof/peaks-")
    assert doc.cache_file.endswith(f"(XDG_CACHE_HOME={tmp_path}/missing/../cache read as {tmp_path}/cache)")
    assert not (tmp_path / "missing").exists()


def test_a_relative_xdg_cache_home_is_ignored_with_a_warning(tmp_path: Path) -> None:
    from hwprof.workload.catalog import cache_path

    env = {**os.environ, "XDG_CACHE_HOME": "relcache", "HOME": str(tmp_path)}
    mine = cache_path(640)  # the catalogue this environment built, seeded into HOME's cache: read, not rebuilt
    if mine.is_file():
        seeded = tmp_path / ".cache" / "hwprof" / mine.name
        seeded.parent.mkdir(parents=True)
        shutil.copy(mine, seeded)
    done = subprocess.run(
        [sys.executable, "-m", "hwprof", "models"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "relcache").exists(), "nothing under the relative path"
    assert done.stderr.splitlines()[0] == (
        "warning: XDG_CACHE_HOME=relcache ignored: the XDG Base Directory spec says a relative path is invalid"
    )
