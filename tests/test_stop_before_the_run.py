"""A collect stopped before its run began (a Ctrl-C in the instant between claiming its folder and writing
run.json: a sweep's point cancelled as it started) leaves no empty run directory; a folder the user made is
kept."""

from __future__ import annotations

from pathlib import Path

import pytest

import hwprof.api.collecting as collecting
from hwprof.cli.collect import collect_request
from hwprof.cli.main import parse_command


def _stopped_at_once(*_args: object) -> int:
    raise KeyboardInterrupt


def _request(out: Path):  # type: ignore[no-untyped-def]
    words = ["collect", "--model", "yolov8n", "--imgsz", "64", "--only", "timing", "--no-report", "--out", str(out)]
    return collect_request(parse_command(words))


def test_a_collect_stopped_before_its_run_leaves_no_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collecting, "_collect_into", _stopped_at_once)
    out = tmp_path / "point"
    with pytest.raises(KeyboardInterrupt):
        collecting.run_collect(_request(out), collecting.Console(quiet=True))
    assert not out.exists()


def test_an_empty_folder_the_user_made_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collecting, "_collect_into", _stopped_at_once)
    out = tmp_path / "mine"
    out.mkdir()
    with pytest.raises(KeyboardInterrupt):
        collecting.run_collect(_request(out), collecting.Console(quiet=True))
    assert out.is_dir() and not any(out.iterdir())
