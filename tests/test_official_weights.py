"""`hwprof collect --model yolov7-tiny --weights CKPT` reads a checkpoint of the official YOLOv7 code as the
`yolov7detect` sdist packages it: its classes are pickled under that package (`yolov7.models.yolo.Model`), not
the repository's `models.yolo.Model`, and are allowlisted under both names."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from official_runs import checkpoint, require_official

from hwprof.workload.weights import load_checkpoint
from hwprof.workload.zoo import build_architecture, build_model


def test_a_checkpoint_of_the_packaged_official_code_loads(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    require_official()
    path = tmp_path / "yolov7.pt"
    shutil.copy(checkpoint(tmp_path_factory, "yolov7-tiny"), path)  # official/make_checkpoint.py's, once per suite
    names = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
    assert "yolov7.models.yolo.Model" in names and "yolov7.models.yolo.IDetect" in names
    _, info = load_checkpoint(path, "yolov7-tiny", build_architecture)
    assert info.format == "yolov7-official" and info.nc == 80
    assert "IDetect implicit layers folded into Detect (release checkpoint)" in info.notes
    built = build_model("yolov7-tiny", str(path))
    assert len(built.module.model) == 78
