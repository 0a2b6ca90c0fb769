"""The GPU pass in the Perfetto trace, from a recorded H100 torch.profiler trace: kernels on a GPU stream
track, a flow arrow from each launch (inside its layer's slice on the launching thread) to its kernel,
NVML counter tracks; checked with Perfetto's trace processor."""

from __future__ import annotations

from pathlib import Path

import pytest
from gpu_rundir import NVML_SAMPLES, gpu_run
from gpu_trace_checks import check_kernels_and_launches

from hwprof.render.perfetto import build_trace
from hwprof.render.trace_processor import TraceSession, availability


def test_gpu_pass_in_the_trace(tmp_path: Path) -> None:
    run_dir, kernels = gpu_run(tmp_path)
    assert kernels == 2 * 297  # the recorded yolov8n forward: 273 kernels by cudaLaunchKernel, 24 by cuLaunchKernel
    stats = build_trace(run_dir)
    if not availability().available:
        pytest.skip(f"Perfetto's trace processor cannot run here: {availability().reason}")
    with TraceSession(stats.path) as tp:
        check_kernels_and_launches(tp, "GPU 0 stream 7", kernels)
        nvml = {
            r["name"]: r["n"]
            for r in tp.query(
                "select t.name, count(c.id) as n from counter_track t join counter c on c.track_id = t.id "
                "where t.name like 'GPU%' group by t.id"
            )
        }
        assert nvml["GPU power (W)"] == NVML_SAMPLES and nvml["GPU SM clock (MHz)"] == NVML_SAMPLES


def test_gpu_report_and_findings(tmp_path: Path) -> None:
    from rich.console import Console

    from hwprof.analysis.run_analysis import analyse
    from hwprof.render.report import render_rich
    from hwprof.rundata import RunData

    run_dir, _ = gpu_run(tmp_path)
    a = analyse(RunData.load(run_dir))
    assert a.gpu is not None
    assert a.gpu.layers["model.22"]["gpu_us"] > a.gpu.layers["model.4"]["gpu_us"]
    titles = {f.title: f for f in a.findings if f.kind == "gpu"}
    launch = next(f for t, f in titles.items() if t.startswith("launch-bound"))
    assert "1.09 ms against 4.14 ms eager" in launch.evidence  # the recorded CUDA graph vs eager
    assert any(t.startswith("layout transposes") for t in titles)
    assert len(a.gpu.roofline) == 23 and {r.bytes_source for r in a.gpu.roofline} == {"app-range replay (warm caches)"}
    console = Console(record=True, width=200)
    render_rich(a, console)
    text = console.export_text()
    for title in ("forward on the GPU", "layers by GPU time", "GPU roofline per layer (Nsight Compute)"):
        assert title in text
    assert "launch-bound" in text
    from hwprof.render.export import summary_dict

    summary = summary_dict(a)["gpu"]
    assert summary["forward"]["kernels_per_forward"] == 297 and len(summary["roofline"]) == 23


def test_gpu_sweep_row(tmp_path: Path) -> None:
    """seed 003's table on a GPU point: energy from NVML, the CUDA-graph forward beside eager, no CPU roofline."""
    import json

    from hwprof.analysis.sweep_rows import SweepPoint, row_from_run

    run_dir, _ = gpu_run(tmp_path)
    run = json.loads((run_dir / "run.json").read_text())
    run["config"]["device"] = "cuda"
    bench = next(
        b
        for b in json.loads((Path(__file__).parent / "fixtures" / "gpu" / "gpu_results.subset.json").read_text())[
            "bench"
        ]
        if b["model"] == "yolov8n" and b["precision"] == "fp32"
    )
    run["collectors"]["nvml"] = {"status": "ok", "summary": {"j_per_iteration": bench["joules_per_inference"]}}
    (run_dir / "run.json").write_text(json.dumps(run))
    row = row_from_run(run_dir, SweepPoint("yolov8n", "torch", "fp32", 1, 1), "complete")
    assert row.device == "cuda"
    assert row.graph_forward_ms == pytest.approx(1.093)
    assert row.j_per_image == pytest.approx(0.8637) and row.energy_note.startswith("estimate: NVML total-energy")
    run["collectors"]["nvml"] = {"status": "ok", "summary": {"j_per_iteration": None, "energy_unavailable": "why"}}
    (run_dir / "run.json").write_text(json.dumps(run))
    row = row_from_run(run_dir, SweepPoint("yolov8n", "torch", "fp32", 1, 1), "complete")
    assert row.j_per_image is None and row.energy_note == "unavailable: nvml: why"
    assert row.pct_peak is None and row.bound is None and "GPU point" in row.peaks_source


def test_cuda_run_has_no_cpu_roofline(tmp_path: Path) -> None:
    """Live on an H100 the report ranked yolov8n's layers against the host CPU's peaks ("402.9% of peak",
    "forward runs at 172% of this host's measured peak") from host-side layer times."""
    import json

    from rich.console import Console

    from hwprof.analysis.run_analysis import analyse
    from hwprof.render.report import render_rich
    from hwprof.rundata import RunData

    run_dir, _ = gpu_run(tmp_path)
    cpu = analyse(RunData.load(run_dir))
    assert cpu.roofline is not None and any(r.pct_peak is not None for r in cpu.layers.layers)
    run = json.loads((run_dir / "run.json").read_text())
    run["config"]["device"] = "cuda:0"
    (run_dir / "run.json").write_text(json.dumps(run))
    a = analyse(RunData.load(run_dir))
    assert a.roofline is None
    assert "ran on cuda:0" in a.layers.missing["roofline"].reason
    assert a.layers.missing["roofline"].fix == "hwprof collect --device cuda:0 --counters ncu"
    assert all(r.pct_peak is None and r.gflops_s is None and r.bound is None for r in a.layers.layers)
    assert a.layers.methods["time_ms"].startswith("on cuda:0 a layer's time is host time")
    assert not any("measured peak" in f.title or "CPUs busy" in f.title for f in a.findings)
    console = Console(record=True, width=200)
    render_rich(a, console)
    text = console.export_text()
    assert "GPU roofline per layer (Nsight Compute)" in text and "% of peak" not in text
    run["passes"]["ncu"] = {"status": "ok", "collectors": ["ncu"]}
    (run_dir / "run.json").write_text(json.dumps(run))
    missing = analyse(RunData.load(run_dir)).layers.missing["roofline"]
    assert missing.reason.endswith("see 'GPU roofline per layer'") and missing.fix == ""
