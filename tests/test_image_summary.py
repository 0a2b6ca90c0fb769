"""A folder of many unreadable images: a bounded warning (the first few by name, then a count) and, when none is
readable, the one error; never a line per file (1,000 unreadable images printed 1,000 "skipping" lines: issue 38)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hwprof.workload.images import SHOWN_SKIPPED, ImageError, discover, skipped_lines

COLLECT = [sys.executable, "-m", "hwprof", "collect", "--model", "yolov8n", "--imgsz", "64", "--iters", "1"]


def _broken(folder: Path, n: int) -> Path:
    folder.mkdir(exist_ok=True)
    for i in range(n):
        (folder / f"broken{i:04d}.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    return folder


def test_none_readable_is_one_error_carrying_what_was_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = _broken(tmp_path / "imgs", 1000)
    with pytest.raises(ImageError) as caught:
        discover(str(folder))
    assert len(caught.value.skipped) == 1000 and "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"none of the 1,000 image files in {folder} could be read; fix: ")
    assert not caplog.records, "a log line per unreadable file"
    lines = skipped_lines(caught.value.skipped)
    assert len(lines) == SHOWN_SKIPPED + 1 and lines[-1] == "... and 997 more unreadable images"
    assert (
        lines[0] == f"skipping {folder / 'broken0000.jpg'}: not a decodable image (unreadable, corrupt, or an "
        "unsupported format)"
    )
    assert skipped_lines(caught.value.skipped[:2]) == lines[:2], "two are named, not counted"


def _collect(images: Path, out: Path) -> tuple[int, list[str]]:
    done = subprocess.run(
        [*COLLECT, "--images", str(images), "--only", "timing", "--out", str(out), "--no-report"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=300,
    )
    return done.returncode, [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]


def test_collect_on_1000_unreadable_images_prints_a_summary_then_the_error(tmp_path: Path) -> None:
    code, lines = _collect(_broken(tmp_path / "imgs", 1000), tmp_path / "run")
    assert code == 2 and len(lines) == SHOWN_SKIPPED + 2, lines[:8]
    assert lines[-2] == "warning: ... and 997 more unreadable images"
    assert lines[-1].startswith("hwprof: error: none of the 1,000 image files in ")


@pytest.mark.slow  # a real timing pass (40 s on a busy 2-core host)
def test_collect_with_some_readable_images_warns_in_a_few_lines(tmp_path: Path, bus_images: list[Path]) -> None:
    folder = _broken(tmp_path / "imgs", 1000)
    shutil.copy(bus_images[0], folder / "bus.jpg")
    code, lines = _collect(folder, tmp_path / "run")
    skipping = [line for line in lines if "skipping" in line or "more unreadable" in line]
    assert code == 0, lines[-5:]
    assert len(skipping) == SHOWN_SKIPPED + 1 and skipping[-1] == "warning: ... and 997 more unreadable images"
