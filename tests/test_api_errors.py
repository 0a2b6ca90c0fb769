"""Bad input through the library: one exception type per kind, carrying the line the command line prints.

hwprof.load, hwprof.advise: a missing folder, a damaged run.json, a run a collect still holds -> hwprof.RunError.
hwprof.collect: a bad option -> ValueError. Each message is compared with what `hwprof report`, `hwprof advise` or
`hwprof collect` print for the same input (the command line's main, run here: its own code path)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import hwprof
from hwprof.cli.main import main
from hwprof.rundir.lock import RunDirLock
from hwprof.rundir.reader import NOT_FINISHED

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_report"
PREFIX = "hwprof: error: "


def cli_error(capsys: pytest.CaptureFixture[str], *words: str) -> str:
    """The one error line the command prints (exit 2), without its prefix."""
    assert main(list(words)) == 2
    out = capsys.readouterr().err.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(PREFIX), out
    return out[0].removeprefix(PREFIX)


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # the command's console: one message, one line


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(FIXTURE, out)
    return out


def test_missing_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None) -> None:
    gone = tmp_path / "nothing-here"
    with pytest.raises(hwprof.RunError) as raised:
        hwprof.load(gone)
    assert str(raised.value) == cli_error(capsys, "report", str(gone)) == f"{gone} is not a run directory (no run.json)"
    with pytest.raises(hwprof.RunError) as advised:
        hwprof.advise(gone)
    assert str(advised.value) == cli_error(capsys, "advise", str(gone))


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [("status", 7, "status"), ("config", {"imgsz": -64}, "imgsz"), ("schema_version", 9, "schema_version")],
)
def test_damaged_run_json(
    copy: Path, capsys: pytest.CaptureFixture[str], wide: None, field: str, value: object, words: str
) -> None:
    doc = json.loads((copy / "run.json").read_text())
    doc[field] = value if not isinstance(value, dict) else {**doc[field], **value}
    (copy / "run.json").write_text(json.dumps(doc))
    with pytest.raises(hwprof.RunError) as raised:
        hwprof.load(copy)
    line = str(raised.value)
    assert "\n" not in line and words in line and "run.json" in line
    assert line == cli_error(capsys, "report", str(copy))


def test_not_json(copy: Path, capsys: pytest.CaptureFixture[str], wide: None) -> None:
    (copy / "run.json").write_text('{"schema_version": 1, "status": ')
    with pytest.raises(hwprof.RunError) as raised:
        hwprof.load(copy)
    assert str(raised.value) == cli_error(capsys, "report", str(copy))


def test_a_run_still_being_collected(copy: Path, capsys: pytest.CaptureFixture[str], wide: None) -> None:
    """A collect holds the run's lock: load refuses with the warning `hwprof report` shows above such a run's
    figures, and advise with the line `hwprof advise` prints; once no collect holds it (the collect died), the
    run loads and says it was not finished."""
    doc = json.loads((copy / "run.json").read_text())
    (copy / "run.json").write_text(json.dumps({**doc, "status": "running"}))
    with RunDirLock(copy):
        with pytest.raises(hwprof.RunError) as raised:
            hwprof.load(copy)
        line = str(raised.value)
        assert line.startswith("this run is still being collected (pid ") and line.endswith("its figures are not final")
        assert main(["report", str(copy), "--top", "3"]) == 0
        printed = " ".join(capsys.readouterr().out.split())
        assert f"warning {line}" in printed
        with pytest.raises(hwprof.RunError) as advised:
            hwprof.advise(copy)
        assert "is in use by another hwprof collect" in str(advised.value)
        assert str(advised.value) == cli_error(capsys, "advise", str(copy))
    run = hwprof.load(copy)
    assert run.status == NOT_FINISHED and any("killed or crashed" in w for w in run.warnings)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"model": "yolov99"}, ["--model", "yolov99"]),
        ({"model": "yolov8n", "imgsz": 100}, ["--model", "yolov8n", "--imgsz", "100"]),
        ({"model": "yolov8n", "iters": 0}, ["--model", "yolov8n", "--iters", "0"]),
        ({"model": "yolov8n", "only": ["timing", "nosuchcollector"]}, ["--only", "timing,nosuchcollector"]),
        ({"model": "yolov8n", "stage": ["nms=utils:nms"]}, ["--stage", "nms=utils:nms"]),
        ({"program": ["python", "x.py"], "imgsz": 320}, ["--imgsz", "320", "--", "python", "x.py"]),
    ],
)
def test_collect_with_a_bad_value_says_the_command_lines_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    wide: None,
    options: dict[str, Any],
    words: list[str],
) -> None:
    """The library and the command line make the same typed request (hwprof.api.requests) and check it in the
    same code: ValueError with the command line's line, and nothing collected (no run directory made)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("print(1)\n")
    with pytest.raises(ValueError) as raised:
        hwprof.collect(**options)
    assert str(raised.value) == cli_error(capsys, "collect", *words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.py"]


@pytest.mark.parametrize(
    ("options", "line"),
    [
        ({"model": "yolov8n", "imgsz": "big"}, "--imgsz must be an integer (got 'big')"),
        ({"model": "yolov8n", "channels_last": "yes"}, "--channels-last must be True or False (got 'yes')"),
        ({"model": "yolov8n", "timeout": "never"}, "--timeout must be a number (got 'never')"),
        ({"model": "yolov8n", "runtime": "tensorrt"}, "tensorrt"),
        ({"model": "yolov8n", "only": [1]}, "only is a list of strings (got [1])"),
        ({"model": "yolov8n", "advise": True, "advise_blocks": 0}, "--blocks must be at least 1 (got 0)"),
    ],
)
def test_collect_with_a_value_the_command_line_cannot_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any], line: str
) -> None:
    """Values argparse would have refused by their type or choice reach the library as they are: the typed
    request refuses each in one line naming the option, before anything is made."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as raised:
        hwprof.collect(**options)
    assert line in str(raised.value) and "\n" not in str(raised.value), str(raised.value)
    assert list(tmp_path.iterdir()) == []


def test_a_keyword_collect_does_not_have_is_a_type_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """collect's signature is real (mypy and a notebook's completion read it): an unknown keyword is Python's
    TypeError, and the command line's `--bogus` its own usage error."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError, match="bogus"):
        hwprof.collect(model="yolov8n", bogus=1)  # type: ignore[call-arg]
    with pytest.raises(SystemExit) as exited:
        main(["collect", "--bogus", "1"])
    assert exited.value.code == 2 and list(tmp_path.iterdir()) == []


def test_collect_into_an_out_in_use(tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None) -> None:
    out = tmp_path / "busy"
    out.mkdir()
    with RunDirLock(out):
        with pytest.raises(ValueError) as raised:
            hwprof.collect(model="yolov8n", out=out, only=["timing"])
        assert "is in use by another hwprof collect" in str(raised.value)
        assert str(raised.value) == cli_error(
            capsys, "collect", "--model", "yolov8n", "--out", str(out), "--only", "timing"
        )


STOPPED = """
import sys, hwprof
try:
    hwprof.collect(model="yolov8n", imgsz=128, iters=400, warmup=1, only=["timing"], out=sys.argv[1])
except KeyboardInterrupt as exc:
    print("KeyboardInterrupt:", exc)
    print("status:", hwprof.load(sys.argv[1]).status)
"""


@pytest.mark.slow
def test_ctrl_c_stops_a_collect_as_on_the_command_line(tmp_path: Path) -> None:
    """SIGINT mid-pass (a notebook's interrupt): the pass stops at the end of its iteration, run.json is final
    with what ran, and the library raises KeyboardInterrupt naming the run directory that keeps it."""
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-P", "-c", STOPPED, str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    markers = out / "passes" / "timing" / "markers.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (markers.exists() and markers.stat().st_size > 2000):
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    printed, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, printed
    lines = [line for line in printed.splitlines() if line.startswith(("KeyboardInterrupt:", "status:"))]
    assert lines == [
        f"KeyboardInterrupt: stopped by SIGINT: what ran is kept in {out}, hwprof.load({str(out)!r}) reads it",
        "status: interrupted",
    ], printed
