"""A run directory with a GPU pass made from the H100 recordings (tests/fixtures/gpu): rundir_small (a
yolov8n CPU run) plus passes/gpu from the recorded yolov8n CUDA trace (its forward and layer ranges as
the pass's markers; kernels, launches, per-layer tables as gpu_kineto writes them), NVML tracks, the
recorded Nsight Compute CSVs as the ncu passes' tables, the recorded peaks and the recorded eager
against CUDA-graph timing of yolov8n fp32 at batch 1 as cuda_graph's summary."""

from __future__ import annotations

import bisect
import json
import shutil
from pathlib import Path

from hwprof.collectors.gpu.kineto.attribution import attribute
from hwprof.collectors.gpu.kineto.pass_outputs import clock_offset, run_summary, write_outputs
from hwprof.collectors.gpu.kineto.trace import LAYER_RANGE, GpuTrace, load_gpu_trace
from hwprof.collectors.gpu.ncu.csv_report import load_ncu_csv
from hwprof.collectors.gpu.ncu.per_layer import layer_tables
from hwprof.collectors.gpu.nvml.series import NvmlSeries

from hwprof.schema.records import write_records

FIX = Path(__file__).parent / "fixtures"
GPU = FIX / "gpu"
NVML_SAMPLES = 50
RUN_T0 = 6_000_000_000_000


def _markers(trace, offset: int) -> list[list]:
    rows = []
    last = max(a.end for a in trace.activities.values())
    for i, fwd in enumerate(trace.forwards):
        end = max(fwd.end, last) if i == len(trace.forwards) - 1 and not trace.stages else fwd.end
        if not trace.stages:
            rows.append(["iteration", "B", "iteration", fwd.ts + offset - 1000, i, 0, -1])
            rows.append(["iteration", "E", "iteration", end + offset + 1000, i, 0, -1])
        rows.append(["stage", "B", "forward", fwd.ts + offset, i, 0, -1])
        for layer in trace.layers:
            m = LAYER_RANGE.match(layer.name)
            if m and fwd.ts <= layer.ts < fwd.end:
                idx = int(m.group(1))
                rows.append(["layer", "B", f"model.{idx}", layer.ts + offset, i, 0, idx])
                rows.append(["layer", "E", f"model.{idx}", layer.end + offset, i, 0, idx])
        rows.append(["stage", "E", "forward", end + offset, i, 0, -1])
    if trace.stages:  # a whole-pipeline trace: its other stages, and iterations from each `load` to the next
        loads = [s.ts for s in trace.stages if s.name == "load"]
        for stage in trace.stages:
            i = bisect.bisect_right(loads, stage.ts) - 1
            rows.append(["stage", "B", stage.name, stage.ts + offset, i, 0, -1])
            rows.append(["stage", "E", stage.name, stage.end + offset, i, 0, -1])
        ends = [*(t - 1000 for t in loads[1:]), max(last, *(s.end for s in trace.stage_ranges())) + 1000]
        for i, (begin, end) in enumerate(zip(loads, ends, strict=True)):
            rows.append(["iteration", "B", "iteration", begin + offset - 1000, i, 0, -1])
            rows.append(["iteration", "E", "iteration", end + offset, i, 0, -1])
    rows.sort(key=lambda r: (r[3], r[1] == "B"))  # at one instant an end comes before a begin, as the bus writes
    return rows


def gpu_run(tmp_path: Path, trace: GpuTrace | None = None) -> tuple[Path, int]:
    """The run directory and the number of GPU kernels in its gpu pass; `trace`: another Kineto trace
    than the recorded yolov8n forwards (a synthetic whole-pipeline one: kineto_synth.py)."""
    run_dir = tmp_path / "run"
    shutil.copytree(FIX / "rundir_small", run_dir)
    run = json.loads((run_dir / "run.json").read_text())
    trace = trace or load_gpu_trace(GPU / "kineto_yolov8n_640_fp32.2fwd.json.gz")
    att = attribute(trace)
    gpu = run_dir / "passes" / "gpu"
    gpu.mkdir()
    shutil.copy(run_dir / "passes" / "trace" / "model.json", gpu / "model.json")
    offset = RUN_T0 - trace.forwards[0].ts
    markers = _markers(trace, offset)
    (gpu / "markers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in markers))
    forward_marks = [r[3] for r in markers if r[:3] == ["stage", "B", "forward"]]
    clock = clock_offset(trace, forward_marks)
    write_outputs(gpu, "gpu_kineto", trace, att, clock)
    series = NvmlSeries.load(GPU / "nvml_samples.json.gz")
    shift = RUN_T0 - int(series.samples[0][0])
    series.samples = [[s[0] + shift, *s[1:]] for s in series.samples[:NVML_SAMPLES]]
    write_records(gpu / "nvml.records.jsonl", series.counter_samples())
    results = json.loads((GPU / "gpu_results.subset.json").read_text())
    (gpu / "gpu_peaks.json").write_text(json.dumps({"device": results["device"], "peaks": results["peaks"]}))
    (gpu / "result.json").write_text(json.dumps({"pass": "gpu", "status": "ok", "error": "", "collectors": {}}))
    tables, kernels = layer_tables(load_ncu_csv(GPU / "ncu_yolov8n_640_fp32.csv.gz"), None)
    (run_dir / "passes" / "ncu").mkdir()
    tables.save(run_dir / "passes" / "ncu" / "ncu.metrics.json")
    (run_dir / "passes" / "ncu" / "ncu.kernels.json").write_text(json.dumps({"layers": kernels}))
    ranged, _ = layer_tables(None, load_ncu_csv(GPU / "ncu_app-range_yolov8n_640_fp32.csv.gz"))
    (run_dir / "passes" / "ncu_range").mkdir()
    ranged.save(run_dir / "passes" / "ncu_range" / "ncu_range.metrics.json")
    graph = next(
        r
        for r in json.loads((GPU / "gpu_experiments.json").read_text())
        if r["model"] == "yolov8n" and r["batch"] == 1 and r["precision"] == "fp32" and not r["channels_last"]
    )
    run["passes"]["gpu"] = {"status": "ok", "returncode": 0, "error": "", "collectors": ["gpu_kineto", "nvml"]}
    run["collectors"]["gpu_kineto"] = {"status": "ok", "summary": run_summary(trace, att, clock).to_json()}
    run["collectors"]["cuda_graph"] = {
        "status": "ok",
        "summary": {
            "eager_ms_p50": graph["eager_ms"],
            "graph_ms_p50": graph["cuda_graph_ms"],
            "launch_overhead_share": 1 - graph["cuda_graph_ms"] / graph["eager_ms"],
        },
    }
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir, len(att.forwards) * int(att.mean("kernels"))
