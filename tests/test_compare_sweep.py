"""compare: runs side by side with ratios, layers only between like models; sweep: one collect per point."""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console
from test_analysis import PEAKS, make_run

from hwprof import sweep as sweep_mod
from hwprof.analysis.compare import compare_runs
from hwprof.machine import Peaks
from hwprof.render.compare import comparison_markdown, render_comparison, render_sweep, sweep_markdown
from hwprof.sweep import SweepEvent, SweepPlan, collect_command, load_sweep, row_from_run, run_sweep

FAST = {"model.0": 80.0, "model.1": 60.0, "model.2": 20.0, "model.3": 20.0}


def test_same_model_layers_side_by_side(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a")
    slower = {**FAST, "model.0": 160.0}  # layers pass forward 280 ms: model.0 share 160/280
    b = make_run(tmp_path / "b", timing_forward_ms=(150.0, 150.0, 150.0), layer_ms=(slower,) * 3)
    c = compare_runs([a, b])
    assert c.layers_refused is None and c.layers is not None
    forward = next(r for r in c.stages if r.key == "forward")
    assert forward.values == [pytest.approx(100.0), pytest.approx(150.0)]
    assert forward.ratios[1] == pytest.approx(1.5)
    conv = next(r for r in c.layers if r.key == "0 Conv")
    assert conv.values[0] == pytest.approx(40.0)
    assert conv.values[1] == pytest.approx(150.0 * 160 / 280)
    assert conv.ratios[1] == pytest.approx(150.0 * 160 / 280 / 40.0)
    assert [h.run_id for h in c.runs] == ["a", "b"]
    assert c.runs[1].forward_ms == pytest.approx(150.0)
    assert c.notes == []


def test_different_models_compare_stages_only(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", model="yolov8n")
    b = make_run(tmp_path / "b", model="yolov5nu")
    c = compare_runs([a, b])
    assert c.layers is None
    assert c.layers_refused is not None
    assert "different models (yolov8n, yolov5nu)" in c.layers_refused
    assert {r.key for r in c.stages} == {"load", "preprocess", "forward", "postprocess", "iteration"}
    buf = io.StringIO()
    render_comparison(c, Console(file=buf, width=100, color_system=None))
    text = " ".join(buf.getvalue().split())
    assert "layers not compared: runs are of different models" in text
    assert "stages (p50)" in text


def test_same_name_different_layer_tables_are_refused(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a")
    per = {"model.0": 80.0, "model.1": 60.0, "model.1.cv1": 30.0, "model.2": 20.0, "model.3": 20.0}
    b = make_run(tmp_path / "b", layer_ms=(per,) * 3, nested=True)
    c = compare_runs([a, b])
    assert c.layers is None and "different --depth" in (c.layers_refused or "")


def test_compare_needs_two_runs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least two run directories"):
        compare_runs([make_run(tmp_path / "a")])


@pytest.mark.parametrize("width", [80, 100, 120])
def test_comparison_fits(tmp_path: Path, width: int) -> None:
    runs = [make_run(tmp_path / n) for n in ("a", "b", "c")]
    buf = io.StringIO()
    render_comparison(compare_runs(runs), Console(file=buf, width=width, color_system=None))
    assert all(cell_len(line.rstrip()) <= width for line in buf.getvalue().splitlines())
    assert "C/A" in buf.getvalue() or width == 80
    assert "| A ms |" in comparison_markdown(compare_runs(runs))


# ----------------------------------------------------------------------------- sweep


def test_collect_command() -> None:
    plan = SweepPlan(["yolov5nu"], [2], [4], Path("/o"), 640, 5, 1, ["--only", "timing,flops"])
    assert plan.collect_args().count("--only") == 1  # chosen collectors replace the default ones
    assert "timing,flops,rapl" in SweepPlan(["m"], [1], [1], Path("/o"), extra_args=["--events", "x"]).collect_args()
    assert "timing,flops,rapl" not in SweepPlan(["m"], [1], [1], Path("/o"), extra_args=["--skip=pyspy"]).collect_args()
    cmd = collect_command("yolov5nu", 2, 4, Path("/o/p"), plan.collect_args())
    assert cmd[:5] == [sys.executable, "-P", "-m", "hwprof", "collect"]
    text = " ".join(cmd)
    for part in (
        "--model yolov5nu",
        "--threads 2",
        "--batch 4",
        "--imgsz 640",
        "--iters 5",
        "--warmup 1",
        "--out /o/p",
        "--no-report",
        "--only timing,flops",
    ):
        assert part in text


def test_row_from_run(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r")
    row = row_from_run(run, "toyolo", 2, 1, "complete")
    assert row.forward_ms == pytest.approx(100.0) and row.latency_ms == pytest.approx(100.0)
    assert row.params_m == pytest.approx(600 / 1e6)
    assert row.size_mb == pytest.approx(600 * 4 / 2**20)
    assert row.gflops == pytest.approx(6.1)
    assert row.pct_peak == pytest.approx(100 * 6.1 / 0.1 / float(PEAKS["gflops"]))  # type: ignore[arg-type]
    assert row.bound == "compute" and row.intensity is not None
    assert row.j_per_image is None and row.energy_note.startswith("unavailable: rapl")
    assert row.peaks_source == "run.json"


def test_row_without_peaks_uses_the_fallback(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r", peaks=None)
    row = row_from_run(run, "toyolo", 2, 1, "complete", peaks=lambda n: {**PEAKS, "threads": n})
    assert row.pct_peak is not None and "measured by the sweep" in row.peaks_source
    bare = row_from_run(run, "toyolo", 2, 1, "complete")
    assert bare.pct_peak is None and "no measured machine peaks" in bare.peaks_source


def _fake_peaks(threads: int, force: bool = False) -> Peaks:
    return Peaks(
        gflops=100.0,
        gbps=10.0,
        threads=threads,
        host_key="k",
        cpu_model="c",
        logical_cpus=2,
        torch_version="t",
        measured_at="now",
        load_avg_1m=0.0,
        gflops_method="m",
        gbps_method="m",
    )


def test_run_sweep_with_a_stand_in_collect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child `collect` is replaced by a copy of a prepared run; one point fails."""
    template = make_run(tmp_path / "template", peaks=None)
    calls: list[str] = []

    def command(model: str, threads: int, batch: int, out: Path, *_args: object) -> list[str]:
        calls.append(f"{model}-{threads}-{batch}")
        if model == "broken":
            return [sys.executable, "-c", "import sys; print('boom: no such model'); sys.exit(2)"]
        code = "import shutil, sys; shutil.copytree(sys.argv[1], sys.argv[2])"
        return [sys.executable, "-c", code, str(template), str(out)]

    monkeypatch.setattr(sweep_mod, "collect_command", command)
    monkeypatch.setattr("hwprof.machine.measure_peaks", _fake_peaks)
    lines: list[SweepEvent] = []
    out = tmp_path / "sweep"
    result = run_sweep(SweepPlan(["toyolo", "broken"], [1, 2], [1], out), progress=lines.append)
    assert [(r.model, r.threads, r.status) for r in result.rows] == [
        ("toyolo", 1, "complete"),
        ("toyolo", 2, "complete"),
        ("broken", 1, "failed"),
        ("broken", 2, "failed"),
    ]
    assert "boom: no such model" in result.rows[2].error
    assert result.rows[0].pct_peak == pytest.approx(6.1 / 0.1)
    assert any("measured by the sweep" in n for n in result.notes)
    assert (out / "sweep.csv").read_text().startswith("model,threads,batch,run_dir,status")
    loaded = load_sweep(out)
    assert [r.to_dict() for r in loaded.rows] == [r.to_dict() for r in result.rows]
    assert any(str(e).startswith("[1/4] toyolo-t1-b1: ") for e in lines)
    assert [e.index for e in lines if e.done] == [1, 2, 3, 4]

    for name in ("broken-t1-b1", "broken-t2-b1"):
        shutil.rmtree(out / name, ignore_errors=True)
    calls.clear()
    again = run_sweep(SweepPlan(["toyolo"], [1, 2], [1], out))
    assert calls == [] and [r.status for r in again.rows] == ["reused", "reused"]

    buf = io.StringIO()
    render_sweep(result, Console(file=buf, width=100, color_system=None))
    text = buf.getvalue()
    assert "toyolo" in text and "latency ms" in text
    assert "| toyolo |" in sweep_markdown(result)
    assert json.loads((out / "sweep.json").read_text())["rows"][0]["model"] == "toyolo"


def test_sweep_refuses_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one model"):
        run_sweep(SweepPlan([], [1], [1], tmp_path))
    with pytest.raises(ValueError, match="at least 1"):
        run_sweep(SweepPlan(["yolov8n"], [0], [1], tmp_path))
    (tmp_path / "yolov8n-t1-b1").mkdir()
    (tmp_path / "yolov8n-t1-b1" / "partial").write_text("")
    with pytest.raises(ValueError, match="holds an incomplete run"):
        run_sweep(SweepPlan(["yolov8n"], [1], [1], tmp_path))


@pytest.mark.slow
def test_real_sweep_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One real `hwprof collect` child (tiny image, one iteration, timing and FLOPs only)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # peaks measured for the table go here
    plan = SweepPlan(
        ["yolov8n"],
        [1],
        [1],
        tmp_path,
        imgsz=64,
        iters=1,
        warmup=0,
        extra_args=["--only", "timing,flops"],
        timeout_s=300,
    )
    result = run_sweep(plan)
    row = result.rows[0]
    assert row.status == "complete", row.error
    assert row.forward_ms and row.forward_ms > 0
    assert row.gflops == pytest.approx(8.74 * (64 / 640) ** 2, rel=0.05)
    assert row.params_m == pytest.approx(3.15, rel=0.01)


def test_compare_entry_point_formats(tmp_path: Path) -> None:
    from hwprof.render.compare import compare

    a, b = make_run(tmp_path / "a"), make_run(tmp_path / "b")
    buf = io.StringIO()
    compare([a, b], Console(file=buf, width=100, color_system=None), format="json")
    doc = json.loads(buf.getvalue())
    assert doc["layers_refused"] is None and len(doc["runs"]) == 2
    buf = io.StringIO()
    compare([a, b], Console(file=buf, width=100), format="markdown")
    assert buf.getvalue().startswith("### runs")
    with pytest.raises(ValueError, match="--format must be one of"):
        compare([a, b], format="csv")


def test_doctor_peaks_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    from hwprof.render.report import doctor_peaks

    monkeypatch.setattr("hwprof.machine.measure_peaks", _fake_peaks)
    buf = io.StringIO()
    peaks = doctor_peaks(2, console=Console(file=buf, width=100, color_system=None))
    assert peaks.gflops == 100.0 and "100.0 GFLOP/s FP32 with 2 threads" in buf.getvalue()
