"""The GPU advice table from the H100 recordings (analysis/gpu/advice.py; advice.json of a gpu-import run) and
the GPU run's main layer table ranked by GPU time (render/gpu_sections.gpu_main_layers_spec).

Every expected figure is computed here from the recorded JSON (tests/fixtures/gpu, copies of
shared/recordings/h100-2026-11-22) or the fixture run's Kineto records, never pasted."""

from __future__ import annotations

import json
import re
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from hwprof.analysis.advice.speedup import RECORDED, RECORDED_NOISE
from hwprof.analysis.advice.table import NOT_RUN, load_advice
from hwprof.analysis.finding import Finding
from hwprof.analysis.gpu.advice import SOURCE, GpuBaseline, gpu_advice
from hwprof.analysis.run_analysis import analyse
from hwprof.gpu.rundir import COMPILED, EXPERIMENTS, RECORDED_DIR, recorded_gpu_advice
from hwprof.render.gpu.sections import NO_GPU_TIME, gpu_main_layers_spec
from hwprof.render.report import specs
from hwprof.render.tables import spec_renderables
from hwprof.rundir.reader import RunData

FIX = Path(__file__).parent / "fixtures"
GPU = FIX / "gpu"
RUN = FIX / "gpu_run_yolov8n"
EXP: list[dict[str, Any]] = json.loads((GPU / "gpu_experiments.json").read_text())
COMP: list[dict[str, Any]] = json.loads((GPU / "gpu_compile.json").read_text())
ALL_TOPICS = [
    Finding("launch-bound: the GPU idles 90% of the forward", "e", "gpu", 0.9, topic="launch-bound"),
    Finding("layout transposes take 17% of the GPU time", "e", "gpu", 0.17, topic="layout-transposes"),
]


def _point(model: str, batch: int, precision: str, cl: bool) -> dict[str, Any]:
    return next(
        r for r in EXP if (r["model"], r["batch"], r["precision"], r["channels_last"]) == (model, batch, precision, cl)
    )


@pytest.mark.parametrize("model", ["yolov8n", "yolov7"])
def test_rows_are_the_recorded_figures_at_batch_1(model: str) -> None:
    advice = gpu_advice(GpuBaseline(model, 1, "fp32", False), ALL_TOPICS, EXP, COMP)
    rows = {r.key: r for r in advice.rows}
    assert set(rows) == {
        "cuda-graph",
        "compile-reduce-overhead",
        "fp16",
        "bf16",
        "channels_last",
        "batch-8",
        "batch-32",
    }
    base = _point(model, 1, "fp32", False)
    expect = {
        "cuda-graph": (base["eager_ms"], base["cuda_graph_ms"]),
        "fp16": (base["eager_ms"], _point(model, 1, "fp16", False)["eager_ms"]),
        "channels_last": (base["eager_ms"], _point(model, 1, "fp32", True)["eager_ms"]),
        "batch-8": (base["eager_ms"], _point(model, 8, "fp32", False)["eager_ms"] / 8),
        "batch-32": (base["eager_ms"], _point(model, 32, "fp32", False)["eager_ms"] / 32),
    }
    for key, (before, after) in expect.items():
        f = rows[key].forward
        assert f is not None and f.method == RECORDED, key
        assert f.before_ms == pytest.approx(before) and f.after_ms == pytest.approx(after), key
        assert f.ratio == pytest.approx(before / after), key
        assert rows[key].finding and rows[key].output is None and "output not recorded" in rows[key].reason
    assert rows["batch-8"].per_image and rows["batch-32"].per_image and not rows["fp16"].per_image
    for key, (before, after) in expect.items():  # no spread recorded: only a ratio past the recorded noise ranks
        assert rows[key].ranked == (before / after >= RECORDED_NOISE), key

    comp = next(r for r in COMP if (r["model"], r["batch"], r["mode"]) == (model, 1, "reduce-overhead"))
    c = rows["compile-reduce-overhead"]
    assert (
        c.forward is not None and c.forward.before_ms == comp["eager_ms"] and c.forward.after_ms == comp["compiled_ms"]
    )
    assert c.setup_s == comp["compile_s"]
    assert c.breakeven_inferences == pytest.approx(comp["compile_s"] * 1e3 / (comp["eager_ms"] - comp["compiled_ms"]))
    assert "both " + f"{model} batch 1 fp16 channels_last" in c.reason  # the baseline the figure is against
    assert f"NOT against this run's {model} batch 1 fp32 NCHW" in c.reason
    assert f"max |d| {comp['max_abs_diff']:g}" in c.reason and c.output is None

    bf16 = rows["bf16"]
    assert bf16.status == NOT_RUN and bf16.forward is None and bf16.reason.startswith("not in the recordings")
    assert advice.source == SOURCE
    notes = " ".join(advice.notes)
    assert "median of 100 timed" in notes and "not paired" in notes and "50%" in notes
    assert "detections" in notes


def test_compile_row_at_its_own_configuration_and_missing_points() -> None:
    same = gpu_advice(GpuBaseline("yolov7", 1, "fp16", True), ALL_TOPICS, EXP, COMP)
    c = next(r for r in same.rows if r.key == "compile-reduce-overhead")
    assert c.forward is not None and "NOT against" not in c.reason
    assert {r.key for r in same.rows}.isdisjoint({"fp16", "bf16", "channels_last"})  # already fp16 channels_last
    b8 = gpu_advice(GpuBaseline("yolov7", 8, "fp32", False), ALL_TOPICS, EXP, COMP)
    rows = {r.key: r for r in b8.rows}
    assert not any(r["model"] == "yolov7" and r["batch"] == 8 and r["mode"] == "reduce-overhead" for r in COMP)
    assert (
        rows["compile-reduce-overhead"].status == NOT_RUN
        and "not in the recordings" in rows["compile-reduce-overhead"].reason
    )
    assert "batch-8" not in rows and rows["batch-32"].forward is not None
    other = gpu_advice(GpuBaseline("yolov5n", 1, "fp32", False), ALL_TOPICS, EXP, COMP)
    assert all(r.status == NOT_RUN and "not in the recordings" in r.reason for r in other.rows)


def test_candidate_with_no_finding_is_blocked() -> None:
    only_launch = ALL_TOPICS[:1]
    rows = {r.key: r for r in gpu_advice(GpuBaseline("yolov8n", 1, "fp32", False), only_launch, EXP, COMP).rows}
    cl = rows["channels_last"]
    assert cl.status == NOT_RUN and cl.forward is None and not cl.ranked
    assert cl.reason.startswith("no finding of this run points to it") and "layout-transposes" in cl.reason
    assert rows["cuda-graph"].forward is not None  # tied to the launch-bound finding
    none = gpu_advice(GpuBaseline("yolov8n", 1, "fp32", False), [], EXP, COMP)
    assert all(r.status == NOT_RUN and r.forward is None for r in none.rows)


def test_gpu_import_writes_the_recorded_advice(tmp_path: Path) -> None:
    for name, src in ((EXPERIMENTS, GPU / "gpu_experiments.json"), (COMPILED, GPU / "gpu_compile.json")):
        assert (RUN / RECORDED_DIR / name).read_bytes() == src.read_bytes()
    shipped, why = load_advice(RUN)
    assert shipped is not None and why == ""
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    again = recorded_gpu_advice(run)
    assert again is not None and again.to_dict() == shipped.to_dict()
    findings = analyse(RunData.load(RUN)).findings
    assert shipped.to_dict() == gpu_advice(GpuBaseline("yolov8n", 1, "fp32", False), findings, EXP, COMP).to_dict()
    launch = next(f.title for f in findings if f.topic == "launch-bound")
    assert {r.key: r.finding for r in shipped.rows}["cuda-graph"] == launch
    shutil.rmtree(run / RECORDED_DIR)
    assert recorded_gpu_advice(run) is None
    assert recorded_gpu_advice(run, GPU) is not None  # from a recordings folder instead
    assert recorded_gpu_advice(FIX / "rundir_small", GPU) is None  # a CPU run


# ----------------------------------------------------------------------------- the main layer table


def _gpu_ms_from_records() -> dict[int, float]:
    """Per-layer GPU ms per forward straight from the Kineto records: kernels and memsets by their layer."""
    ns: dict[int, float] = defaultdict(float)
    forwards = set()
    for line in (RUN / "passes" / "gpu" / "gpu_kineto.records.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["category"] in ("kernel", "gpu_memset") and (m := re.match(r"layer (\d+) ", r["args"].get("layer", ""))):
            ns[int(m.group(1))] += r["dur_ns"]
            forwards.add(r["args"]["forward"])
    return {i: v / len(forwards) / 1e6 for i, v in ns.items()}


ROW = re.compile(r"^│\s*(\d+)\s*│\s*(\S+)\s*│\s*(\S+)\s*│")


@pytest.mark.parametrize("width", [80, 100])
def test_main_layer_table_ranks_by_gpu_time(width: int) -> None:
    a = analyse(RunData.load(RUN))
    spec = specs(a, 30)[1]  # the main layer table, after the pipeline stages
    assert spec.title.startswith("top 23 layers by GPU time")
    console = Console(record=True, width=width)
    for part in spec_renderables(spec, console):
        console.print(part)
    text = console.export_text()
    header = next(line for line in text.splitlines() if line.startswith("┃"))
    for col in ("#", "type", "GPU ms", "GPU share", "host (launch) ms"):
        assert re.search(rf"┃\s*{re.escape(col)}\s*┃", header), (col, header)
    shown = [int(m.group(1)) for line in text.splitlines() if (m := ROW.match(line))]
    gpu = _gpu_ms_from_records()
    assert shown == sorted(gpu, key=lambda i: -gpu[i])
    host = {r.index: r.time_ms for r in a.layers.layers}
    assert shown != sorted(host, key=lambda i: -(host[i] or 0.0))  # the old ranking (host time) differs
    assert "…" not in text


def test_layers_without_gpu_time_sort_last_and_cpu_runs_are_unchanged() -> None:
    a = analyse(RunData.load(RUN))
    assert a.gpu is not None
    del a.gpu.layers["model.0"]
    spec = gpu_main_layers_spec(a, 30)
    assert spec is not None
    last = spec.rows[-1]
    assert last[:3] == ["0", "Conv", NO_GPU_TIME]
    assert any("1 layer launched no GPU kernel" in n and "0 Conv" in n for n in spec.notes)
    cpu = analyse(RunData.load(FIX / "rundir_small"))
    assert gpu_main_layers_spec(cpu, 15) is None
    assert specs(cpu, 15)[1].title.startswith("top ") and "by time" in specs(cpu, 15)[1].title
