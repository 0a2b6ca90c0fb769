"""A user's detect.py-like program on yolov8n at 64: its per-layer table names the layers as `hwprof collect
--model yolov8n` does (model.0 .. model.22, same types; the suite's stored small run, tests/run_store.py, at the
same size), and `hwprof compare` holds the two runs layer by layer."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from program_runs import SHORT, collect, layer_names, program, run_doc
from run_store import option, stored_run

COLLECTORS = ["--only", "timing,perf_events,flops"]


def _types(out: Path) -> list[tuple[str, str]]:
    with (out / "layers.csv").open(newline="") as handle:
        return [(row["name"], row["type"]) for row in csv.DictReader(handle)]


@pytest.mark.slow
def test_a_programs_yolov8n_layers_are_named_and_compared_as_hwprofs_own(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    mine = tmp_path / "program"
    imgsz = option("small", "--imgsz")
    done = collect(mine, [*COLLECTORS, *SHORT], [program("detect_like"), "--img-size", imgsz, "--frames", "60"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert layer_names(mine) == [f"model.{i}" for i in range(23)]
    assert run_doc(mine)["passes"]["layers"]["program"]["layers_from"].startswith("model.model")
    hwprof = [sys.executable, "-P", "-m", "hwprof"]
    built = stored_run(tmp_path_factory, "small", tmp_path / "builtin")  # `hwprof collect --model yolov8n`
    assert built.returncode == 0, built.stdout + built.stderr
    own = built.path
    assert _types(mine) == _types(own)
    compared = subprocess.run(
        [*hwprof, "compare", str(mine), str(own), "--format", "json"], capture_output=True, text=True, timeout=120
    )
    assert compared.returncode == 0, compared.stdout + compared.stderr
    doc = json.loads(compared.stdout)
    assert doc["layers_refused"] is None
    assert [(r["imgsz"], r["batch"]) for r in doc["runs"]] == [(int(imgsz), 1)] * 2  # the program's own input
    assert [row["key"] for row in doc["layers"]] == [f"{i} {t}" for i, (_, t) in enumerate(_types(own))]
    assert all(v is not None for row in doc["layers"] for v in row["values"]), doc["layers"]
