"""The GPU pass in the Perfetto trace, from a recorded H100 torch.profiler trace: kernels on a GPU stream
track, a flow arrow from each launch (inside its layer's slice on the launching thread) to its kernel,
NVML counter tracks; checked with Perfetto's trace processor."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hwprof.collectors.gpu.kineto.outputs import spans
from hwprof.collectors.gpu.kineto.trace import LAYER_RANGE, load_gpu_trace
from hwprof.collectors.gpu.nvml.samples import NvmlSeries
from hwprof.records import write_records
from hwprof.render.perfetto import build_trace
from hwprof.render.trace_processor import TraceSession, availability

FIX = Path(__file__).parent / "fixtures"
BAD_STATS = """
    select name, idx, severity, source, value from stats
    where value > 0 and (severity in ('error', 'data_loss') or name glob '*error*'
                         or name glob '*misplaced*' or name glob '*unmatched*')
"""
NVML_SAMPLES = 50


def gpu_run(tmp_path: Path) -> tuple[Path, int]:
    """rundir_small (a yolov8n CPU run) plus a "gpu" pass made from the recorded yolov8n CUDA trace: its
    forward and layer ranges as the pass's markers, its kernels and launches as gpu_kineto records."""
    run_dir = tmp_path / "run"
    shutil.copytree(FIX / "rundir_small", run_dir)
    trace = load_gpu_trace(FIX / "gpu" / "kineto_yolov8n_640_fp32.2fwd.json.gz")
    gpu = run_dir / "passes" / "gpu"
    gpu.mkdir()
    shutil.copy(run_dir / "passes" / "trace" / "model.json", gpu / "model.json")
    offset = 6_000_000_000_000 - trace.forwards[0].ts
    rows = []
    for i, fwd in enumerate(trace.forwards):
        rows.append(["iteration", "B", "iteration", fwd.ts + offset - 1000, i, 0, -1])
        rows.append(["stage", "B", "forward", fwd.ts + offset, i, 0, -1])
        for layer in trace.layers:
            m = LAYER_RANGE.match(layer.name)
            if m and fwd.ts <= layer.ts < fwd.end:
                idx = int(m.group(1))
                rows.append(["layer", "B", f"model.{idx}", layer.ts + offset, i, 0, idx])
                rows.append(["layer", "E", f"model.{idx}", layer.end + offset, i, 0, idx])
        last = max(a.end for a in trace.activities.values())
        rows.append(["stage", "E", "forward", max(fwd.end, last if i == len(trace.forwards) - 1 else 0) + offset, i, 0, -1])
        rows.append(["iteration", "E", "iteration", max(fwd.end, last) + offset + 1000, i, 0, -1])
    rows.sort(key=lambda r: r[3])
    (gpu / "markers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    kernels = write_records(gpu / "gpu_kineto.records.jsonl", spans(trace, offset)) // 2
    series = NvmlSeries.load(FIX / "gpu" / "nvml_samples.json.gz")
    shift = trace.forwards[0].ts + offset - int(series.samples[0][0])
    series.samples = [[s[0] + shift, *s[1:]] for s in series.samples[:NVML_SAMPLES]]
    write_records(gpu / "nvml.records.jsonl", series.counter_samples())
    (gpu / "result.json").write_text(json.dumps({"pass": "gpu", "status": "ok", "error": "", "collectors": {}}))
    run = json.loads((run_dir / "run.json").read_text())
    run["passes"]["gpu"] = {"status": "ok", "returncode": 0, "error": "", "collectors": ["gpu_kineto", "nvml"]}
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir, kernels


def test_gpu_pass_in_the_trace(tmp_path: Path) -> None:
    run_dir, kernels = gpu_run(tmp_path)
    assert kernels == 2 * 297  # the recorded yolov8n forward: 273 kernels by cudaLaunchKernel, 24 by cuLaunchKernel
    stats = build_trace(run_dir)
    if not availability().available:
        pytest.skip(f"Perfetto's trace processor cannot run here: {availability().reason}")
    with TraceSession(stats.path) as tp:
        assert tp.query(BAD_STATS) == []
        on_gpu = tp.query(
            "select count(*) as n from slice s join track t on s.track_id = t.id where t.name = 'GPU 0 stream 7'"
        )[0]["n"]
        assert on_gpu == kernels
        flows = tp.query(
            """
            select count(*) as n from flow f
            join slice a on f.slice_out = a.id join slice b on f.slice_in = b.id
            join track tb on b.track_id = tb.id
            where a.category = 'cuda_launch' and tb.name = 'GPU 0 stream 7'
            """
        )[0]["n"]
        assert flows == kernels
        outside = tp.query(
            """
            select count(*) as n from slice s where s.category = 'cuda_launch'
            and not exists (select 1 from ancestor_slice(s.id) a where a.category glob 'layer*')
            """
        )[0]["n"]
        assert outside == 0  # every launch sits inside its layer's slice on the launching thread
        nvml = {
            r["name"]: r["n"]
            for r in tp.query(
                "select t.name, count(c.id) as n from counter_track t join counter c on c.track_id = t.id "
                "where t.name like 'GPU%' group by t.id"
            )
        }
        assert nvml["GPU power (W)"] == NVML_SAMPLES and nvml["GPU SM clock (MHz)"] == NVML_SAMPLES
