"""compare: runs side by side with ratios, layers only between like models, runtimes and precisions layer by
layer; sweep: one collect per point, runtimes and precisions among the dimensions."""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console
from test_analysis import PEAKS, make_run

from hwprof.analysis.compare import compare_runs
from hwprof.analysis.sweep.rows import SweepPoint, load_sweep, row_from_run
from hwprof.core.kernels import KIND_JIT, KIND_OPENMP
from hwprof.hardware.machine import Peaks
from hwprof.render.compare.views import comparison_markdown, render_comparison, render_sweep, sweep_markdown
from hwprof.sweep import points as sweep_mod
from hwprof.sweep.points import SweepEvent, SweepPlan, collect_command, run_sweep

FAST = {"model.0": 80.0, "model.1": 60.0, "model.2": 20.0, "model.3": 20.0}
TORCH_POINT = SweepPoint("toyolo", "torch", "fp32", 2, 1)


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
    cmd = collect_command(SweepPoint("yolov5nu", "torch", "fp32", 2, 4), Path("/o/p"), plan.collect_args())
    assert cmd[:5] == [sys.executable, "-P", "-m", "hwprof", "collect"]
    text = " ".join(cmd)
    for part in (
        "--model yolov5nu",
        "--runtime torch",
        "--precision fp32",
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
    row = row_from_run(run, TORCH_POINT, "complete")
    assert row.forward_ms == pytest.approx(100.0) and row.latency_ms == pytest.approx(100.0)
    assert row.params_m == pytest.approx(600 / 1e6)
    assert row.size_mb == pytest.approx(600 * 4 / 2**20)
    assert row.gflops == pytest.approx(6.1)
    assert row.pct_peak == pytest.approx(100 * 6.1 / 0.1 / float(PEAKS["gflops"]))  # type: ignore[arg-type]
    assert row.bound == "compute" and row.intensity is not None
    assert row.j_per_image is None and row.energy_note.startswith("unavailable: rapl")
    assert row.peaks_source == "run.json"
    assert row.output_note == "reference" and row.max_abs_head is None and row.size_source == "FP32 parameters"


def test_row_without_peaks_uses_the_fallback(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r", peaks=None)
    row = row_from_run(run, TORCH_POINT, "complete", peaks=lambda n: {**PEAKS, "threads": n})
    assert row.pct_peak is not None and "measured by the sweep" in row.peaks_source
    bare = row_from_run(run, TORCH_POINT, "complete")
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

    def command(point: SweepPoint, out: Path, *_args: object) -> list[str]:
        model = point.model
        calls.append(f"{model}-{point.threads}-{point.batch}")
        if model == "broken":
            return [sys.executable, "-c", "import sys; print('boom: no such model'); sys.exit(2)"]
        code = "import shutil, sys; shutil.copytree(sys.argv[1], sys.argv[2])"
        return [sys.executable, "-c", code, str(template), str(out)]

    monkeypatch.setattr(sweep_mod, "collect_command", command)
    monkeypatch.setattr("hwprof.hardware.machine.measure_peaks", _fake_peaks)
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
    assert (out / "sweep.csv").read_text().startswith("model,runtime,precision,executed_precision,threads,batch,")
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


def test_compare_entry_point_formats(tmp_path: Path) -> None:
    from hwprof.render.compare.views import compare

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


def test_doctor_peaks_entry_point(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`hwprof doctor --peaks` measures through hwprof.hardware (the report's renderer only shows them)."""
    from hwprof.cli.main import main

    monkeypatch.setattr("hwprof.hardware.machine.measure_peaks", _fake_peaks)
    monkeypatch.setenv("COLUMNS", "100")
    main(["doctor", "--peaks", "--threads", "2"])
    assert "100.0 GFLOP/s FP32 with 2 threads" in capsys.readouterr().out


# ----------------------------------------------------------------------------- runtimes and precisions


def _node(name: str, kernel: str, layers: list[str], us: float, precision: str = "bf16") -> dict[str, Any]:
    return {
        "name": name,
        "op": kernel.split("_")[0],
        "kernel": kernel,
        "provider": "CPU",
        "precision": precision,
        "layers": layers,
        "children": [],
        "inserted": False,
        "median_us": us,
        "calls": 3,
    }


OPENVINO_NODES = {
    "runtime": "openvino",
    "iterations": 3,
    "nodes": [
        _node("/model.0/conv/Conv", "brgconv_avx512_bf16", ["model.0"], 120.0),
        _node("reorder_0", "jit_uni_f32", ["model.0"], 10.0, "fp32"),
        _node("/model.1/cv1/conv/Conv", "brgconv_avx512_1x1_bf16", ["model.1"], 90.0),
        _node("/model.1/Add", "jit_avx512_bf16", ["model.1"], 20.0),
        _node("/model.2/Concat+/model.3/cv2", "jit_avx512_concat_bf16", ["model.2", "model.3"], 40.0),
        _node("/model.3/Sigmoid", "ref_any_fp32", ["model.3"], 30.0, "fp32"),
    ],
}
OUTPUT_DIFF = {
    "reference": "the fused torch model in fp32 on the same input (the first batch)",
    "max_abs_head": 0.0123,
    "mean_abs_head": 0.001,
    "max_abs_reference": 480.0,
    "detections": 4,
    "detections_reference": 5,
}


def runtime_run(
    root: Path,
    runtime: str,
    precision: str,
    executed: str | None = None,
    *,
    nodes: dict[str, Any] | None = None,
    output_diff: dict[str, Any] | None = OUTPUT_DIFF,
    model_bytes: int = 3_000_000,
    **kwargs: Any,
) -> Path:
    """A finished run on `runtime`: run.json's runtime object and config, and the layers pass's node table."""
    info: dict[str, Any] = {
        "name": runtime,
        "runtime": runtime,
        "version": "2026.4.1-22982-e213a147257-releases/2026/4" if runtime == "openvino" else "1.31.1",
        "precision": precision,
        "executed_precision": executed or precision,
        "model_bytes": model_bytes,
    }
    if runtime != "torch":
        info |= {"model_file": f"model/toyolo.{precision}.onnx", "model_sha256": "ab" * 32}
    if precision == "bf16":
        info["precision_detail"] = "runtimePrecision by node time: bf16 93%, fp32 7%"
    if output_diff is not None:
        info["output_diff"] = output_diff
    extra = dict(kwargs.pop("extra_files", {}))
    if nodes is not None:
        extra["passes/layers/runtime_nodes.json"] = nodes
        extra["passes/layers/runtime.json"] = {
            **info,
            "profiler": f"{runtime} profiler",
            "executed_precision": executed or precision,
        }
    make_run(root, extra_files=extra, **kwargs)
    path = root / "run.json"
    run = json.loads(path.read_text())
    run["runtime"] = info
    run["config"] |= {"runtime": runtime, "precision": precision}
    path.write_text(json.dumps(run))
    return root


NATIVE = {
    "layers": {
        "model.0": {
            "samples": 400,
            "kernels": [
                {"name": "__kmp_fork_barrier", "kind": KIND_OPENMP, "share": 0.5, "samples": 200},
                {"name": "brgconv_avx512_fwd", "kind": KIND_JIT, "share": 0.4, "samples": 160},
            ],
        },
        "model.1": {
            "samples": 300,
            "kernels": [{"name": "jit_avx512_core_gemm", "kind": KIND_JIT, "share": 0.9, "samples": 270}],
        },
    }
}


def torch_run(root: Path) -> Path:
    """torch fp32 with a kernels pass's per-layer native kernels (model.2 and model.3 not sampled)."""
    return runtime_run(
        root,
        "torch",
        "fp32",
        output_diff={"reference": "this run is the reference", "max_abs_head": 0.0},
        model_bytes=2400,
        extra_files={"passes/layers/perf_sampling.kernels.json": NATIVE},
    )


def _runtime_comparison(tmp_path: Path) -> Any:
    a = torch_run(tmp_path / "torch")
    # openvino: clean forward 50 ms; layers pass 20 + 20 + 30 + 10 + 20 = 100 ms, scale 0.5
    b = runtime_run(
        tmp_path / "ov",
        "openvino",
        "bf16",
        nodes=OPENVINO_NODES,
        timing_forward_ms=(50.0, 50.0, 50.0),
        layer_ms=({"model.0": 20.0, "model.1": 30.0, "model.2": 10.0, "model.3": 20.0},) * 3,
    )
    # onnxruntime int8 with no output check and no profiled pass
    c = runtime_run(tmp_path / "ort", "onnxruntime", "int8", output_diff=None)
    return compare_runs([a, b, c])


def test_runtime_comparison_layer_by_layer(tmp_path: Path) -> None:
    c = _runtime_comparison(tmp_path)
    assert c.layers is not None and c.layers_refused is None
    a, b, ort = c.runs
    assert (a.runtime, a.precision, a.executed_precision, a.is_reference) == ("torch", "fp32", "fp32", True)
    assert (b.runtime, b.executed_precision, b.is_reference) == ("openvino", "bf16", False)
    assert b.output_diff is not None and b.output_diff.to_json() == OUTPUT_DIFF
    assert b.model_file == "model/toyolo.bf16.onnx"
    assert ort.output_diff is None and not ort.is_reference
    rows = {r.key: r for r in c.layers}
    # A: 40 / 30 / 10 / 10 ms; B: 10 / 15 / 5 / 10 ms
    assert rows["0 Conv"].speedups == [pytest.approx(1.0), pytest.approx(4.0), pytest.approx(1.0)]
    assert rows["1 C2f"].speedups[1] == pytest.approx(2.0)
    assert rows["3 Detect"].speedups[1] == pytest.approx(1.0)
    assert rows["0 Conv"].ratios[1] == pytest.approx(0.25)
    assert rows["0 Conv"].kernels == ["brgconv_avx512_fwd", "brgconv_avx512_bf16", ""]  # OpenMP waits skipped
    assert rows["1 C2f"].kernels[:2] == ["jit_avx512_core_gemm", "brgconv_avx512_1x1_bf16"]
    assert rows["2 Concat"].kernels[:2] == ["", "jit_avx512_concat_bf16"]  # only in a fused node: its kernel
    assert rows["3 Detect"].kernels[1] == "ref_any_fp32"
    fused = ["/model.2/Concat+/model.3/cv2"]
    assert [r.fused for r in c.layers] == [[[], [], []], [[], [], []], [[], fused, []], [[], fused, []]]
    assert c.fused[0] == [] and c.fused[2] == []
    assert [(g.node, g.layers, g.kernel, g.time_ms) for g in c.fused[1]] == [
        (fused[0], ["model.2", "model.3"], "jit_avx512_concat_bf16", pytest.approx(0.04))
    ]
    assert "perf samples" in a.kernel_source
    assert "openvino profiler" in b.kernel_source and "layers pass" in b.kernel_source
    assert ort.kernel_source.startswith("not recorded: no pass profiled onnxruntime")
    doc = c.to_dict()
    assert doc["layers"][0]["speedups"][1] == pytest.approx(4.0)
    assert doc["fused"][1][0]["layers"] == ["model.2", "model.3"]


def test_runtime_comparison_rendered(tmp_path: Path) -> None:
    c = _runtime_comparison(tmp_path)
    text = comparison_markdown(c)
    for part in (
        "| runtime | torch 1.31.1 | openvino 2026.4.1 | onnxruntime 1.31.1 |",
        "| precision executed | fp32 | bf16 | int8 |",
        "| max \\|Δ\\| head vs torch fp32 | reference | 0.0123 of 480 | not measured |",
        "| detections vs torch fp32 | reference | 4 vs 5 | not measured |",
        "| forward speed-up vs A | 1.00x | 2.00x | 1.00x |",
        "| layer | A ms | A share | B ms | B share | B faster | C ms | C share | C faster |",
        "| 0 Conv | 40.00 | 40.0% | 10.00 | 20.0% | 4.00x | 40.00 | 40.0% | 1.00x |",
        "| 2 Concat | 10.00 | 10.0% | 5.00* |",
        "### kernel per layer and run",
        "| 0 Conv | brgconv_avx512_fwd | brgconv_avx512_bf16 | - |",
        "| 2 Concat | - | jit_avx512_concat_bf16* | - |",
        "### runtime nodes fused from several layers",
        "| B | /model.2/Concat+/model.3/cv2 | 2, 3 | jit_avx512_concat_bf16 | 0.040 |",
        "A (torch): no node fused across layers recorded",
        "B precision: runtimePrecision by node time: bf16 93%, fp32 7%",
        "C: its output against torch fp32 was not measured",
        "C kernel: not recorded: no pass profiled onnxruntime",
        "random-init weights (B, C): detections are meaningless",
    ):
        assert part in text, part
    for width in (80, 120):
        buf = io.StringIO()
        render_comparison(c, Console(file=buf, width=width, color_system=None))
        out = buf.getvalue()
        assert all(cell_len(line.rstrip()) <= width for line in out.splitlines())
        assert "runtime nodes fused from several layers" in out and "B faster" in out
        assert "reference" in out and "4 vs 5" in out


def test_torch_fp32_runs_keep_the_plain_header(tmp_path: Path) -> None:
    """Runs that are all torch fp32 (old ones have no runtime object) show no runtime rows or tables."""
    c = compare_runs([make_run(tmp_path / "a"), torch_run(tmp_path / "b")])
    text = comparison_markdown(c)
    assert "| runtime |" not in text and "fused from several layers" not in text
    assert c.runs[0].kernel_source.startswith("not recorded: unavailable")
    assert "### kernel per layer and run" in text  # run B has perf's kernels
    assert "| 0 Conv | - | brgconv_avx512_fwd |" in text


# ----------------------------------------------------------------------------- sweep: runtimes and precisions


def test_sweep_points_runtimes_and_skips(tmp_path: Path) -> None:
    plan = SweepPlan(
        ["m1", "m2"],
        [1],
        [1],
        tmp_path,
        runtimes=["torch", "onnxruntime", "openvino"],
        precisions=["fp32", "bf16", "int8"],
    )
    plan.validate()
    names = [p.name for p in plan.points()]
    assert names[:6] == [
        "m1-t1-b1",
        "m1-torch-bf16-t1-b1",
        "m1-onnxruntime-fp32-t1-b1",
        "m1-onnxruntime-int8-t1-b1",
        "m1-openvino-fp32-t1-b1",
        "m1-openvino-bf16-t1-b1",
    ]
    assert len(names) == 12 and names[6] == "m2-t1-b1"
    assert plan.skipped() == [
        "skipped torch int8: torch runs fp32, bf16, bf16-weights",
        "skipped onnxruntime bf16: onnxruntime runs fp32, int8, int8-static",
        "skipped openvino int8: openvino runs fp32, bf16",
    ]
    threads = SweepPlan(["m"], [1, 2], [1, 4], tmp_path, runtimes=["openvino"], precisions=["bf16"])
    assert [p.name for p in threads.points()] == [
        "m-openvino-bf16-t1-b1",
        "m-openvino-bf16-t1-b4",
        "m-openvino-bf16-t2-b1",
        "m-openvino-bf16-t2-b4",
    ]


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ({"runtimes": ["onnxruntime"], "precisions": ["bf16"]}, "no runtime in onnxruntime runs a precision in bf16"),
        ({"runtimes": ["tensorrt"]}, "unknown runtime 'tensorrt'"),
        ({"precisions": ["fp8"]}, "unknown precision 'fp8'"),
        ({"precisions": ["fp16"]}, "no runtime in torch runs a precision in fp16"),  # fp16: --device cuda only
        ({"runtimes": []}, "at least one runtime"),
        ({"extra_args": ["--runtime=openvino"]}, "--runtime is set by the sweep"),
    ],
)
def test_sweep_refuses_bad_runtimes(tmp_path: Path, plan: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        run_sweep(SweepPlan(["m"], [1], [1], tmp_path, **plan))


def test_sweep_cli_bad_pair_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hwprof.cli.main import main

    code = main(["sweep", "--models", "yolov8n", "--runtimes", "onnxruntime", "--precisions", "bf16"])
    assert code == 2
    assert "no runtime in onnxruntime runs a precision in bf16" in " ".join(capsys.readouterr().err.split())


def test_run_sweep_over_runtimes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand-in collects copy a prepared run per runtime; the rows carry what executed and the output check."""
    templates = {
        ("torch", "fp32"): torch_run(tmp_path / "t-torch"),
        ("openvino", "bf16"): runtime_run(tmp_path / "t-ov", "openvino", "bf16", model_bytes=12 * 2**20),
        ("onnxruntime", "int8"): runtime_run(tmp_path / "t-ort", "onnxruntime", "int8", output_diff=None),
    }
    seen: list[str] = []

    def command(point: SweepPoint, out: Path, shared: list[str]) -> list[str]:
        seen.append(point.name)
        template = templates[(point.runtime, point.precision)]
        return [sys.executable, "-c", "import shutil, sys; shutil.copytree(*sys.argv[1:])", str(template), str(out)]

    monkeypatch.setattr(sweep_mod, "collect_command", command)
    plan = SweepPlan(
        ["toyolo"],
        [2],
        [1],
        tmp_path / "sweep",
        runtimes=["torch", "openvino", "onnxruntime"],
        precisions=["fp32", "bf16", "int8"],
    )
    # the other valid pairs of this plan copy the torch run
    for pair in (("openvino", "fp32"), ("onnxruntime", "fp32"), ("torch", "bf16")):
        templates[pair] = templates[("torch", "fp32")]
    result = run_sweep(plan)
    assert seen == [
        "toyolo-t2-b1",
        "toyolo-torch-bf16-t2-b1",
        "toyolo-openvino-fp32-t2-b1",
        "toyolo-openvino-bf16-t2-b1",
        "toyolo-onnxruntime-fp32-t2-b1",
        "toyolo-onnxruntime-int8-t2-b1",
    ]
    rows = {r.name: r for r in result.rows}
    ov = rows["toyolo-openvino-bf16-t2-b1"]
    assert (ov.runtime, ov.precision, ov.executed_precision) == ("openvino", "bf16", "bf16")
    assert ov.size_mb == pytest.approx(12.0) and ov.size_source == "model/toyolo.bf16.onnx (file)"
    assert (ov.max_abs_head, ov.max_abs_reference, ov.detections, ov.detections_reference) == (0.0123, 480.0, 4, 5)
    torch_row = rows["toyolo-t2-b1"]
    assert torch_row.output_note == "reference" and torch_row.size_source == "parameters as executed"
    assert rows["toyolo-onnxruntime-int8-t2-b1"].output_note == "not measured"
    assert result.notes[:3] == [
        "skipped torch int8: torch runs fp32, bf16, bf16-weights",
        "skipped openvino int8: openvino runs fp32, bf16",
        "skipped onnxruntime bf16: onnxruntime runs fp32, int8, int8-static",
    ]
    header = (tmp_path / "sweep" / "sweep.csv").read_text().splitlines()[0]
    assert header.startswith("model,runtime,precision,executed_precision,threads,batch,run_dir")
    assert "max_abs_head" in header and "detections_reference" in header
    assert [r.to_dict() for r in load_sweep(tmp_path / "sweep").rows] == [r.to_dict() for r in result.rows]

    text = sweep_markdown(result)
    columns = "| model | runtime | latency ms | FPS | size MB | % peak | AI | bound |"
    assert columns + " max \\|Δ\\| head | detections |" in text
    assert "every point: 2 threads, batch 1, imgsz 320, 0.00 M params, 6.10 GFLOPs per image" in text
    assert "torch fp32's head values reach 480" in text
    assert "| toyolo | openvino bf16 |" in text and "| 0.0123 | 4 vs 5 |" in text
    assert "| toyolo | torch fp32 |" in text and "| reference | reference |" in text
    assert "| toyolo | torch fp32 (asked bf16) |" in text  # the copied torch fp32 run
    assert "toyolo-torch-bf16-t2-b1: bf16 asked, executed fp32" in text
    assert "| not measured | not measured |" in text
    assert "output against torch fp32 not measured for toyolo-onnxruntime-int8-t2-b1" in text
    assert "random-init weights (toyolo): detections are meaningless" in text
    assert "skipped onnxruntime bf16" in text and "% of peak is against the measured FP32 peak" in text
    for width in (80, 100):
        buf = io.StringIO()
        render_sweep(result, Console(file=buf, width=width, color_system=None))
        out = buf.getvalue()
        assert all(cell_len(line.rstrip()) <= width for line in out.splitlines())
        assert "max |Δ| head" in out and "detections" in out  # never dropped for width


def test_old_sweep_json_loads(tmp_path: Path) -> None:
    """A sweep.json written before runtimes were a dimension: its rows are torch fp32."""
    row = {"model": "m", "threads": 1, "batch": 1, "run_dir": str(tmp_path / "m-t1-b1"), "status": "complete"}
    (tmp_path / "sweep.json").write_text(json.dumps({"rows": [row], "out_root": str(tmp_path)}))
    loaded = load_sweep(tmp_path).rows[0]
    assert (loaded.runtime, loaded.precision, loaded.name) == ("torch", "fp32", "m-t1-b1")


@pytest.mark.slow
def test_real_sweep_over_runtimes(tmp_path: Path, capsys: Any) -> None:
    """`hwprof sweep` for real: torch and ONNX Runtime, fp32 and int8 (torch int8 skipped), tiny images."""
    from hwprof.cli.main import main

    out = tmp_path / "sweep"  # the user's cache (its peaks): measuring them again here cost 8-11 s of a busy host
    argv = ["sweep", "--models", "yolov8n", "--runtimes", "torch,onnxruntime", "--precisions", "fp32,int8"]
    argv += ["--threads", "1", "--imgsz", "64", "--iters", "2", "--warmup", "1", "--timeout", "300"]
    argv += ["--out", str(out), "--", "--only", "timing,flops"]
    assert main(argv) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "skipped torch int8: torch runs fp32, bf16, bf16-weights" in text
    rows = {r.name: r for r in load_sweep(out).rows}
    assert list(rows) == ["yolov8n-t1-b1", "yolov8n-onnxruntime-fp32-t1-b1", "yolov8n-onnxruntime-int8-t1-b1"]
    for row in rows.values():  # each a real `hwprof collect` child (what test_real_sweep_point checked of one)
        assert row.status == "complete", row.error
        assert row.forward_ms and row.forward_ms > 0
        assert row.latency_ms and row.fps and row.gflops == pytest.approx(8.74 * (64 / 640) ** 2, rel=0.05)
        assert row.params_m == pytest.approx(3.15, rel=0.01)
    assert rows["yolov8n-t1-b1"].output_note == "reference"
    fp32, int8 = rows["yolov8n-onnxruntime-fp32-t1-b1"], rows["yolov8n-onnxruntime-int8-t1-b1"]
    assert fp32.executed_precision == "fp32" and int8.executed_precision == "int8"
    for row in (fp32, int8):
        assert row.max_abs_head is not None and row.detections is not None and row.detections_reference is not None
    # same graph in fp32: its error is read against what another input changes (the seeded init keeps the
    # signal, so a fp32 graph on another runtime differs by rounding carried through the layers, not zero)
    from hwprof.schema.runtime_checks import PASS, output_verdict

    assert output_verdict(fp32.max_abs_head, fp32.sensitivity_head, fp32.max_abs_reference) == PASS
    assert int8.size_mb is not None and fp32.size_mb is not None and int8.size_mb < fp32.size_mb / 2
    assert "max |Δ| head" in text and "onnxruntime" in text
    c = compare_runs([out / "yolov8n-t1-b1", out / "yolov8n-onnxruntime-int8-t1-b1"])
    assert c.layers is not None and c.runs[1].output_diff is not None
    # the same table as one page, its plot embedded: a row per point (Chromium opens it in test_tables_html.py)
    page = (out / "sweep.html").read_text()
    assert f"page: {out / 'sweep.html'}" in text
    assert page.count("<tr>") == 1 + len(rows) and "onnxruntime" in page and "int8" in page
    assert page.count('src="data:image/png;base64,') == int((out / "sweep.png").exists())


def test_a_point_without_threads_uses_its_nodes_own(tmp_path: Path) -> None:
    """`hwprof sweep --ray` without --threads gave every point the driver's thread count (a 2-CPU driver
    ran its 16-CPU nodes with 2 threads); now such a point's collect gets no --threads, and its row
    reads the count the node used from the run."""
    import json
    import shutil

    from hwprof.analysis.sweep.rows import NODE_THREADS, SweepPoint, point_name, row_from_run
    from hwprof.sweep.points import SweepPlan, collect_command

    point = SweepPoint("yolov8n", "torch", "fp32", NODE_THREADS, 1)
    assert point.name == "yolov8n-tnode-b1" == point_name("yolov8n", NODE_THREADS, 1)
    command = collect_command(point, tmp_path / point.name, ["--iters", "2"])
    assert "--threads" not in command and command[command.index("--batch") + 1] == "1"
    assert "--threads" in collect_command(SweepPoint("yolov8n", "torch", "fp32", 4, 1), tmp_path, [])
    SweepPlan(["yolov8n"], [NODE_THREADS], [1], tmp_path).validate()
    with pytest.raises(ValueError, match="at least 1"):
        SweepPlan(["yolov8n"], [0], [1], tmp_path).validate()
    run_dir = tmp_path / point.name
    shutil.copytree(Path(__file__).parent / "fixtures" / "rundir_small", run_dir)
    run = json.loads((run_dir / "run.json").read_text())
    run["config"]["threads"] = 16
    (run_dir / "run.json").write_text(json.dumps(run))
    assert row_from_run(run_dir, point, "complete").threads == 16
