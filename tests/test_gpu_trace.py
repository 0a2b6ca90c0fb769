"""The GPU pass in the Perfetto trace, from a recorded H100 torch.profiler trace: kernels on a GPU stream
track under one slice per layer and forward (its kernels' span), a flow arrow from each launch (inside its
layer's slice on the launching thread) to its kernel, NVML counter tracks; and, from a SYNTHETIC whole-pipeline
Kineto trace (the recordings hold no copy and no NMS), copies, memsets and NMS kernels under their stage's
slice with flows from their launches. Checked with Perfetto's trace processor."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from gpu_rundir import GPU, NVML_SAMPLES, gpu_run
from gpu_trace_checks import BAD_STATS, check_kernels_and_launches
from hwprof.collectors.gpu.kineto.trace import GPU_CATS, GpuTrace, load_gpu_trace, parse_gpu_trace
from kineto_synth import synthetic_pipeline_trace

from hwprof.trace.perfetto import build_trace
from hwprof.trace.processor import TraceSession, availability

ACTIVITY_CATS = tuple(GPU_CATS)


def test_gpu_pass_in_the_trace(tmp_path: Path) -> None:
    run_dir, kernels = gpu_run(tmp_path)
    trace = load_gpu_trace(GPU / "kineto_yolov8n_640_fp32.2fwd.json.gz")
    offset = json.loads((run_dir / "run.json").read_text())["collectors"]["gpu_kineto"]["summary"]["clock"]["offset_ns"]
    assert kernels == 2 * 297  # the recorded yolov8n forward: 273 kernels by cudaLaunchKernel, 24 by cuLaunchKernel
    stats = build_trace(run_dir)
    if not availability().available:
        pytest.skip(f"Perfetto's trace processor cannot run here: {availability().reason}")
    with TraceSession(stats.path) as tp:
        check_kernels_and_launches(tp, "GPU 0 stream 7", kernels)
        assert_each_activity_once_with_its_flow(tp, set(trace.activities))
        assert_layer_slices(tp, trace, offset, forwards=2)
        nvml = {
            r["name"]: r["n"]
            for r in tp.query(
                "select t.name, count(c.id) as n from counter_track t join counter c on c.track_id = t.id "
                "where t.name like 'GPU%' group by t.id"
            )
        }
        assert nvml["GPU power (W)"] == NVML_SAMPLES and nvml["GPU SM clock (MHz)"] == NVML_SAMPLES


def expected_layer_spans(trace: GpuTrace, offset: int) -> dict[tuple[int, str], tuple[int, int, int]]:
    """(forward, layer range) -> (begin, dur, activities) on the run's clock, straight from the parsed records:
    the activities whose launch call lies inside the layer's range on the range's thread."""
    launch = {c.correlation: c for c in trace.launches}
    acts: dict[tuple[int, str], list[Any]] = defaultdict(list)
    for act in trace.activities.values():
        call = launch.get(act.correlation)
        if call is None:
            continue
        for f, fwd in enumerate(trace.forwards):
            for rng in trace.layers:
                if fwd.ts <= rng.ts < fwd.end and rng.tid == call.tid and rng.ts <= call.ts < rng.end:
                    acts[(f, rng.name)].append(act)
    return {
        key: (min(a.ts for a in v) + offset, max(a.end for a in v) - min(a.ts for a in v), len(v))
        for key, v in acts.items()
    }


def assert_layer_slices(tp: Any, trace: GpuTrace, offset: int, forwards: int) -> None:
    """One slice per layer and forward on the GPU track, named as the CPU layer slices ("22 Detect"), spanning
    exactly its activities (first begin to last end), which are its children; none cut to nest."""
    rows = tp.query(
        """
        select s.id, s.name, s.ts, s.dur, extract_arg(s.arg_set_id, 'debug.forward') as fwd,
               extract_arg(s.arg_set_id, 'debug.range') as rng,
               extract_arg(s.arg_set_id, 'debug.activities') as n,
               extract_arg(s.arg_set_id, 'debug.clamped_ns') as clamped,
               (select count(*) from slice c where c.parent_id = s.id) as children,
               (select min(c.ts) from slice c where c.parent_id = s.id) as first,
               (select max(c.ts + c.dur) from slice c where c.parent_id = s.id) as last
        from slice s join track t on s.track_id = t.id
        where t.name glob 'GPU * stream *' and s.category = 'gpu_layer'
        """
    )
    expected = expected_layer_spans(trace, offset)
    got = {(r["fwd"], r["rng"]): (r["ts"], r["dur"], r["n"]) for r in rows}
    assert len(rows) == len(got) == len(expected) and {f for f, _ in got} == set(range(forwards))
    assert got == expected
    for r in rows:
        index, type_name = r["rng"].split()[1:]
        assert r["name"] == f"{index} {type_name}" and r["clamped"] is None
        assert (r["children"], r["first"], r["last"]) == (r["n"], r["ts"], r["ts"] + r["dur"])


def assert_each_activity_once_with_its_flow(tp: Any, correlations: set[int]) -> None:
    """Every GPU activity of the records is one slice on a GPU track, and a flow arrives at it from its launch
    (the CPU call with the same correlation)."""
    rows = tp.query(
        f"""
        select extract_arg(b.arg_set_id, 'debug.correlation') as corr, b.category as cat,
               (select count(*) from flow f join slice a on f.slice_out = a.id where f.slice_in = b.id
                and a.category = 'cuda_launch'
                and extract_arg(a.arg_set_id, 'debug.correlation') = extract_arg(b.arg_set_id, 'debug.correlation'))
               as flows
        from slice b join track t on b.track_id = t.id
        where t.name glob 'GPU * stream *' and b.category in {ACTIVITY_CATS}
        """
    )
    assert sorted(r["corr"] for r in rows) == sorted(correlations)
    assert all(r["flows"] == 1 for r in rows)


def test_whole_pipeline_on_the_gpu_track(tmp_path: Path) -> None:
    """SYNTHETIC Kineto trace (kineto_synth.py, the recordings' format; not a measurement): two iterations whose
    h2d stage copies to the device, whose forward has a memset between layers, and whose postprocess runs NMS
    kernels and copies back. Every activity is drawn once, under its stage's slice on the GPU track, with a flow
    from its launch (which lies inside the same stage's marker slice on the main thread)."""
    data, synth = synthetic_pipeline_trace(2)
    trace = parse_gpu_trace(data)
    run_dir, _ = gpu_run(tmp_path, trace)
    offset = json.loads((run_dir / "run.json").read_text())["collectors"]["gpu_kineto"]["summary"]["clock"]["offset_ns"]
    stats = build_trace(run_dir)
    if not availability().available:
        pytest.skip(f"Perfetto's trace processor cannot run here: {availability().reason}")
    with TraceSession(stats.path) as tp:
        assert tp.query(BAD_STATS) == []
        assert_each_activity_once_with_its_flow(tp, {a["args"]["correlation"] for a in synth.activities})
        assert_layer_slices(tp, trace, offset, forwards=2)
        rows = tp.query(
            """
            select b.name, b.category as cat, a.name as launch,
                   (select group_concat(p.name, '/') from ancestor_slice(b.id) p where p.category = 'gpu_stage')
                   as gpu_stage,
                   (select group_concat(p.name, '/') from ancestor_slice(a.id) p where p.category = 'stage')
                   as cpu_stage,
                   (select p.name from ancestor_slice(b.id) p where p.category = 'gpu_layer') as gpu_layer
            from flow f join slice a on f.slice_out = a.id join slice b on f.slice_in = b.id
            join track t on b.track_id = t.id where t.name = 'GPU 0 stream 7'
            """
        )
        stages = tp.query(
            """
            select s.name, s.ts, s.dur, extract_arg(s.arg_set_id, 'debug.activities') as n
            from slice s join track t on s.track_id = t.id
            where t.name = 'GPU 0 stream 7' and s.category = 'gpu_stage' order by s.ts
            """
        )
    assert len(rows) == len(synth.activities) == 24
    placed = sorted((a["name"], stage) for stage, _, a in synth.placed)
    assert sorted((r["name"], r["gpu_stage"]) for r in rows) == placed
    assert all(r["gpu_stage"] == r["cpu_stage"] for r in rows)
    copies = [r for r in rows if r["cat"] == "gpu_memcpy"]
    assert (
        sorted((r["name"], r["launch"], r["gpu_stage"]) for r in copies)
        == [("Memcpy DtoH (Device -> Pageable)", "cudaMemcpyAsync", "postprocess")] * 2
        + [("Memcpy HtoD (Pageable -> Device)", "cudaMemcpyAsync", "h2d")] * 2
    )
    memsets = [r for r in rows if r["cat"] == "gpu_memset"]
    assert [(r["launch"], r["gpu_stage"], r["gpu_layer"]) for r in memsets] == [
        ("cudaMemsetAsync", "forward", None)
    ] * 2
    nms = [r for r in rows if "nms_kernel" in r["name"]]
    assert [(r["launch"], r["gpu_stage"]) for r in nms] == [("cudaLaunchKernel", "postprocess")] * 2
    assert [s["name"] for s in stages] == ["h2d", "forward", "postprocess"] * 2
    by_stage: dict[str, list[Any]] = defaultdict(list)
    for stage, _, act in synth.placed:
        by_stage[stage].append(act)
    for stage in ("h2d", "forward", "postprocess"):
        acts = sorted(by_stage[stage], key=lambda a: a["ts"])
        half = len(acts) // 2
        for occurrence, group in enumerate((acts[:half], acts[half:])):
            row = [s for s in stages if s["name"] == stage][occurrence]
            begin = data["baseTimeNanoseconds"] + round(group[0]["ts"] * 1000) + offset
            end = data["baseTimeNanoseconds"] + round(max(a["ts"] + a["dur"] for a in group) * 1000) + offset
            assert (row["ts"], row["dur"], row["n"]) == (begin, end - begin, len(group))


def test_gpu_report_and_findings(tmp_path: Path) -> None:
    from rich.console import Console

    from hwprof.analysis.run_analysis import analyse
    from hwprof.render.report import render_rich
    from hwprof.rundir.reader import RunData

    run_dir, _ = gpu_run(tmp_path)
    a = analyse(RunData.load(run_dir))
    assert a.gpu is not None
    assert a.gpu.layers["model.22"]["gpu_us"] > a.gpu.layers["model.4"]["gpu_us"]
    titles = {f.title: f for f in a.findings if f.kind == "gpu"}
    launch = next(f for t, f in titles.items() if t.startswith("launch-bound"))
    assert "1.09 ms against 4.14 ms eager" in launch.evidence  # the recorded CUDA graph vs eager
    transposes = next(f for t, f in titles.items() if t.startswith("layout transposes"))
    assert "--channels-last removes them is not measured in this run" in transposes.evidence  # advice, not a figure
    roof = next(f for t, f in titles.items() if t.startswith("no layer reaches half of a roof"))
    best = roof.evidence.split(":", 1)[0]  # a layer named as the tables name it: "best 14 Concat"
    assert re.fullmatch(r"best \d+ [A-Za-z0-9]+", best) and "model." not in roof.evidence, roof.evidence
    # tensor-core math was not recorded: every bound says its FLOPs are SASS FP32 only, compute as well as memory
    assert {pt.bound for r in a.gpu.roofline for pt in r.points} == {"memory?", "compute?"}
    assert len(a.gpu.roofline) == 23 and {(p.cache, p.bytes_source) for r in a.gpu.roofline for p in r.points} == {
        ("warm", "app-range replay (warm caches)"),
        ("cold", "kernel replay (cold caches)"),
    }
    console = Console(record=True, width=200)
    render_rich(a, console)
    text = console.export_text()
    for title in ("forward on the GPU", "layers by GPU time", "GPU roofline per layer (Nsight Compute)"):
        assert title in text
    assert "launch-bound" in text
    from hwprof.render.export import summary_dict

    summary = summary_dict(a)["gpu"]
    assert summary["forward"]["kernels_per_forward"] == 297 and len(summary["roofline"]) == 23
    detect = summary["roofline"][-1]
    assert detect["warm"]["bytes_source"] == "app-range replay (warm caches)" and detect["warm"]["ns"] > 0
    assert detect["cold"]["bytes_source"] == "kernel replay (cold caches)" and detect["cold"]["ns"] == 458_816
    assert detect["tensor_work_not_in_flops"] == "unavailable: tensor-core math not recorded by ncu"


def test_gpu_sweep_row(tmp_path: Path) -> None:
    """seed 003's table on a GPU point: energy from NVML, the CUDA-graph forward beside eager, no CPU roofline."""
    import json

    from hwprof.analysis.sweep.rows import SweepPoint, row_from_run

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
    from hwprof.rundir.reader import RunData

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
