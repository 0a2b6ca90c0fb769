"""The GPU collectors on a CPU-only host: unavailable with the reason, `--device cuda` refused with one
line; their live commands and outputs checked without a GPU (ncu's command line, the Kineto outputs
on the recorded trace)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hwprof.collectors.base import PassContext

from hwprof.core.config import RunConfig
from hwprof.core.host_facts import current
from hwprof.core.markers import MarkerBus
from hwprof.session.registry import by_name

FIX = Path(__file__).parent / "fixtures" / "gpu"
GPU_COLLECTORS = ("gpu_kineto", "nvml", "cuda_graph", "ncu", "ncu_range")
no_gpu = pytest.mark.skipif(current().nvidia_driver(), reason="this host has an NVIDIA GPU")


def test_gpu_collectors_registered_from_their_folders():
    known = by_name()
    for name in GPU_COLLECTORS:
        assert name in known
        assert known[name].__module__.startswith("hwprof.collectors.gpu.")


@pytest.mark.parametrize("name", GPU_COLLECTORS)
def test_gpu_collectors_unavailable_on_a_cpu_run(name):
    cap = by_name()[name].probe(RunConfig(counters="perf"))
    assert not cap.available
    assert "CPU" in cap.reason and cap.fix


def test_ncu_is_opt_in():
    known = by_name()
    assert not known["ncu"].wanted(RunConfig())
    assert known["ncu"].wanted(RunConfig(device="cuda", counters="ncu"))
    with pytest.raises(ValueError, match="needs --device cuda"):
        RunConfig(counters="ncu").validate()


@no_gpu
@pytest.mark.parametrize(
    "argv",
    [["collect", "--device", "cuda", "--model", "yolov8n"], ["sweep", "--device", "cuda", "--models", "yolov8n"]],
)
def test_device_cuda_refused_on_a_cpu_host(argv, capsys):
    from hwprof.cli.main import main

    assert main(argv) == 2
    out = capsys.readouterr().err
    assert "no NVIDIA GPU" in out and out.count("hwprof: error") == 1


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (RunConfig(precision="fp16"), "fp16 runs on --device cuda only"),
        (RunConfig(device="gpu0"), "--device is cpu, cuda or cuda:N"),
        (RunConfig(device="cuda", runtime="openvino"), "torch runtime only"),
    ],
)
def test_device_options_checked(config, message):
    with pytest.raises(ValueError, match=message):
        config.validate()
    RunConfig(device="cuda:1", precision="fp16", channels_last=True).validate()


@pytest.mark.parametrize(("spec", "index"), [("cuda", 0), ("cuda:0", 0), ("cuda:3", 3)])
def test_cuda_device_always_has_an_index(spec, index):
    """torch.cuda.set_device(torch.device("cuda")) raises on a real GPU (found live on an H100)."""
    from hwprof.workload.rt_cuda import indexed_device

    device = indexed_device(spec)
    assert (device.type, device.index) == ("cuda", index)


def test_ncu_command_is_the_recorded_one(tmp_path, monkeypatch):
    import hwprof.collectors.gpu.ncu.live as live

    monkeypatch.setattr(live, "ncu_binary", lambda: "/opt/ncu/ncu")
    config = RunConfig(device="cuda", counters="ncu")
    worker = ["python", "-P", "-m", "hwprof.session.worker", "run", "ncu", "ncu"]
    for name, replay in (
        ("ncu", ["--nvtx", "--nvtx-include", "measured/"]),
        ("ncu_range", ["--replay-mode", "app-range", "--nvtx", "--nvtx-include", "regex:layer .*/"]),
    ):
        collector = by_name()[name](config)
        ctx = PassContext(config, tmp_path, name, MarkerBus())
        command = collector.wrap_command(worker, ctx)
        assert command[:5] == ["/opt/ncu/ncu", "--target-processes", "all", "--clock-control", "none"]
        assert command[5 : 5 + len(replay)] == replay
        assert command[-len(worker) :] == worker
        metrics = command[command.index("--metrics") + 1].split(",")
        assert "gpu__time_duration.sum" in metrics and "dram__bytes_read.sum" in metrics
        assert collector.iteration_limit(ctx) == 1
    kernel_metrics = by_name()["ncu"].metrics
    assert "sm__sass_thread_inst_executed_op_ffma_pred_on.sum" in kernel_metrics
    assert not any("sass" in m for m in by_name()["ncu_range"].metrics)  # refused in range replay


def test_kineto_outputs_on_the_recorded_trace():
    from hwprof.collectors.gpu.kineto.attribution import attribute
    from hwprof.collectors.gpu.kineto.pass_outputs import clock_offset, metric_tables, spans
    from hwprof.collectors.gpu.kineto.trace import GPU_CATS, load_gpu_trace

    trace = load_gpu_trace(FIX / "kineto_yolov7_640_fp32.trimmed.json.gz")
    att = attribute(trace)
    offset = 123_456_789
    marks = [f.ts + offset + jitter for f, jitter in zip(trace.forwards, (0, 2000, -1000, 0, 500), strict=True)]
    clock = clock_offset(trace, marks)
    assert clock.offset_ns == offset and clock.error_ns == 2000
    tables = metric_tables(att)
    assert tables.layers["model.51"]["gpu_us"] == pytest.approx(224.66, abs=0.01)
    assert tables.stages["forward"]["gpu_idle_share"] == pytest.approx(att.idle_share)
    out = spans(trace, offset)
    gpu = [s for s in out if s.track.startswith("GPU ") and s.category in GPU_CATS]
    launches = [s for s in out if s.category == "cuda_launch"]
    assert len(gpu) == len(launches) == len(trace.activities)
    by_cat = Counter(s.category for s in out if s.track == "GPU 0 stream 7")
    assert by_cat["gpu_layer"] == len(trace.layers) == 530 and by_cat["gpu_stage"] == len(trace.forwards) == 5
    first = min(gpu, key=lambda s: s.ts_ns)
    assert first.args["layer"] == "layer 0 Conv" and first.track == "GPU 0 stream 7"
    assert {s.args["correlation"] for s in launches} == {s.args["correlation"] for s in gpu}


def test_overlapping_layer_ranges_on_one_stream():
    """SYNTHETIC (kineto_synth.py): a kernel of layer 1 that begins before layer 0's last kernel ends on the same
    stream (as launches from two threads, or overlapping timestamps, would make it; no recording has one). Layer 1's
    slice still spans exactly its kernels, on the stream's overlap track, saying which slice it overlaps, so that
    the renderer never cuts a layer slice to nest it."""
    from hwprof.collectors.gpu.kineto.pass_outputs import spans
    from hwprof.collectors.gpu.kineto.trace import parse_gpu_trace
    from kineto_synth import synthetic_pipeline_trace

    data, synth = synthetic_pipeline_trace(1)
    layer0 = [a for _, layer, a in synth.placed if layer == "layer 0 Conv"]
    layer1 = [a for _, layer, a in synth.placed if layer == "layer 1 Conv"]
    layer1[0]["ts"] = layer0[-1]["ts"] + layer0[-1]["dur"] - 0.5
    out = spans(parse_gpu_trace(data), 0)
    slices = {s.name: s for s in out if s.category == "gpu_layer"}
    assert slices["0 Conv"].track == "GPU 0 stream 7" and "overlaps" not in slices["0 Conv"].args
    moved = slices["1 Conv"]
    assert moved.track == "GPU 0 stream 7 (overlapping ranges)" and moved.args["overlaps"] == "0 Conv"
    base = data["baseTimeNanoseconds"]
    assert moved.ts_ns == base + round(layer1[0]["ts"] * 1000)
    assert moved.ts_ns + moved.dur_ns == base + round((layer1[-1]["ts"] + layer1[-1]["dur"]) * 1000)
    assert [s.track for s in out if s.category == "kernel" and s.args["layer"] == "layer 1 Conv"] == ["GPU 0 stream 7"]


def test_installs_beside_a_cuda_torch():
    """The package asks for a torch range that a CUDA build satisfies (the H100 host's 2.11.0+cu130), so
    `pip install .` there keeps it; the exact CPU build is pinned in constraints.txt only."""
    from importlib.metadata import requires

    from packaging.requirements import Requirement

    torch_req = next(Requirement(r) for r in requires("hwprof") or [] if Requirement(r).name == "torch")
    assert torch_req.specifier.contains("2.11.0+cu130", prereleases=False)
    assert torch_req.specifier.contains("2.13.0")
    assert "==" not in str(torch_req.specifier)
    constraints = Path(__file__).resolve().parents[1] / "constraints.txt"
    if constraints.exists():
        assert "torch==2.13.0" in constraints.read_text().split()


@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_gpu_kineto_live_ranges_on_the_cpu(tmp_path, monkeypatch):
    """The live capture path without a GPU: the collector's `forward` and `layer <i> <Type>` ranges, opened
    from the real layer markers of a real model, come back out of export_chrome_trace and parse as the
    recordings' ranges do, and the other stages' `stage <name>` ranges beside them (a CPU torch records no
    kernel, so the collector then says so)."""
    import torch
    from hwprof.collectors.gpu.kineto.trace import LAYER_RANGE, load_gpu_trace

    from hwprof.core.markers import attach_layer_markers
    from hwprof.workload.zoo import build_model

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    config = RunConfig(model="yolov8n", device="cuda", imgsz=64)
    built = build_model("yolov8n")
    bus = MarkerBus()
    ctx = PassContext(config, tmp_path, "gpu", bus)
    ctx.out_dir.mkdir(parents=True)

    class Pipe:
        model = built.module

    ctx.pipeline = Pipe()  # type: ignore[assignment]
    collector = by_name()["gpu_kineto"](config)
    bus.subscribe(collector.on_marker)
    attach_layer_markers(built.module, bus)
    collector.prepare(ctx)
    collector.start(ctx)
    x = torch.rand(1, 3, 64, 64)
    for i in range(2):
        bus.iteration, bus.warmup = i, False
        with bus.span("stage", "h2d"):
            y = x.clone()
        with bus.span("stage", "forward"), torch.inference_mode():
            built.module(y)
        with bus.span("stage", "postprocess"):
            y.sum()
    collector.stop(ctx)
    result = collector.close(ctx)
    assert result.status == "failed" and "no forward range with GPU activity" in result.reason
    trace = load_gpu_trace(ctx.out_dir / "gpu_kineto.trace.json.gz")
    assert len(trace.forwards) == 2
    assert [r.name for r in trace.stage_ranges()] == ["h2d", "forward", "postprocess"] * 2
    names = [r.name for r in trace.layers]
    assert len(names) == 2 * len(built.module.model)
    assert names[0] == "layer 0 Conv" and all(LAYER_RANGE.match(n) for n in names)
    assert all(f.ts <= r.ts and r.end <= f.end for f in trace.forwards for r in trace.layers if f.ts <= r.ts < f.end)
