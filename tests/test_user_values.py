"""A user's value in a message is escaped and cut, and every HWPROF_* override is checked once, before anything
runs: a value too long for a path, one with a newline, or one that is not the directory or file it must be is
one short line naming the variable, exit 2, nothing collected (issue 38)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hwprof.core.envvars import EVERY, EnvVarError, PathVariable, check_environment
from hwprof.core.uservalue import os_error_line, path_kind, shown

LONG = "/x" + "a" * 4998
"""5,000 characters: ENAMETOOLONG for any path call."""
COLLECT = [sys.executable, "-m", "hwprof", "collect", "--model", "yolov8n", "--imgsz", "64", "--iters", "2"]


def test_shown_escapes_newlines_and_cuts_long_values() -> None:
    assert shown("/data/run") == "/data/run"
    assert shown("a\nb\x00c\td") == "a\\nb\\x00c\\td"
    cut = shown(LONG)
    assert len(cut) < 100 and cut.startswith("/xaaa") and cut.endswith("(5,000 characters)")
    real = "/home/someone/" + "deep/" * 30 + "w.pt"  # a long but real path is quoted whole
    assert shown(real) == real


def test_an_os_error_line_cuts_the_file_name() -> None:
    exc = OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), LONG)
    line = os_error_line(exc)
    assert len(line) < 120 and line.startswith("[Errno 36] File name too long: /xaaa") and "5,000 characters" in line


def test_path_kind_names_what_a_path_is(tmp_path: Path) -> None:
    assert path_kind(tmp_path) == "a directory"
    assert path_kind("/dev/zero") == "a character device"
    assert path_kind(tmp_path / "missing") == "not found"
    assert path_kind(LONG) == "too long for a path"


def _problems(monkeypatch: pytest.MonkeyPatch, variable: PathVariable, value: str) -> str:
    for other in EVERY:
        monkeypatch.delenv(other.name, raising=False)
    monkeypatch.setenv(variable.name, value)
    with pytest.raises(EnvVarError) as caught:
        check_environment()
    return str(caught.value)


@pytest.mark.parametrize("variable", EVERY, ids=[v.name for v in EVERY])
def test_every_override_that_is_too_long_or_has_a_newline_is_one_short_line(
    variable: PathVariable, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _problems(monkeypatch, variable, LONG)
    assert line.startswith(f"{variable.name}=/xaaa") and "(5,000 characters) is too long for a path" in line
    assert f"fix: unset {variable.name} or point it at " in line and len(line) < 300, line
    line = _problems(monkeypatch, variable, "/tmp\n/evil")
    assert "\n" not in line and f"{variable.name}=/tmp\\n/evil holds a newline" in line


@pytest.mark.parametrize("variable", EVERY, ids=[v.name for v in EVERY])
def test_every_override_must_be_the_kind_of_path_it_names(
    variable: PathVariable, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    wrong = "/dev/null" if variable.directory else str(tmp_path)
    line = _problems(monkeypatch, variable, wrong)
    assert line.startswith(f"{variable.name}={wrong} is a {'character device' if variable.directory else 'directory'}")
    assert line.endswith(variable.fix)
    line = _problems(monkeypatch, variable, str(tmp_path / "missing"))
    assert f"{tmp_path / 'missing'} does not exist, not {variable.what}; fix: unset {variable.name}" in line


def test_a_good_or_empty_override_passes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for variable in EVERY:
        monkeypatch.delenv(variable.name, raising=False)
    node = tmp_path / "node"
    node.write_text("#!/bin/sh\n")
    node.chmod(0o755)
    monkeypatch.setenv("HWPROF_POWERCAP_ROOT", str(tmp_path))
    monkeypatch.setenv("HWPROF_NODE", str(node))
    monkeypatch.setenv("HWPROF_VALGRIND", "")
    check_environment()
    node.chmod(0o644)
    with pytest.raises(EnvVarError, match=r"is a file without execute permission, not Node\.js 18"):
        check_environment()


@pytest.mark.parametrize("name", ["HWPROF_POWERCAP_ROOT", "HWPROF_VALGRIND", "HWPROF_EVENT_SOURCE_ROOT"])
def test_collect_refuses_a_5000_character_override_before_anything_runs(name: str, tmp_path: Path) -> None:
    """HWPROF_EVENT_SOURCE_ROOT used to run the whole collect, then exit 1 with run.json `complete`; the other
    two printed a 5,049-character [Errno 36] that did not name the variable."""
    run = tmp_path / "run"
    env = {**os.environ, name: LONG}
    done = subprocess.run(
        [*COLLECT, "--only", "timing,rapl", "--out", str(run)], capture_output=True, text=True, env=env, timeout=300
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(lines) == 1 and lines[0].startswith(f"hwprof: error: {name}=/xaaa"), lines
    assert "is too long for a path" in lines[0] and f"fix: unset {name}" in lines[0] and len(lines[0]) < 400
    assert not run.exists(), "refused before the run directory was made"


def test_doctor_refuses_an_override_with_a_newline(tmp_path: Path) -> None:
    env = {**os.environ, "HWPROF_POWERCAP_ROOT": f"{tmp_path}\n{tmp_path}"}
    done = subprocess.run(
        [sys.executable, "-m", "hwprof", "doctor"], capture_output=True, text=True, env=env, timeout=300
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stdout + done.stderr
    assert lines[0].startswith(f"hwprof: error: HWPROF_POWERCAP_ROOT={tmp_path}\\n{tmp_path} holds a newline")


@pytest.mark.parametrize(
    "args",
    [
        ["collect", "--model", LONG],
        ["collect", "--only", LONG],
        ["collect", "--images", "/tmp/no\nsuch folder"],
        ["collect", "--images", LONG],
        ["collect", "--only", "timing", "--out", LONG + "/run"],
        ["report", LONG],
        ["sweep", "--models", "yolov8n", "--runtimes", LONG],
    ],
    ids=["model", "only", "images-newline", "images-long", "out-long", "report-long", "runtime-long"],
)
def test_a_bad_value_is_quoted_on_one_short_line(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hwprof", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "1000"},
    )
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, lines
    assert lines[0].startswith("hwprof: error: ") and len(lines[0]) < 400, lines[0][:500]
