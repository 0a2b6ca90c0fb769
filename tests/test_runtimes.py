"""Runtimes beside PyTorch: node names to layers, profiles to spans on the run's clock, replayed markers.

Unit tests run on a recorded ONNX Runtime profile (yolov8n at 320, trimmed to three runs) and on
hand-made node lists; the slow tests collect yolov8n on ONNX Runtime and OpenVINO for real.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hwprof.analysis.runtime_nodes import layer_nodes
from hwprof.core.host_facts import current
from hwprof.core.markers import Marker
from hwprof.core.runtime_names import check_runtime_precision
from hwprof.core.spans import layer_self_ns, measured_pieces, pair_spans
from hwprof.schema.records import NodeRow
from hwprof.workload.node_layers import NodeSpan, RunSpans, charge_inserted, layers_of, replay_markers, scope_of
from hwprof.workload.runtime import RunRecord

FIXTURES = Path(__file__).parent / "fixtures" / "runtimes"
ORT_PROFILE = FIXTURES / "onnxruntime_profile_yolov8n_320.json"


# ----------------------------------------------------------------------------- names to layers


@pytest.mark.parametrize(
    ("name", "layer", "child"),
    [
        ("/model.2/cv1/conv/Conv", "model.2", "model.2.cv1"),
        ("/model.2/cv1/conv/Conv_output_0_nchwc", "model.2", "model.2.cv1"),  # ORT NCHWc rename
        ("/model.0/act/Mul/QuickGeluFusion/", "model.0", "model.0.act"),  # ORT fusion rename
        ("/model.2/m.0/cv1/conv/Conv", "model.2", "model.2.m"),  # ModuleList child: named "m" at depth 2
        ("/model.22/Concat_6", "model.22", None),  # an op directly in the layer
        ("/model.105/m.0/Conv", "model.105", "model.105.m"),
        ("images_f32_abcd_bf16_acdb_/model.0/conv/Conv/WithoutBiases", "model.0", "model.0.conv"),  # OpenVINO reorder
    ],
)
def test_scope_of_exported_names(name: str, layer: str, child: str | None) -> None:
    scope = scope_of(name)
    assert scope is not None
    assert (scope.layer, scope.child) == (layer, child)


def test_nodes_without_scope_have_no_layer() -> None:
    assert scope_of("ReorderInput") is None
    assert scope_of("Identity_85") is None
    assert layers_of(["ReorderOutput", "/model.3/Concat"]) == (("model.3",), ())


def test_fused_originals_keep_every_layer_in_order() -> None:
    layers, children = layers_of(["/model.4/cv2/conv/Conv/WithoutBiases", "/model.5/Add", "/model.4/cv2/act/Mul"])
    assert layers == ("model.4", "model.5")
    assert children == ("model.4.cv2",)


def test_inserted_nodes_are_charged_to_the_next_layer() -> None:
    nodes = [
        NodeSpan("ReorderInput", 0, 1),
        NodeSpan("/model.0/conv/Conv", 1, 5, ("model.0",)),
        NodeSpan("ReorderOutput", 5, 6),
        NodeSpan("/model.1/conv/Conv", 6, 9, ("model.1",)),
        NodeSpan("tail", 9, 10),
    ]
    charge_inserted(nodes)
    assert [n.layers for n in nodes] == [("model.0",), ("model.0",), ("model.1",), ("model.1",), ()]
    assert [n.inserted for n in nodes] == [True, False, True, False, False]


# ----------------------------------------------------------------------------- replayed markers


def _run(nodes: list[NodeSpan], iteration: int = 0) -> RunSpans:
    return RunSpans(iteration, False, nodes)


def test_replay_makes_one_span_per_stretch_and_none_for_fused_groups() -> None:
    run = _run(
        [
            NodeSpan("a", 100, 200, ("model.0",), ("model.0.conv",)),
            NodeSpan("b", 200, 260, ("model.0",), ("model.0.act",)),
            NodeSpan("fused", 260, 400, ("model.1", "model.2")),
            NodeSpan("c", 400, 450, ("model.2",)),
            NodeSpan("d", 450, 500, ("model.0",)),  # layer 0 again later: a second span, same iteration
        ]
    )
    markers = replay_markers(run, depth=1)
    assert all(m.replayed and m.kind == "layer" for m in markers)
    spans = pair_spans(markers)
    assert [(s.name, s.start_ns, s.end_ns) for s in spans] == [
        ("model.0", 100, 260),
        ("model.2", 400, 450),
        ("model.0", 450, 500),
    ]
    assert layer_self_ns(spans)["model.0"] == [160, 50]
    nested = pair_spans(replay_markers(run, depth=2))
    assert ("model.0.conv", 100, 200) in [(s.name, s.start_ns, s.end_ns) for s in nested]
    assert ("model.0.act", 200, 260) in [(s.name, s.start_ns, s.end_ns) for s in nested]


def test_replayed_markers_round_trip_and_old_rows_still_read() -> None:
    marker = Marker("layer", "B", "model.3", 10, 2, False, 3, replayed=True)
    assert Marker.from_row(marker.to_row()) == marker
    assert Marker.from_row(["layer", "B", "model.3", 10, 2, 0, 3]).replayed is False


def test_pieces_take_replayed_markers_by_time_not_file_order() -> None:
    live = [
        Marker("iteration", "B", "iteration", 0, 0, False),
        Marker("stage", "B", "forward", 10, 0, False),
        Marker("stage", "E", "forward", 100, 0, False),
        Marker("iteration", "E", "iteration", 110, 0, False),
    ]
    replayed = replay_markers(_run([NodeSpan("n", 20, 80, ("model.5",))]))
    pieces = measured_pieces(live + replayed)
    inside = [p for p in pieces if p.layer == "model.5"]
    assert [(p.start_ns, p.end_ns, p.stage) for p in inside] == [(20, 80, "forward")]


# ----------------------------------------------------------------------------- ONNX Runtime profile


def _records_for(events: list[dict], origin_ns: int, gap_us: float) -> list[RunRecord]:
    """run() calls that start gap_us before and end gap_us after each model_run (first: a one-off check)."""
    runs = sorted((e for e in events if e.get("name") == "model_run"), key=lambda e: e["ts"])
    out = []
    for k, e in enumerate(runs):
        start = origin_ns + round((e["ts"] - gap_us) * 1000)
        end = origin_ns + round((e["ts"] + e["dur"] + gap_us) * 1000)
        out.append(RunRecord(start, end, None if k == 0 else k - 1, k == 1))
    return out


def test_ort_profile_becomes_node_spans_on_the_monotonic_clock() -> None:
    from hwprof.workload.rt_onnxruntime import parse_ort_profile, profile_from_events

    events = json.loads(ORT_PROFILE.read_text())
    origin = 5_000_000_000
    profile = profile_from_events(parse_ort_profile(events), origin, _records_for(events, origin, gap_us=15.0))
    assert [(r.iteration, r.warmup) for r in profile.runs] == [(0, True), (1, False)]  # the check run is not replayed
    measured = profile.runs[1]
    run_event = sorted((e for e in events if e.get("name") == "model_run"), key=lambda e: e["ts"])[2]
    lo = origin + run_event["ts"] * 1000
    hi = lo + run_event["dur"] * 1000
    assert all(lo <= n.start_ns <= n.end_ns <= hi for n in measured.nodes)
    assert len(measured.nodes) == sum(1 for e in events if e.get("cat") == "Node") // 3
    conv = profile.nodes["/model.2/cv1/conv/Conv_output_0_nchwc"]
    assert (conv.op, conv.kernel, conv.provider, conv.precision) == (
        "Conv",
        "Conv (nchwc)",
        "CPUExecutionProvider",
        "fp32",
    )
    assert conv.layers == ("model.2",)
    assert profile.nodes["ReorderInput"].inserted  # NCHWc layout reorders: charged to the next layer
    layers = {layer for n in measured.nodes for layer in n.layers}
    assert layers == {f"model.{i}" for i in range(23)}
    assert profile.clock.start_gap_us_p50 == pytest.approx(15.0, abs=0.01)
    assert profile.clock.end_gap_us_p50 == pytest.approx(15.0, abs=0.01)
    assert profile.clock.error_bound_us == 0.0


def test_ort_alignment_reports_runs_that_leave_their_call() -> None:
    from hwprof.workload.rt_onnxruntime import parse_ort_profile, profile_from_events

    events = json.loads(ORT_PROFILE.read_text())
    profile = profile_from_events(parse_ort_profile(events), 0, _records_for(events, 0, gap_us=-40.0))
    assert profile.clock.error_bound_us == pytest.approx(40.0, abs=0.01)


def test_ort_profile_must_match_the_recorded_runs() -> None:
    from hwprof.workload.rt_onnxruntime import parse_ort_profile, profile_from_events

    events = json.loads(ORT_PROFILE.read_text())
    with pytest.raises(ValueError, match="profiled 3 runs but 2 were made"):
        profile_from_events(parse_ort_profile(events), 0, _records_for(events, 0, 1.0)[:2])


# ----------------------------------------------------------------------------- OpenVINO placement


def test_openvino_spans_are_laid_end_to_end_and_squeezed_into_the_call() -> None:
    from hwprof.workload.rt_openvino import profile_from_runs
    from hwprof.workload.runtime import NodeInfo

    nodes = {
        "reorder": NodeInfo("reorder", "Reorder", "jit_uni_f32", "CPU", "fp32", inserted=False),
        "/model.0/conv/Conv/WithoutBiases": NodeInfo(
            "c0", "Convolution", "brgconv_avx512_bf16", "CPU", "bf16", ("model.0",)
        ),
        "/model.1/conv/Conv/WithoutBiases": NodeInfo(
            "c1", "Convolution", "brgconv_avx512_bf16", "CPU", "bf16", ("model.1",)
        ),
    }
    timings = [
        ("/model.1/conv/Conv/WithoutBiases", 300.0),
        ("reorder", 100.0),
        ("/model.0/conv/Conv/WithoutBiases", 200.0),
    ]
    records = [RunRecord(1_000_000, 1_000_000 + 700_000, 0, False), RunRecord(2_000_000, 2_000_000 + 300_000, 1, False)]
    profile = profile_from_runs([timings, timings], records, nodes)
    first, second = profile.runs
    assert [(n.name, n.start_ns - 1_000_000, n.end_ns - 1_000_000) for n in first.nodes] == [
        ("reorder", 0, 100_000),
        ("/model.0/conv/Conv/WithoutBiases", 100_000, 300_000),
        ("/model.1/conv/Conv/WithoutBiases", 300_000, 600_000),
    ]
    assert first.nodes[0].layers == ("model.0",) and first.nodes[0].inserted
    assert second.nodes[-1].end_ns == 2_000_000 + 300_000  # 600 us of nodes in a 300 us call: halved
    assert profile.clock.residual_us_max == pytest.approx(100.0)
    assert profile.clock.residual_us_min == pytest.approx(-300.0)
    assert profile.clock.runs_squeezed == 1 and profile.clock.squeeze_min == pytest.approx(0.5)


# ----------------------------------------------------------------------------- analysis


def test_layer_nodes_keep_fused_groups_apart() -> None:
    rows = [
        NodeRow("a", "Convolution", "brgconv_avx512_bf16", "CPU", "bf16", ["model.3"], median_us=300),
        NodeRow("b", "Eltwise", "jit_avx512_f32", "CPU", "fp32", ["model.3"], median_us=100),
        NodeRow("f", "Convolution", "brgconv_avx512_bf16", "CPU", "bf16", ["model.4", "model.5"], median_us=500),
        NodeRow("in", "Reorder", "ref", "CPU", "fp32", [], median_us=20),
    ]
    layers, fused, unattributed = layer_nodes(rows)
    assert layers["model.3"].time_ms == pytest.approx(0.4)
    assert layers["model.3"].kernels == [("brgconv_avx512_bf16", 0.75), ("jit_avx512_f32", 0.25)]
    assert layers["model.3"].precision == "mixed: bf16 75%, fp32 25%"
    assert layers["model.4"].time_ms == 0 and layers["model.4"].fused_groups == ["f"]
    assert [(g.node, g.layers, g.time_ms) for g in fused] == [("f", ["model.4", "model.5"], 0.5)]
    assert unattributed == pytest.approx(0.02)


@pytest.mark.parametrize(("runtime", "precision"), [("openvino", "int8"), ("onnxruntime", "bf16"), ("tvm", "fp32")])
def test_unsupported_runtime_or_precision_is_one_line(runtime: str, precision: str) -> None:
    with pytest.raises(ValueError) as info:
        check_runtime_precision(runtime, precision)
    assert "\n" not in str(info.value)
    assert "torch" in str(info.value)


def test_cli_refuses_an_unsupported_precision(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hwprof",
            "collect",
            "--runtime",
            "openvino",
            "--precision",
            "int8",
            "--out",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "openvino does not run precision 'int8'" in (proc.stdout + proc.stderr).replace("\n", " ")
    assert not (tmp_path / "r").exists()


# ----------------------------------------------------------------------------- real runs (slow)


COLLECT = [sys.executable, "-m", "hwprof", "collect", "--model", "yolov8n", "--imgsz", "128", "--iters", "3"]
COLLECT += ["--warmup", "1", "--no-report"]


def _collect(out: Path, *args: str) -> dict:
    proc = subprocess.run(
        [*COLLECT, "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads((out / "run.json").read_text())


@pytest.mark.slow
def test_onnxruntime_run_end_to_end(tmp_path: Path) -> None:
    from hwprof.analysis.run_analysis import analyse
    from hwprof.core.markers import read_markers
    from hwprof.rundir.reader import RunData
    from hwprof.trace.processor import availability, query_many
    from hwprof.workload.onnx_export import sha256_of

    out = tmp_path / "ort"
    run = _collect(out, "--runtime", "onnxruntime", "--only", "timing,flops,perf_events")
    info = run["runtime"]
    assert (info["name"], info["executed_precision"], info["provider"]) == (
        "onnxruntime",
        "fp32",
        "CPUExecutionProvider",
    )
    assert sha256_of(out / info["model_file"]) == info["model_sha256"]
    export = json.loads((out / "model" / "export.json").read_text())
    assert list(export) == ["fp32"]  # exported once, reused by the second pass
    assert json.loads((out / "passes/layers/runtime.json").read_text())["model_sha256"] == info["model_sha256"]
    diff = info["output_diff"]
    assert diff["max_abs_head"] < 1e-3 * max(diff["max_abs_reference"], 1.0)
    assert diff["detections"] == diff["detections_reference"]
    clock = info["profiled_passes"]["layers"]["clock"]
    assert clock["runs_checked"] == 4 and clock["error_bound_us"] < 1000

    markers = read_markers(out / "passes/layers/markers.jsonl")
    replayed = [m for m in markers if m.replayed]
    assert replayed and all(m.kind == "layer" for m in replayed)
    assert not any(m.kind == "layer" and not m.replayed for m in markers)  # no torch hooks under ORT
    readings = (out / "passes/layers/perf_events.readings.jsonl").read_text()
    assert '"layer"' not in readings  # no counter was read at a replayed marker
    assert '"stage"' in readings

    a = analyse(RunData.load(out))
    assert a.runtime is not None and a.runtime.runtime == "onnxruntime"
    assert set(a.runtime.layers) == {f"model.{i}" for i in range(23)}
    timed = [layer for layer in a.layers.top_level if layer.time_ms]
    assert len(timed) == 23
    from hwprof.render.report import render_markdown

    text = render_markdown(a)
    assert "**runtime**: onnxruntime" in text and "output vs torch fp32: " in text and "head max |Δ|" in text
    assert "runtime nodes per layer (onnxruntime, fp32)" in text and "Conv (nchwc)" in text
    if availability().available:
        got = query_many(
            out / "trace.pftrace",
            {
                "nodes": "select count(*) as n from slice s join track t on s.track_id = t.id "
                "where t.name = 'onnxruntime nodes'",
                "bad": "select count(*) as n from stats where severity in ('error', 'data_loss') and value > 0",
            },
        )
        assert got["nodes"][0]["n"] >= 3 * 100
        assert got["bad"][0]["n"] == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("runtime", "precision", "kernel_part"),
    [
        ("onnxruntime", "int8", "ConvInteger"),
        ("openvino", "fp32", "f32"),
        ("openvino", "bf16", "bf16"),
        ("torch", "bf16", None),
    ],
)
def test_reduced_precision_records_what_ran_and_its_error(
    tmp_path: Path, runtime: str, precision: str, kernel_part: str | None
) -> None:
    from hwprof.analysis.run_analysis import analyse
    from hwprof.rundir.reader import RunData

    out = tmp_path / f"{runtime}-{precision}"
    run = _collect(out, "--runtime", runtime, "--precision", precision, "--only", "timing,flops")
    info = run["runtime"]
    executed = info["executed_precision"]
    if runtime == "openvino":  # this host's OpenVINO capabilities decide what bf16 runs in (hwprof.core.host_facts)
        capabilities = current().openvino_capabilities()
        no_bf16 = precision == "bf16" and "BF16" not in capabilities
        ran = "fp32 (this CPU has no BF16 capability)" if no_bf16 else precision
        assert executed == ran, (executed, capabilities)
        assert info["precision_detail"].endswith(f"; CPU capabilities: {', '.join(capabilities)}"), info
    elif runtime == "torch" and precision == "bf16":  # autocast runs bf16 on any CPU
        mkldnn = current().torch_cpu().mkldnn
        assert executed == "bf16"
        assert f"CPU bf16 support reported by torch: {mkldnn} (mkldnn)" in info["precision_detail"], info
    else:
        assert executed == precision
    diff = info["output_diff"]
    assert diff["max_abs_head"] >= 0 and "detections" in diff
    if runtime == "openvino":
        # per-run node times (a fresh request per run): their sum is each infer() call's time, less what
        # the call does outside its nodes. How close depends on the load, not on hwprof: a preempted
        # call grows (CI: residuals up to +2.9 ms of a 6.2 ms forward, the smallest +0.14 ms), and so do
        # nodes whose threads were preempted (bf16 in CI: -1.9 to -0.7 ms of 4.0 ms; load 7.5 on 2 CPUs:
        # +11.3 ms of 26.8 ms). The check: the residuals are recorded consistently, and the run closest
        # to its call is within one forward (node times in the wrong unit would be 1000x off).
        clock = info["profiled_passes"]["layers"]["clock"]
        forward_us = run["passes"]["layers"]["forward_p50_ms"] * 1e3
        low, high = clock["residual_us_min"], clock["residual_us_max"]
        assert low <= clock["residual_us_p50"] <= high, clock
        assert clock["error_bound_us"] == max(abs(low), abs(high)), clock
        closest = 0.0 if low <= 0 <= high else min(abs(low), abs(high))
        assert closest < forward_us, clock
        assert clock["runs_checked"] >= 3, clock
    errors = json.loads((out / "model" / "layer_errors.json").read_text())["layers"]
    assert len(errors) >= 15  # most layers compared, each against torch fp32
    worst = max(e["relative"] for e in errors.values())
    reduced = precision != "fp32" and not executed.startswith("fp32")  # a CPU without BF16 runs bf16 as fp32
    assert worst > 1e-4 if reduced else worst < 1e-3  # a reduced precision moves the layers
    if precision != "fp32" and not reduced and runtime == "openvino":
        kernel_part = "f32"  # what OpenVINO runs bf16 with on such a CPU
    if kernel_part is not None:
        view = analyse(RunData.load(out)).runtime
        assert view is not None
        kernels = {k for layer in view.layers.values() for k, _ in layer.kernels}
        assert any(kernel_part in k for k in kernels), kernels


@pytest.mark.slow
@pytest.mark.parametrize(("runtime", "precision"), [("onnxruntime", "int8-static"), ("torch", "bf16-weights")])
def test_the_combined_precisions_run_and_record_what_ran(tmp_path: Path, runtime: str, precision: str) -> None:
    """int8-static: a QDQ file calibrated on the run's own images, run by integer kernels; bf16-weights: a bf16
    copy of the model (its layer hooks on it), its output checked against torch fp32."""
    out = tmp_path / precision
    run = _collect(out, "--runtime", runtime, "--precision", precision, "--only", "timing,flops")
    info = run["runtime"]
    assert info["precision"] == precision
    assert info["executed_precision"].split(" ")[0] in ("int8", "bf16"), info["executed_precision"]
    assert info["output_diff"]["max_abs_head"] >= 0
    if precision == "int8-static":
        quantized = info["quantized"]
        assert "quantize_static, QDQ" in quantized["method"] and quantized["calibration"].startswith("2 images")
        from hwprof.analysis.run_analysis import analyse
        from hwprof.rundir.reader import RunData

        view = analyse(RunData.load(out)).runtime
        assert view is not None
        kernels = {k for layer in view.layers.values() for k, _ in layer.kernels}
        assert any("QLinear" in k for k in kernels), kernels  # ORT fused the QDQ groups into integer kernels
    errors = json.loads((out / "model" / "layer_errors.json").read_text())["layers"]
    assert len(errors) >= 15 and max(e["relative"] for e in errors.values()) > 1e-4  # reduced precision moved them
    assert run["passes"]["layers"]["forward_p50_ms"] > 0  # the layer hooks ran on the copy the forward uses


def test_ort_fused_node_producing_another_layers_output_spans_both(tmp_path: Path) -> None:
    from onnx import TensorProto, helper, save

    from hwprof.workload.rt_onnxruntime import fused_layers, parse_ort_profile, profile_from_events

    def graph_file(name: str, nodes: list) -> Path:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
        y = helper.make_tensor_value_info("t4", TensorProto.FLOAT, [1])
        path = tmp_path / name
        save(helper.make_model(helper.make_graph(nodes, "g", [x], [y])), str(path))
        return path

    original = graph_file(
        "original.onnx",
        [
            helper.make_node("Relu", ["x"], ["t3"], name="/model.3/act/Relu"),
            helper.make_node("Relu", ["t3"], ["t4"], name="/model.4/Relu"),
        ],
    )
    optimized = graph_file("optimized.onnx", [helper.make_node("Relu", ["x"], ["t4"], name="/model.3/act/Relu")])
    fused = fused_layers(original, optimized)
    assert fused == {"/model.3/act/Relu": ("model.4",)}
    events = [
        {"cat": "Session", "name": "model_run", "ts": 0, "dur": 100},
        {"cat": "Node", "name": "/model.3/act/Relu_kernel_time", "ts": 10, "dur": 50, "args": {"op_name": "Relu"}},
    ]
    profile = profile_from_events(parse_ort_profile(events), 0, [RunRecord(0, 200_000, 0, False)], fused)
    assert profile.nodes["/model.3/act/Relu"].layers == ("model.3", "model.4")
    assert replay_markers(profile.runs[0]) == []  # a fused group gets no layer span


def test_an_export_is_reused_only_for_the_same_model_and_shape(tmp_path: Path) -> None:
    import torch

    from hwprof.workload.onnx_export import export_onnx

    first = export_onnx(torch.nn.Conv2d(3, 4, 3), torch.zeros(1, 3, 8, 8), tmp_path, "a")
    again = export_onnx(torch.nn.Conv2d(3, 4, 3), torch.zeros(1, 3, 8, 8), tmp_path, "a")
    assert again.sha256 == first.sha256 and again.seconds == first.seconds  # reused, not exported again
    other = export_onnx(torch.nn.Conv2d(3, 2, 1), torch.zeros(1, 3, 8, 8), tmp_path, "b")
    assert other.path == "model/b.onnx" and other.sha256 != first.sha256
    (tmp_path / other.path).write_bytes(b"changed")
    assert export_onnx(torch.nn.Conv2d(3, 2, 1), torch.zeros(1, 3, 8, 8), tmp_path, "b").sha256 != sha_of_bytes(
        b"changed"
    )


def sha_of_bytes(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_layer_output_tensors_are_the_ones_that_leave_a_layer(tmp_path: Path) -> None:
    from onnx import TensorProto, helper, save

    from hwprof.workload.layer_error import layer_errors, layer_output_tensors, probe_model

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="/model.0/conv/Relu"),
        helper.make_node("Neg", ["a"], ["b"], name="/model.0/act/Neg"),  # stays inside layer 0
        helper.make_node("Relu", ["b"], ["c"], name="/model.1/Relu"),
        helper.make_node("Add", ["b", "c"], ["y"], name="/model.2/Add"),
    ]
    path = tmp_path / "m.onnx"
    save(helper.make_model(helper.make_graph(nodes, "g", [x], [y])), str(path))
    tensors = layer_output_tensors(path)
    assert tensors == {"model.0": "b", "model.1": "c", "model.2": "y"}
    added = probe_model(path, tmp_path / "probe.onnx", list(tensors.values()))
    assert sorted(added) == ["b", "c"]  # y is already an output

    import torch

    errors = layer_errors({"model.0": torch.tensor([2.0, -4.0])}, {"model.0": torch.tensor([2.5, -4.0])})
    assert errors["model.0"] == {"max_abs": 0.5, "max_abs_reference": 4.0, "relative": 0.125}


def test_ort_int8_is_recorded_only_when_integer_ops_are_there(tmp_path: Path) -> None:
    from onnx import TensorProto, helper, save

    from hwprof.workload.rt_onnxruntime import executed_precision, graph_ops

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    path = tmp_path / "fp32.onnx"
    save(helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])), str(path))
    assert graph_ops(path) == {"Relu"}
    assert executed_precision(graph_ops(path), "int8") == "fp32 (no integer kernel ran)"
    assert executed_precision({"DynamicQuantizeLinear", "ConvInteger"}, "int8") == "int8"
    assert executed_precision({"Conv"}, "fp32") == "fp32"
    # a static (QDQ) file: integer kernels appear when ORT fuses it, which only the profile shows
    assert executed_precision({"QuantizeLinear", "DequantizeLinear", "Conv"}, "int8-static").startswith("int8 (QDQ")
    assert executed_precision({"QLinearConv"}, "int8-static") == "int8"


def test_openvino_is_imported_without_its_telemetry() -> None:
    """`import openvino` sends a usage event through openvino_telemetry from a forked process (issue 17:
    the fork outlived the worker under Scalene); hwprof imports it with OpenVINO's no-op stub instead."""
    pytest.importorskip("openvino")
    code = (
        "import sys; from hwprof.core.runtime_names import import_runtime; import_runtime('openvino'); "
        "from openvino.tools.ovc import telemetry_utils; "
        "print(telemetry_utils.tm.__name__, sys.modules.get('openvino_telemetry'))"
    )
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["openvino.tools.ovc.telemetry_stub", "None"]


@pytest.mark.parametrize(
    ("runtime", "device", "expected", "profiled"),
    [
        ("torch", "cpu", "TorchRuntime", False),
        ("torch", "cuda:0", "CudaTorchRuntime", False),
        ("onnxruntime", "cpu", "OnnxRuntime", True),
        ("openvino", "cpu", "OpenVinoRuntime", True),
    ],
)
def test_runtimes_register_themselves_and_the_loader_picks_by_name_and_device(
    runtime: str, device: str, expected: str, profiled: bool, tmp_path: Path
) -> None:
    """runtime.py imports no runtime; each registers itself, and make_runtime picks one (torch's profiler is
    never driven: it gets profile=False)."""
    from hwprof.core.config import RunConfig
    from hwprof.workload import runtime as runtime_module
    from hwprof.workload.runtimes import make_runtime

    chosen = make_runtime(RunConfig(runtime=runtime, device=device), None, tmp_path, tmp_path, profile=True)  # type: ignore[arg-type]
    assert type(chosen).__name__ == expected
    assert chosen.profile is profiled
    assert (runtime, device.split(":")[0]) in runtime_module.RUNTIMES
    assert "workload.rt_" not in Path(runtime_module.__file__).read_text()


RUNS_ON = {
    "torch fp16 cpu": False,
    "torch fp16 cuda:0": True,
    "torch bf16 cpu": True,
    "onnxruntime int8 cpu": True,
    "onnxruntime fp32 cuda": False,
    "openvino int8 cpu": False,
}


@pytest.mark.parametrize("case", sorted(RUNS_ON))
def test_runs_on_agrees_with_the_checks(case):
    """One rule for doctor's table, the sweep's plan and collect's refusal."""
    from hwprof.core.runtime_names import check_runtime_precision, runs_on

    runtime, precision, device = case.split()
    assert runs_on(runtime, precision, device) is RUNS_ON[case]
    if RUNS_ON[case]:
        check_runtime_precision(runtime, precision, device)
    else:
        with pytest.raises(ValueError):
            check_runtime_precision(runtime, precision, device)
