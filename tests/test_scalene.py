"""Scalene collector: the wrapped command, parsing a recorded profile, and a real Scalene pass."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hwprof.collectors.base import PassContext
from hwprof.collectors.scalene import collector as sc
from hwprof.collectors.scalene import convert as sc_convert
from hwprof.collectors.scalene import probe as sc_probe
from hwprof.collectors.scalene.profile import window_from_json

from hwprof.core.config import RunConfig
from hwprof.core.markers import MarkerBus, read_markers
from hwprof.rundir.worker_files import write_config
from hwprof.schema.records import CounterSample, read_records

FIXTURE = Path(__file__).parent / "fixtures" / "scalene"


@pytest.fixture(scope="module")
def converted() -> sc_convert.Converted:
    window = window_from_json(json.loads((FIXTURE / "scalene.window.json").read_text()))
    return sc_convert.convert(FIXTURE / "scalene.json", read_markers(FIXTURE / "markers.jsonl"), window)


def _ctx(tmp_path: Path, config: RunConfig | None = None) -> PassContext:
    ctx = PassContext(config or RunConfig(), tmp_path, "scalene", MarkerBus())
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    return ctx


BLOCK_PYDANTIC = """
import sys

class _Block:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] == "pydantic":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, _Block)
"""
"""A sitecustomize.py that makes pydantic (one of scalene's dependencies) look not installed."""


def test_probe_reports_why_scalene_cannot_be_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """scalene installed but one of its dependencies missing: the reason is the import error and the
    fix installs that dependency (not "scalene's `run` command is not the 2.x CLI")."""
    pytest.importorskip("scalene")
    (tmp_path / "sitecustomize.py").write_text(BLOCK_PYDANTIC)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    sc_probe.probe_cli.cache_clear()
    try:
        cap = sc.ScaleneCollector.probe(RunConfig())
    finally:
        sc_probe.probe_cli.cache_clear()
    assert not cap.available
    assert "scalene is installed but cannot be imported: ModuleNotFoundError: No module named 'pydantic'" in cap.reason
    assert "2.x CLI" not in cap.reason
    assert re.fullmatch(r"\S+ -m pip install 'pydantic[<>=!~].*'", cap.fix), cap.fix


def test_a_probe_that_found_scalene_is_kept_and_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Scalene's CLI started once per environment (1.8 CPU-s of every collect that plans its pass): kept in
    hwprof's cache under its key, read back without starting it; another PYTHONPATH is another key."""
    pytest.importorskip("scalene")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    sc_probe.probe_cli.cache_clear()
    first = sc.ScaleneCollector.probe(RunConfig())
    assert first.available, first.reason
    (kept,) = (tmp_path / "hwprof").glob("scalene-probe-*.json")
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(
        sc_probe, "probe_cli", lambda command, memory: calls.append(command) or sc.Capability.unavailable("x")
    )
    again = sc.ScaleneCollector.probe(RunConfig())
    assert again.available and again.details == first.details and calls == [], "read back, Scalene not started"
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert not sc.ScaleneCollector.probe(RunConfig()).available and len(calls) == 1, "another key: probed again"
    assert [p.name for p in (tmp_path / "hwprof").glob("scalene-probe-*.json")] == [kept.name], "a failure not kept"


def test_import_errors_other_than_a_missing_dependency_reinstall_scalene() -> None:
    command = (sys.executable, "-P", "-m", "scalene")
    broken = "ImportError: cannot import name 'PositiveInt' from 'pydantic'"
    assert sc_probe.import_fix(broken, command) == sc_probe.REINSTALL
    assert sc_probe.import_fix("ModuleNotFoundError: No module named 'not_a_dependency'", command) == sc_probe.REINSTALL


def test_wrap_command_runs_the_worker_module_under_scalene(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    command = [sys.executable, "-P", "-m", "hwprof.session.worker", str(tmp_path), "scalene", "scalene"]
    wrapped = sc.ScaleneCollector(ctx.config).wrap_command(command, ctx)
    assert wrapped[wrapped.index("-m", wrapped.index("run")) + 1] == "hwprof.session.worker"
    assert wrapped[-4:] == ["---", str(tmp_path), "scalene", "scalene"]
    assert wrapped[wrapped.index("-o") + 1] == str(ctx.out_dir / "scalene.json")
    assert "--cpu-only" in wrapped and "--off" in wrapped and "--gpu" not in wrapped
    assert "--no-stacks" in wrapped  # hwprof reads no stack of Scalene's: they cost every sample an unwind
    # CPU mode: Scalene's launcher, which a fork of the collect's zygote runs (collectors/scalene/forked_cli.py)
    assert wrapped[:4] == [sys.executable, "-P", "-m", "hwprof.collectors.scalene.forked_cli"]
    assert "hwprof.collectors.scalene.forked_cli" in sc.ScaleneCollector.zygote_modules
    memory = sc.ScaleneCollector(RunConfig(scalene_memory=True)).wrap_command(command, ctx)
    assert "--memory" in memory and "--cpu-only" not in memory
    assert "PYTHONSAFEPATH=1" in memory and memory[memory.index("PYTHONSAFEPATH=1") + 1 :][:4] == [
        sys.executable,
        "-P",
        "-m",
        "scalene",
    ], "memory mode re-executes Python with Scalene's allocator: the usual command, -P kept by the variable"
    with pytest.raises(ValueError, match="can only wrap"):
        sc.ScaleneCollector(ctx.config).wrap_command(["python", "script.py"], ctx)


def test_lines_include_the_forward_call(converted: sc_convert.Converted) -> None:
    forward = [line for line in converted.lines if "self.model(batch)" in line.code]
    assert len(forward) == 1
    line = forward[0]
    assert line.stage == "forward" and line.function == "Pipeline.forward"
    assert line.native_s + line.system_s > 0 and line.samples > 0
    assert line.file.endswith("hwprof/workload/pipeline.py")
    stages = {line.stage for line in converted.lines}
    assert {"load", "preprocess", "forward"} <= stages


def test_stage_metrics(converted: sc_convert.Converted) -> None:
    stages = converted.metrics.stages
    total = {k: v["scalene_python_s"] + v["scalene_native_s"] + v["scalene_system_s"] for k, v in stages.items()}
    assert max(total, key=lambda k: total[k]) == "forward"
    assert converted.summary.to_json()["iterations"] == 30
    functions = {f.function: f for f in converted.functions}
    assert functions["Pipeline.forward"].stage == "forward"


def test_a_programs_own_stage_names_claim_the_lines_whose_samples_fall_in_them() -> None:
    """A program's stages are named by the program (--stage, hwprof.stage) or by hwprof's known functions (write,
    draw): a line of the program charged by its samples' times gets such a stage as it gets a built-in one."""
    from dataclasses import replace

    own = "letterbox_own"
    markers = [
        replace(m, name=own) if m.kind == "stage" and m.name == "preprocess" else m
        for m in read_markers(FIXTURE / "markers.jsonl")
    ]
    converted = sc_convert.convert(FIXTURE / "scalene.json", markers)
    by_time = [line for line in converted.lines if sc_convert.stage_of(line.file, line.function) is None]
    mine = [line for line in by_time if line.stage == own]
    assert mine and all(line.stage_samples[own] == max(line.stage_samples.values()) for line in mine)
    assert own in converted.metrics.stages and "preprocess" in converted.metrics.stages  # Pipeline.preprocess's own


def test_clock_needs_no_offset_and_samples_fall_in_their_stage(converted: sc_convert.Converted) -> None:
    clock = converted.summary.to_json()["clock"]
    assert clock["offset_ns"] == 0 and clock["samples_checked"] > 50
    assert clock["outside_share"] < 0.05
    assert clock["window_samples"] >= clock["samples_checked"] and clock["outside_window"] == 0


def test_layer_shares_from_sample_times(converted: sc_convert.Converted) -> None:
    shares = [row["scalene_sample_share"] for row in converted.metrics.layers.values()]
    assert len(shares) >= 10 and all(name.startswith("model.") for name in converted.metrics.layers)
    assert 0.9 < sum(shares) <= 1.0 + 1e-9
    assert "estimate" in converted.metrics.methods["scalene_sample_share"]


def test_outputs_and_memory_counters(tmp_path: Path, converted: sc_convert.Converted) -> None:
    names = sc_convert.write_outputs(tmp_path, converted)
    assert names == ["scalene.lines.json", "scalene.metrics.json"]  # no memory in a --cpu-only profile
    lines = json.loads((tmp_path / names[0]).read_text())["lines"]
    assert any(row["stage"] == "forward" for row in lines)
    data = json.loads((FIXTURE / "scalene.json").read_text())
    data.update(memory=True, samples=[[1_000_000, 12.5], [2_000_000, 13.0]])
    (tmp_path / "m.json").write_text(json.dumps(data))
    window = {"start_ns": 500, "scalene_start_ns": 1_000}
    memory = sc_convert.convert(tmp_path / "m.json", [], window_from_json(window))
    assert memory.counters == [
        CounterSample("Scalene footprint", 1_001_000, 12.5, "MB"),
        CounterSample("Scalene footprint", 2_001_000, 13.0, "MB"),
    ]
    sc_convert.write_outputs(tmp_path, memory)
    assert len(list(read_records(tmp_path / "scalene.records.jsonl"))) == 2


def test_not_a_profile(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(ValueError, match="not a Scalene JSON profile"):
        sc_convert.convert(tmp_path / "x.json", [])


def test_missing_scalene_is_unavailable() -> None:
    capability = sc.ScaleneCollector.probe(RunConfig(extra={"scalene_path": "/nonexistent/scalene"}))
    assert not capability.available
    assert "not found" in capability.reason and "pip install" in capability.fix


def test_finish_without_a_profile_fails_with_the_reason(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    (ctx.out_dir / "scalene.window.json").write_text(json.dumps({"under_scalene": False}))
    result = sc.ScaleneTool(ctx).finish(3)
    assert result.status == "failed"
    assert "did not run under Scalene" in result.reason and "status 3" in result.reason


def test_in_process_hooks_outside_scalene(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    collector = sc.ScaleneCollector(ctx.config)
    collector.start(ctx)
    collector.stop(ctx)
    result = collector.close(ctx)
    assert result.status == "failed" and "wrap_command" in result.reason


@pytest.mark.slow
def test_real_scalene_pass(tmp_path: Path) -> None:
    from hwprof.workload.images import discover

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = RunConfig(model="yolov8n", imgsz=320, warmup=1, iters=3)
    write_config(run_dir, config)
    (run_dir / "images.json").write_text(json.dumps({"paths": [str(p) for p in discover(None).paths]}))
    assert sc.ScaleneCollector.probe(config).available
    ctx = _ctx(run_dir, config)
    collector = sc.ScaleneCollector(config)
    command = [sys.executable, "-P", "-m", "hwprof.session.worker", str(run_dir), "scalene", "scalene"]
    worker = subprocess.Popen(collector.wrap_command(command, ctx), stdout=subprocess.PIPE, text=True)
    tool = collector.attach(worker.pid, ctx)
    assert tool is not None
    stdout, _ = worker.communicate(timeout=600)
    assert worker.returncode == 0
    progress = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    # 1 warm-up, 3 measured, 3 clean, and more of each as the paired pass added blocks (hwprof.session.paired.extend)
    last = [p for p in progress if p["phase"] == "measure"][-1]
    assert progress[-1]["phase"] == "closing" and last["done"] == last["total"] >= 7 and (last["done"] - 1) % 2 == 0
    clean_iterations = (last["done"] - 1) // 2
    result = tool.finish(worker.returncode)
    assert result.status == "ok", result.reason
    window = json.loads((ctx.out_dir / "scalene.window.json").read_text())
    # CPU mode profiles the process started, its environment set as Scalene asks (forked_cli): no second interpreter
    assert window["pid"] == worker.pid and not _shims_of(window["pid"]), "the pass's end removes Scalene's shims"
    lines = json.loads((ctx.out_dir / "scalene.lines.json").read_text())["lines"]
    # the model call: in the torch runtime (workload/runtime.py) since forward goes through a runtime
    forward = [row for row in lines if "self.built.module(batch)" in row["code"]]
    assert forward and forward[0]["stage"] == "forward"
    assert window["under_scalene"] and window["stop_ns"] > window["start_ns"]
    assert len(window["paused"]) == clean_iterations  # Scalene off over each clean iteration of the paired pass
    assert result.to_dict()["summary"]["clock"]["samples_checked"] > 0


CYCLES = """
import sys, time, weakref
from hwprof.collectors.scalene.collector import ScaleneCollector
from hwprof.collectors.scalene.profile import WindowFile
from hwprof.core.config import RunConfig

class Activation:
    def __init__(self):
        self.data = bytearray(1 << 20)

def forward(kept):
    activation = Activation()  # held by this frame only
    kept.append(weakref.ref(activation))
    end = time.process_time() + 0.05  # 5 of Scalene's 10 ms CPU samples
    while time.process_time() < end:
        pass

collector = ScaleneCollector(RunConfig())
collector._window = WindowFile(start_ns=time.monotonic_ns())  # as its start() under Scalene leaves it
alive = {}
for hook in (False, True):
    kept = []
    for i in range(20):
        forward(kept)
        if hook:
            collector.after_iteration(None, i)
    alive[hook] = sum(ref() is not None for ref in kept)
print("ALIVE", alive[False], alive[True])
"""


@pytest.mark.slow
def test_the_iterations_hook_frees_what_scalenes_sampling_cycles_hold(tmp_path: Path) -> None:
    """A forward's frames caught by Scalene's CPU signal handler stay in reference cycles (with every tensor
    they hold) until Python's collector runs: the collector's after_iteration frees them (yolov7 at 640: the
    worker at 2.29 GB after 24 iterations without it, 0.96 GB with it)."""
    script = tmp_path / "cycles.py"
    script.write_text(CYCLES)
    command = [
        sys.executable,
        "-m",
        "scalene",
        "run",
        "--cpu-only",
        "--no-stacks",
        "-o",
        str(tmp_path / "s.json"),
        str(script),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    said = re.search(r"ALIVE (\d+) (\d+)", done.stdout)
    assert done.returncode == 0 and said, done.stdout[-2000:] + done.stderr[-2000:]
    without, with_hook = int(said[1]), int(said[2])
    assert without > 0, "Scalene's sampling left no cycle: the hook (and this test) may go"
    assert with_hook == 0, (without, with_hook)


def _shims_of(pid: int) -> list[Path]:
    """The folders of interpreter shims Scalene's process `pid` made in the temporary folder."""
    import tempfile

    found = []
    for shims in Path(tempfile.gettempdir()).glob("scalene*"):
        with contextlib.suppress(OSError):
            if f"--pid={pid} " in (shims / "python").read_text():
                found.append(shims)
    return found


def test_only_the_shims_of_that_scalene_process_are_removed(tmp_path: Path) -> None:
    for name, pid in (("scalene_a", 4242), ("scalene_b", 42421), ("scalene_c", None)):
        (tmp_path / name).mkdir()
        if pid is not None:
            (tmp_path / name / "python").write_text(f'#!/bin/sh\npython -m scalene run --pid={pid} --- "$@"\n')
    assert sc.remove_shims(4242, tmp_path) == [tmp_path / "scalene_a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scalene_b", "scalene_c"]
