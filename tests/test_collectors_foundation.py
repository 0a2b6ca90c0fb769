"""The timing and flops collectors driven through the real worker, one pass each."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hwprof.core.config import RunConfig
from hwprof.rundir.worker_files import write_config
from hwprof.schema.records import MetricTables


def run_worker(run_dir, pass_name: str, names: str, config: RunConfig, images) -> subprocess.CompletedProcess[str]:
    run_dir.mkdir(exist_ok=True)
    write_config(run_dir, config)
    (run_dir / "images.json").write_text(json.dumps({"paths": [str(p) for p in images]}))
    return subprocess.run(
        [sys.executable, "-P", "-m", "hwprof.session.worker", str(run_dir), pass_name, names],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_timing_pass_writes_pyperf_json(tmp_path, bus_images) -> None:
    import pyperf

    config = RunConfig(model="yolov8n", imgsz=256, iters=4, warmup=1, threads=2)
    proc = run_worker(tmp_path / "run", "timing", "timing", config, bus_images)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "run" / "passes" / "timing"
    suite = pyperf.BenchmarkSuite.load(str(out / "timing.pyperf.json"))
    names = set(suite.get_benchmark_names())
    assert {
        "stage.load",
        "stage.preprocess",
        "stage.forward",
        "stage.postprocess",
        "forward.reference",
    } <= names
    assert len(suite.get_benchmark("stage.forward").get_values()) == 4
    stats = subprocess.run(
        [sys.executable, "-m", "pyperf", "stats", str(out / "timing.pyperf.json")],
        capture_output=True,
        text=True,
    )
    assert stats.returncode == 0 and "stage.forward" in stats.stdout
    progress = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [p for p in progress if p["phase"] == "measure"][-1] == {"phase": "measure", "done": 5, "total": 5}
    # then the worker says its measuring ended: the collect may launch the next pass beside its close
    assert progress[-1] == {"phase": "closing", "done": 5, "total": 5}
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "ok" and result["collectors"]["timing"]["status"] == "ok"


@pytest.mark.slow
def test_flops_per_layer_add_up(tmp_path, bus_images) -> None:
    config = RunConfig(model="yolov8n", imgsz=640, iters=1, warmup=0, threads=2)
    proc = run_worker(tmp_path / "run", "layers", "flops", config, bus_images)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "run" / "passes" / "layers"
    tables = MetricTables.load(out / "flops.metrics.json")
    summary = json.loads((out / "result.json").read_text())["collectors"]["flops"]["summary"]
    top_level = sum(v["flops"] for k, v in tables.layers.items() if k.count(".") == 1)
    assert top_level == pytest.approx(summary["total_flops"], rel=1e-9)
    assert summary["gflops"] == pytest.approx(8.74, rel=0.005)
    model = json.loads((out / "model.json").read_text())
    conv0 = model["layers"][0]
    assert conv0["type"] == "Conv" and conv0["out_shapes"] == [[1, 16, 320, 320]]
    assert conv0["in_bytes"] == 3 * 640 * 640 * 4
    assert tables.layers["model.0"]["intensity"] == pytest.approx(
        tables.layers["model.0"]["flops"] / tables.layers["model.0"]["min_bytes"]
    )
