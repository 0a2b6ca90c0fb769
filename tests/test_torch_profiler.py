"""torch.profiler collector: conversion of a recorded Kineto trace, and a real trace pass."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest
from hwprof.collectors.torch_profiler import clock as _torch_clock
from hwprof.collectors.torch_profiler import collector as tp
from hwprof.collectors.torch_profiler import convert as _torch_convert
from hwprof.collectors.torch_profiler import onednn as _torch_onednn

from hwprof.core.markers import read_markers
from hwprof.rundir.worker_files import read_config, write_config
from hwprof.schema.records import Span, read_records

FIXTURE = Path(__file__).parent / "fixtures" / "kineto"


@pytest.fixture(scope="module")
def converted() -> _torch_convert.Converted:
    sync = tp.SyncData.from_dict(json.loads((FIXTURE / "torch_profiler.sync.json").read_text()))
    flops = {int(k): v for k, v in json.loads((FIXTURE / "torch_profiler.flops.json").read_text()).items()}
    return tp.convert(
        tp.load_kineto(FIXTURE / "torch_profiler.kineto.json.gz"),
        sync,
        read_markers(FIXTURE / "markers.jsonl"),
        FIXTURE / "torch_profiler.onednn.log",
        flops,
    )


def test_every_forward_op_lies_in_a_layer(converted: _torch_convert.Converted) -> None:
    forward = [op for op in converted.ops if op.stage == "forward"]
    assert len(forward) > 500
    assert all(op.layer is not None and op.layer.startswith("model.") for op in forward)
    assert converted.summary.to_json()["forward_ops_outside_layers"] == 0
    assert {op.iteration for op in converted.ops} == {0, 1}


def test_layer_times_add_up_to_the_forward_stage(converted: _torch_convert.Converted) -> None:
    layers = sum(row["aten_self_ms"] for row in converted.metrics.layers.values())
    forward = converted.metrics.stages["forward"]["aten_self_ms"]
    assert layers == pytest.approx(forward, rel=1e-6)
    assert converted.metrics.stages["forward"]["profiler_stage_ms"] >= forward


def test_clock_is_aligned_to_the_markers(converted: _torch_convert.Converted) -> None:
    clock = converted.summary.to_json()["clock"]
    # A wrong offset would put the ranges seconds away from their markers.
    assert clock["alignment"]["layer"]["median_abs_us"] < 1000
    assert clock["alignment"]["layer"]["edges"] == 2 * 2 * 23  # B and E, 2 iterations, 23 layers
    assert clock["sync_uncertainty_ns"] < 100_000
    markers = read_markers(FIXTURE / "markers.jsonl")
    forward = [m for m in markers if m.kind == "stage" and m.name == "forward" and not m.warmup]
    first_op = min(op.start for op in converted.ops if op.stage == "forward")
    assert 0 <= first_op - forward[0].t_ns < 5_000_000


def test_kernels_ranked_by_self_time_with_onednn_labels(converted: _torch_convert.Converted) -> None:
    layers = converted.kernels["layers"]
    for rows in layers.values():
        assert [r["self_us"] for r in rows] == sorted((r["self_us"] for r in rows), reverse=True)
    conv = next(r for r in layers["model.0"] if r["name"] == "aten::mkldnn_convolution")
    assert conv["label"].startswith("convolution:")
    assert conv["shapes"][0][0] == [1, 3, 320, 320]
    onednn = converted.summary.to_json()["onednn"]
    assert onednn["primitives"] > 100 and onednn["matched"] == onednn["primitives"]
    assert onednn["iterations"] == 2  # the fixture ran with verbose on in both measured iterations
    assert onednn["isa"]
    convs = [op for op in converted.ops if any(p.kind == "convolution" for p in op.onednn)]
    assert convs and all(op.event.name == "aten::mkldnn_convolution" for op in convs)


def test_flops_and_shapes_attached(converted: _torch_convert.Converted) -> None:
    assert converted.metrics.stages["forward"]["profiler_flops"] > 1e8
    conv2d = next(r for r in converted.kernels["layers"]["model.0"] if r["name"] == "aten::conv2d")
    assert conv2d["flops"] > 0


def test_spans_nest_stage_layer_op_primitive(converted: _torch_convert.Converted) -> None:
    by_op: dict[tuple[int, int], Span] = {}
    for span in converted.spans:
        if span.category == "aten":
            by_op[(span.ts_ns, span.dur_ns)] = span
    ops = sorted(by_op.values(), key=lambda s: s.ts_ns)
    for span in converted.spans:
        if span.category != "onednn":
            continue
        parents = [op for op in ops if op.ts_ns <= span.ts_ns and span.ts_ns + span.dur_ns <= op.ts_ns + op.dur_ns]
        assert parents, span


def test_written_outputs(tmp_path: Path, converted: _torch_convert.Converted) -> None:
    names = tp.write_outputs(tmp_path, converted)
    assert names == [
        "torch_profiler.records.jsonl",
        "torch_profiler.metrics.json",
        "torch_profiler.kernels.json",
    ]
    records = list(read_records(tmp_path / names[0]))
    assert len(records) == len(converted.spans)
    assert json.loads((tmp_path / names[2]).read_text())["iterations"] == 2


def test_bad_inputs_give_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text(json.dumps({"traceEvents": []}))
    with pytest.raises(ValueError, match="not a Kineto chrome trace"):
        tp.load_kineto(tmp_path / "x.json")
    trace = tp.load_kineto(FIXTURE / "torch_profiler.kineto.json.gz")
    with pytest.raises(ValueError, match="recorded syncs"):
        _torch_clock.fit_clock(trace, tp.SyncData([[1, 2]], []))


def test_untimed_onednn_lines_are_reported(tmp_path: Path) -> None:
    log = tmp_path / "v.log"
    log.write_text(
        "onednn_verbose,v1,info,cpu,isa:Intel AVX2\n"
        "onednn_verbose,v1,primitive,exec,cpu,convolution,jit:avx2,forward_training,src:f32,,alg:x,mb1,1.5\n"
    )
    parsed = _torch_onednn.parse_onednn(log, 0)
    assert parsed.execs == [] and parsed.untimed == 1 and parsed.info["isa"] == "Intel AVX2"


def test_stdout_redirect_keeps_python_stdout(tmp_path: Path) -> None:
    """C stdio (oneDNN's printf) goes to the file, Python's print still reaches the real stdout."""
    code = textwrap.dedent(
        f"""
        import ctypes, sys
        from pathlib import Path
        from hwprof.collectors.torch_profiler.onednn import StdoutToFile
        libc = ctypes.CDLL(None)
        print("before", flush=True)
        with StdoutToFile(Path({str(tmp_path / "c.log")!r})):
            libc.printf(b"onednn_verbose,from C\\n")
            print("progress", flush=True)
        print("after", flush=True)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["before", "progress", "after"]
    assert (tmp_path / "c.log").read_text() == "onednn_verbose,from C\n"


# ----------------------------------------------------------------------------- real passes


def _run_dir(tmp_path: Path, iters: int = 2) -> Path:
    from hwprof.core.config import RunConfig
    from hwprof.workload.images import discover

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # py-spy at 200 Hz (without --native it does not pause the worker): enough samples in one
    # iteration's forward stage to see it begin and end, which its clock needs
    write_config(run_dir, RunConfig(model="yolov8n", imgsz=320, warmup=1, iters=iters, pyspy_rate=200))
    (run_dir / "images.json").write_text(json.dumps({"paths": [str(p) for p in discover(None).paths]}))
    return run_dir


def _worker(run_dir: Path, names: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "hwprof.session.worker", str(run_dir), "trace", names],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_real_trace_pass(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    done = _worker(run_dir, "torch_profiler")
    assert done.returncode == 0, done.stderr[-2000:]
    progress = [json.loads(line) for line in done.stdout.splitlines()]  # oneDNN printed elsewhere
    # where the measuring begins (done: its 1 warm-up; hwprof.session.pass_phases), then 2 measured iterations and,
    # the pass being paired (hwprof.session.paired), 2 clean ones between them
    assert [p["done"] for p in progress if p["phase"] == "measure"] == [1, 2, 3, 4, 5]
    assert [p["done"] for p in progress if p["phase"] == "warmup"] == [0, 1]  # where the warm-up begins, its end
    out = run_dir / "passes" / "trace"
    result = json.loads((out / "result.json").read_text())["collectors"]["torch_profiler"]
    assert result["status"] == "ok", result
    assert result["summary"]["forward_ops_outside_layers"] == 0
    assert result["summary"]["onednn"]["matched"] > 0
    # oneDNN verbose runs in the first measured iteration only (its labels; the second runs without)
    assert result["summary"]["onednn"]["iterations"] == 1
    markers = read_markers(out / "markers.jsonl")
    first = {m.phase: m.t_ns for m in markers if m.kind == "iteration" and m.iteration == 0 and m.measured}
    records = read_records(out / "torch_profiler.records.jsonl")  # spans, and the allocator's counter samples
    primitives = [r for r in records if getattr(r, "category", None) == "onednn"]
    assert primitives and all(first["B"] <= r.ts_ns <= first["E"] for r in primitives)

    # Independently of the converter: every aten op inside a forward range is inside a layer range.
    raw = json.loads((out / "torch_profiler.kineto.json").read_text())["traceEvents"]
    ranges: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for e in raw:
        if e.get("ph") == "X" and e["name"].startswith("hwprof:"):  # _RecordFunctionFast ranges are cpu_ops
            kind = e["name"].split(":")[1]
            ranges[kind].append((e["ts"], e["ts"] + e["dur"]))
    ops = [e for e in raw if e.get("cat") == "cpu_op" and not e["name"].startswith("hwprof:")]
    assert len(ranges["iteration"]) == 2 and len(ranges["stage"]) == 8

    def inside(e: dict[str, float], spans: list[tuple[float, float]]) -> bool:
        return any(a - 0.002 <= e["ts"] and e["ts"] + e["dur"] <= b + 0.002 for a, b in spans)

    forward = [(e["ts"], e["ts"] + e["dur"]) for e in raw if e.get("name") == "hwprof:stage:forward"]
    in_forward = [e for e in ops if inside(e, forward)]
    assert len(in_forward) > 500
    assert all(inside(e, ranges["layer"]) for e in in_forward)
    metrics = json.loads((out / "torch_profiler.metrics.json").read_text())
    model = json.loads((out / "model.json").read_text())
    assert set(metrics["layers"]) <= {row["name"] for row in model["layers"]}
    # shapes: the warm-up forward profiled with record_shapes, the measured iterations without
    assert not any("Input Dims" in e.get("args", {}) for e in ops)
    warm = json.loads((out / "torch_profiler.shapes.kineto.json").read_text())["traceEvents"]
    assert any(e.get("args", {}).get("Input Dims") for e in warm if e.get("cat") == "cpu_op")
    shapes = result["summary"]["shapes"]
    # every forward op gets its shapes; the postprocess's ops depend on the candidates NMS gets from each image
    # (ultralytics' torch NMS loops per box), so only those may go unmatched
    assert "warm-up" in shapes["method"] and shapes["matched"] + shapes["unmatched"] == len(ops)
    assert shapes["matched"] >= len(in_forward)
    kernels = json.loads((out / "torch_profiler.kernels.json").read_text())
    conv = next(k for k in kernels["layers"]["model.0"] if k["name"] == "aten::mkldnn_convolution")
    assert conv["shapes"][0][0] == [1, 3, 320, 320]


@pytest.mark.slow
def test_a_profiler_that_dies_leaves_the_other_results(tmp_path: Path) -> None:
    """The export fails for real (a folder is in the way of the trace): torch_profiler fails with the reason,
    while the pass and py-spy, attached to the same worker as the session does, still finish. (Kineto's own
    failed write, which it only logs, is export_failure's: test_file_size_limit's real collect under ulimit -f.)"""
    from hwprof.collectors.base import PassContext
    from hwprof.collectors.pyspy.collector import PySpyCollector

    from hwprof.core.markers import MarkerBus

    run_dir = _run_dir(tmp_path, iters=1)
    config = read_config(run_dir)
    ctx = PassContext(config, run_dir, "trace", MarkerBus())
    out = ctx.out_dir
    (out / "torch_profiler.kineto.json" / "in-the-way").mkdir(parents=True)
    worker = subprocess.Popen(
        [sys.executable, "-P", "-m", "hwprof.session.worker", str(run_dir), "trace", "torch_profiler,pyspy"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    tool = PySpyCollector(config).attach(worker.pid, ctx)
    assert tool is not None
    assert worker.wait(timeout=600) == 0
    pyspy = tool.finish(0)
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "ok"
    failed = result["collectors"]["torch_profiler"]
    assert failed["status"] == "failed", failed
    assert "Is a directory" in failed["reason"] and "torch_profiler.kineto.json" in failed["reason"], failed
    assert pyspy.status == "ok", pyspy.reason
    assert pyspy.to_dict()["summary"]["estimated_samples_measured"] > 0


def test_measured_ops_take_the_dims_of_their_warm_up_counterparts() -> None:
    """Matched by layer (or stage), op name and occurrence within it, whatever the iteration; an op with no
    counterpart gets none and is counted."""
    from hwprof.collectors.torch_profiler.kineto import KEvent
    from hwprof.collectors.torch_profiler.shapes import attach_dims

    def op(name: str, start: int, layer: str | None, iteration: int, dims: list[list[int]] | None = None):
        args = {"Input Dims": dims} if dims else {}
        event = KEvent(name, "cpu_op", 1, start, 1, args)
        return _torch_convert.OpRecord(event, start, 1, layer, "forward", iteration)

    warm = [
        op("aten::conv", 0, "model.0", -1, [[1, 3, 8, 8]]),
        op("aten::add", 1, "model.0", -1, [[1, 8], [1, 8]]),
        op("aten::conv", 2, "model.0", -1, [[1, 8, 8, 8]]),
        op("aten::cat", 3, None, -1, [[2]]),
    ]
    measured = [
        op(name, 10 * i + k, layer, i)
        for i in (0, 1)
        for k, (name, layer) in enumerate(
            [
                ("aten::conv", "model.0"),
                ("aten::add", "model.0"),
                ("aten::conv", "model.0"),
                ("aten::cat", None),
                ("aten::relu", "model.1"),
            ]
        )
    ]
    assert attach_dims(measured, warm) == {"matched": 8, "unmatched": 2}
    first, second = measured[0], measured[2]
    assert first.dims == [[1, 3, 8, 8]] and second.dims == [[1, 8, 8, 8]]  # the second conv: its occurrence
    assert measured[5].dims == [[1, 3, 8, 8]]  # iteration 1 matches as iteration 0 does
    assert measured[3].dims == [[2]] and measured[4].dims == []  # a stage op; relu has no counterpart
