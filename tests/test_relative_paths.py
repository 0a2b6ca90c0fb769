"""--weights and --images given relative to where hwprof runs: the passes run inside the run directory."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hwprof.core.config import RunConfig


def test_resolve_paths_makes_user_paths_absolute(tmp_path: Path) -> None:
    config = RunConfig(weights="w/y.pt", images="imgs")
    config.resolve_paths(tmp_path)
    assert config.weights == str(tmp_path / "w" / "y.pt")
    assert config.images == str(tmp_path / "imgs")
    absolute = RunConfig(weights="/abs/y.pt")
    absolute.resolve_paths(tmp_path)
    assert absolute.weights == "/abs/y.pt"


@pytest.mark.parametrize("option", ["weights", "images", "annotate"])
def test_a_symlink_loop_is_one_line_naming_the_option(tmp_path: Path, option: str) -> None:
    """A link that leads back to itself: pathlib's RuntimeError ("Symlink loop") was a traceback (issue 67)."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    config = RunConfig(**{option: "a"})
    with pytest.raises(ValueError, match=rf"^--{option} a is a symbolic link that leads back to itself \(a loop\)"):
        config.resolve_paths(tmp_path)
    done = subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", "collect", "--model", "yolov8n", f"--{option}", "a", "--out", "run"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"hwprof: error: --{option} a is a"), lines
    assert not (tmp_path / "run").exists(), "refused before the run directory was made"


@pytest.mark.parametrize(
    "words",
    [  # a collect checks its folder before it probes its collectors (2.5 s of CPU for all of them)
        ["collect", "--model", "yolov8n", "--out", "loop"],
        ["collect", "--model", "yolov8n", "--only", "timing", "--out", "loop/run"],
        ["collect", "--model", "yolov8n", "--only", "timing", "--results", "loop"],
        ["sweep", "--models", "yolov8n", "--out", "loop"],
        ["collect", "--config", "loop.toml"],
    ],
)
def test_a_symlink_loop_as_a_folder_or_a_config_is_one_line_naming_the_option(tmp_path: Path, words: list[str]) -> None:
    """Issue 67: a loop as --out said "[Errno 17] File exists: loop" (pathlib's exists() is False for a loop, then
    mkdir finds the name taken); the same for --results and a sweep's --out."""
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "loop.toml").symlink_to(tmp_path / "loop.toml")
    done = subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", *words], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, lines
    option = next(w for w in words if w.startswith("--") and w not in ("--model", "--models", "--only"))
    assert lines[0].startswith(f"hwprof: error: {option} " if option != "--config" else "hwprof: error: loop.toml")
    assert "symbolic link" in lines[0] or "Too many levels of symbolic links" in lines[0], lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop", "loop.toml"]


def test_a_folder_is_checked_before_anything_is_made(tmp_path: Path) -> None:
    """check_folder: make_folder's refusals in its words, with nothing made (a collect says them before it
    probes its collectors)."""
    from hwprof.core.folders import LOOP, check_folder, make_folder

    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "nowhere").symlink_to(tmp_path / "gone" / "deeper")
    (tmp_path / "file").write_text("x")
    before = sorted(p.name for p in tmp_path.iterdir())
    for name in ("loop", "loop/run", "nowhere", "nowhere/run", "file", "file/run"):
        with pytest.raises(ValueError) as checked:
            check_folder(tmp_path / name, "--out")
        with pytest.raises(ValueError) as made:
            make_folder(tmp_path / name, "--out")
        assert str(checked.value) == str(made.value) or LOOP in str(checked.value), (name, checked, made)
        assert str(checked.value).startswith(f"--out {tmp_path / name}"), checked
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "nothing made"
    check_folder(tmp_path / "new" / "run", "--out")  # a folder that can be made: no refusal, nothing made
    check_folder(tmp_path, "--results")
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
def test_collect_with_relative_weights_and_images(tmp_path: Path) -> None:
    import torch

    from hwprof.workload.images import discover
    from hwprof.workload.zoo import build_architecture

    work = tmp_path / "work"
    (work / "ckpt").mkdir(parents=True)
    (work / "imgs").mkdir()
    torch.manual_seed(1)
    torch.save(build_architecture("yolov8n").state_dict(), work / "ckpt" / "y8n.pt")
    shutil.copy(discover(None).paths[0], work / "imgs" / "one.jpg")
    command = [sys.executable, "-m", "hwprof", "collect", "--model", "yolov8n", "--weights", "ckpt/y8n.pt"]
    command += ["--images", "imgs", "--imgsz", "64", "--iters", "1", "--warmup", "0", "--only", "timing"]
    command += ["--threads", "1", "--no-report", "--out", "run"]
    proc = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    run = json.loads((work / "run" / "run.json").read_text())
    weights, images = str((work / "ckpt" / "y8n.pt").resolve()), str((work / "imgs").resolve())
    assert run["config"]["weights"] == weights and run["config"]["images"] == images
    saved = json.loads((work / "run" / "config.json").read_text())
    assert saved["weights"] == weights and saved["images"] == images
    assert run["model"]["random_init"] is False
    assert run["images"]["paths"] == [str((work / "imgs" / "one.jpg").resolve())]
