"""The official YOLOv7 `detect.py` (the `yolov7detect` sdist of WongKinYiu/yolov7), run unmodified.

What it needs here, and nothing of hwprof's inside it: tests/official/shim on its PYTHONPATH (torchvision cannot
be imported beside the CPU torch; the shim gives `ops.nms` and `box_iou`), TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1
(its `attempt_load` calls `torch.load` without `weights_only`, which torch >= 2.6 refuses for a pickled model: the
user's own choice for their own checkpoint), and its checkpoint at `./yolov7.pt` (the sdist's `attempt_load` passes
the `--weights` list itself to torch.load, so only the default string path loads).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from run_store import store_lock

OFFICIAL = Path(__file__).resolve().parent / "official"
SHIM = OFFICIAL / "shim"
ASSETS = ("bus.jpg", "zidane.jpg")


def require_official() -> None:
    """Skip, with the reason and the fix, where the official code is not installed."""
    spec = importlib.util.find_spec("yolov7")  # its submodules are not looked up: that imports the package, torchvision
    places = spec.submodule_search_locations if spec is not None else None
    if not places or not any((Path(place) / "detect.py").is_file() for place in places):
        pytest.skip("the official YOLOv7 code is not installed; fix: pip install --no-deps yolov7detect==1.0.1")


def official_env() -> dict[str, str]:
    """The environment of the official program's process: the shim first on its PYTHONPATH."""
    paths = [str(SHIM), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}


def checkpoint(tmp_path_factory: pytest.TempPathFactory, model: str = "yolov7-tiny") -> Path:
    """The seeded checkpoint of `model` (official/make_checkpoint.py), made once per suite in the run store's folder
    (tests/run_store.py: every phase and xdist worker of the suite shares it) and read by every workdir after:
    the same bytes each time, as the seed fixes them."""
    with store_lock(tmp_path_factory, f"official-{model}") as folder:
        made = folder / f"official-{model}.pt"
        if not made.exists():
            command = [sys.executable, str(OFFICIAL / "make_checkpoint.py"), f"{made}.tmp", "--model", model]
            subprocess.run(command, check=True, env=official_env(), capture_output=True)
            Path(f"{made}.tmp").rename(made)
    return made


def make_workdir(
    folder: Path, tmp_path_factory: pytest.TempPathFactory, model: str = "yolov7-tiny", images: int = 2
) -> Path:
    """FOLDER with `yolov7.pt` (made by the official `models/yolo.py`, seeded: `checkpoint`) and `images/`: the
    ultralytics wheel's bus.jpg and zidane.jpg, copied in turn until IMAGES files."""
    import ultralytics

    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(checkpoint(tmp_path_factory, model), folder / "yolov7.pt")
    source = Path(ultralytics.__file__).parent / "assets"
    (folder / "images").mkdir(exist_ok=True)
    for i in range(images):
        name = ASSETS[i % len(ASSETS)]
        shutil.copy(source / name, folder / "images" / f"{i:03d}_{name}")
    return folder


def detect_args(imgsz: int = 160, trace: bool = False) -> list[str]:
    """The official detect.py's arguments: the work folder's images, on the CPU, nothing saved."""
    args = ["-m", "yolov7.detect", "--source", "images", "--img-size", str(imgsz), "--device", "cpu", "--nosave"]
    return args if trace else [*args, "--no-trace"]


def inference_ms(output: str) -> list[float]:
    """The official detect.py's own printed inference times ('Done. (36.9ms) Inference, (0.2ms) NMS'), in ms."""
    import re

    return [float(m) for m in re.findall(r"Done\. \(([0-9.]+)ms\) Inference", output)]
