"""Analysis on hand-built run directories: scaling, roofline, counters, energy, findings, missing data.

`make_run` writes a run directory the way the session does (markers.jsonl per pass, model.json,
metric tables, run.json through hwprof.session.finish.finalize), with times chosen so every expected
figure can be worked out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hwprof.analysis.availability import collector_missing
from hwprof.analysis.finding import Finding, index_ranges
from hwprof.analysis.layers.report import build_layer_report
from hwprof.analysis.roofline import COMPUTE, MEMORY, Roof, roof_from_run
from hwprof.analysis.run_analysis import analyse
from hwprof.analysis.stages import StageRow
from hwprof.analysis.types import by_type
from hwprof.core.markers import Marker
from hwprof.render.overhead_section import overhead_spec
from hwprof.rundir.reader import SCHEMA_VERSION, RunData
from hwprof.schema.host import PeaksDoc
from hwprof.schema.records import MetricTables
from hwprof.schema.run import RunDoc
from hwprof.session.finish import finalize

MS = 1_000_000
# name, type, params, flops, in_bytes, out_bytes, weight_bytes
LAYERS: list[tuple[str, str, int, float, int, int, int]] = [
    ("model.0", "Conv", 100, 4.0e9, 10_000_000, 10_000_000, 400),  # AI ~200: compute
    ("model.1", "C2f", 200, 2.0e9, 10_000_000, 10_000_000, 800),  # AI ~100: compute
    ("model.2", "Concat", 0, 0.0, 20_000_000, 20_000_000, 0),  # 0 FLOPs: memory
    ("model.3", "Detect", 300, 0.1e9, 5_000_000, 45_000_000, 1200),  # AI 2: memory under ridge 10
]
PEAKS = {
    "gflops": 100.0,
    "gbps": 10.0,
    "threads": 2,
    "logical_cpus": 2,
    "load_avg_1m": 0.1,
    "gflops_method": "test matmul",
    "gbps_method": "test triad",
}
PERF_UNAVAILABLE = {
    "status": "ok",
    "reason": "counted task-clock only",
    "fix": "enable the vPMU",
    "pass": "layers",
    "summary": {
        "unavailable": {
            "cycles": {"reason": "no PMU in this VM", "fix": "enable the vPMU"},
            "instructions": {"reason": "no PMU in this VM", "fix": "enable the vPMU"},
            "LLC-load-misses": {"reason": "no PMU in this VM", "fix": "enable the vPMU"},
        }
    },
}
RAPL_UNAVAILABLE = {
    "status": "unavailable",
    "reason": "no powercap driver",
    "fix": "sudo modprobe intel_rapl_msr",
    "pass": "layers",
}


def _write_markers(path: Path, markers: list[Marker]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(m.to_row()) + "\n" for m in markers))


def _iteration(
    t: int, it: int, warmup: bool, layer_ms: dict[str, float] | None, forward_ms: float, gap_ms: float
) -> tuple[list[Marker], int]:
    """One pipeline iteration from t: load 2 ms, preprocess 3 ms, forward, postprocess 1 ms."""
    out = [Marker("iteration", "B", "iteration", t, it, warmup)]
    for stage, dur in (("load", 2.0), ("preprocess", 3.0)):
        out += [
            Marker("stage", "B", stage, t, it, warmup),
            Marker("stage", "E", stage, t + int(dur * MS), it, warmup),
        ]
        t += int(dur * MS)
    out.append(Marker("stage", "B", "forward", t, it, warmup))
    start = t
    if layer_ms is None:
        t += int(forward_ms * MS)
    else:
        t += int(gap_ms * MS)
        for name, dur in layer_ms.items():
            if name.count(".") > 1:
                continue
            index = int(name.split(".")[1])
            out.append(Marker("layer", "B", name, t, it, warmup, index))
            child = f"{name}.cv1"
            if child in layer_ms:
                out.append(Marker("layer", "B", child, t + MS // 10, it, warmup, index))
                child_end = min(t + MS // 10 + int(layer_ms[child] * MS), t + int(dur * MS))  # inside its parent
                out.append(Marker("layer", "E", child, child_end, it, warmup, index))
            t += int(dur * MS)
            out.append(Marker("layer", "E", name, t, it, warmup, index))
    assert t >= start
    out.append(Marker("stage", "E", "forward", t, it, warmup))
    out += [
        Marker("stage", "B", "postprocess", t, it, warmup),
        Marker("stage", "E", "postprocess", t + MS, it, warmup),
    ]
    t += MS
    out.append(Marker("iteration", "E", "iteration", t, it, warmup))
    return out, t + MS


def _model_json(name: str, nested: bool) -> dict[str, Any]:
    layers = []
    for lname, ltype, params, _flops, inb, outb, wb in LAYERS:
        layers.append(
            {
                "index": int(lname.split(".")[1]),
                "name": lname,
                "type": ltype,
                "qualified_type": f"x.{ltype}",
                "params": params,
                "weight_bytes": wb,
                "depth": 1,
                "in_shapes": [[1, 8, 10, 10]],
                "out_shapes": [[1, 8, 10, 10]],
                "in_bytes": inb,
                "out_bytes": outb,
                "from": [-1],
            }
        )
    if nested:
        layers.insert(
            2,
            {
                "index": 1,
                "name": "model.1.cv1",
                "type": "Conv",
                "qualified_type": "x.Conv",
                "params": 50,
                "weight_bytes": 200,
                "depth": 2,
                "in_shapes": [[1, 8, 10, 10]],
                "out_shapes": [[1, 8, 10, 10]],
                "in_bytes": 1000,
                "out_bytes": 1000,
                "from": [-1],
            },
        )
    return {
        "name": name,
        "family": "test",
        "weights": "random init",
        "random_init": True,
        "params": 600,
        "params_fused": 600,
        "input_shape": [1, 3, 320, 320],
        "layers": layers,
    }


def flops_tables(nested: bool = False) -> MetricTables:
    tables = MetricTables(units={"flops": "FLOP", "min_bytes": "B", "intensity": "FLOP/B"})
    for lname, _t, params, flops, inb, outb, wb in LAYERS:
        mb = inb + outb + wb
        tables.layers[lname] = {
            "flops": flops,
            "params": float(params),
            "min_bytes": float(mb),
            "intensity": flops / mb,
        }
    if nested:
        tables.layers["model.1.cv1"] = {
            "flops": 1.0e9,
            "params": 50.0,
            "min_bytes": 2200.0,
            "intensity": 1.0e9 / 2200,
        }
    return tables


def make_run(
    root: Path,
    *,
    model: str = "toyolo",
    timing_forward_ms: tuple[float, ...] = (100.0, 100.0, 100.0),
    layer_ms: tuple[dict[str, float], ...] = ({"model.0": 80.0, "model.1": 60.0, "model.2": 20.0, "model.3": 20.0},)
    * 3,
    gap_ms: float = 20.0,
    collectors: dict[str, dict[str, Any]] | None = None,
    metrics: dict[str, MetricTables] | None = None,
    peaks: dict[str, Any] | None = PEAKS,
    nested: bool = False,
    extra_files: dict[str, Any] | None = None,
) -> Path:
    """A finished run: a timing pass and a layers pass with a stray forward (iteration -1) and a warm-up."""
    root.mkdir(parents=True, exist_ok=True)
    t = 1_000 * MS
    timing: list[Marker] = []
    for i, fwd in enumerate((50.0, *timing_forward_ms)):
        block, t = _iteration(t, i - 1, i == 0, None, fwd, 0.0)
        timing += block
    _write_markers(root / "passes/timing/markers.jsonl", timing)
    layers: list[Marker] = []
    # The FLOP count's forward outside any iteration: must not count.
    stray = {k: 1000.0 for k in layer_ms[0]}
    block, t = _iteration(t, -1, False, stray, 0.0, 0.0)
    layers += [m for m in block if m.kind == "layer"]
    for i, per_layer in enumerate((layer_ms[0], *layer_ms)):
        block, t = _iteration(t, i - 1, i == 0, per_layer, 0.0, gap_ms)
        layers += block
    _write_markers(root / "passes/layers/markers.jsonl", layers)
    (root / "passes/layers/model.json").write_text(json.dumps(_model_json(model, nested)))
    all_metrics = {"flops": flops_tables(nested), **(metrics or {})}
    for name, tables in all_metrics.items():
        tables.save(root / "passes/layers" / f"{name}.metrics.json")
    for rel, content in (extra_files or {}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))
    status = {
        "timing": {"status": "ok", "reason": "", "fix": "", "pass": "timing", "summary": {}},
        "flops": {
            "status": "ok",
            "reason": "",
            "fix": "",
            "pass": "layers",
            "summary": {"total_flops": sum(layer[3] for layer in LAYERS)},
        },
        "perf_events": PERF_UNAVAILABLE,
        "rapl": RAPL_UNAVAILABLE,
        "papi": {"status": "skipped", "reason": "not requested for this run", "fix": "", "pass": "layers"},
    }
    status.update(collectors or {})
    run: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "run_id": root.name,
        "status": "complete",
        "config": {
            "model": model,
            "threads": 2,
            "batch": 1,
            "imgsz": 320,
            "iters": len(timing_forward_ms),
            "warmup": 1,
        },
        "host": {
            "cpu_model": "Test CPU",
            "logical_cpus": 2,
            "torch": {"version": "2.13.0+cpu", "cpu_capability": "AVX512"},
        },
        "collectors": status,
        "passes": {
            "timing": {"status": "ok", "wall_s": 1.0, "collectors": ["timing"]},
            "layers": {"status": "ok", "wall_s": 2.0, "collectors": sorted(all_metrics)},
        },
    }
    if peaks is not None:
        run["peaks"] = peaks
    finalize(root, RunDoc.read(run, "run.json"))
    return root


@pytest.fixture
def plain_run(tmp_path: Path) -> RunData:
    return RunData.load(make_run(tmp_path / "plain"))


def _layer(report: Any, name: str) -> Any:
    return next(r for r in report.layers if r.name == name)


def _stage(a: Any, name: str) -> StageRow:
    row = a.stages.get(name)
    assert row is not None, name
    return row


# ----------------------------------------------------------------------------- time


def test_layer_times_are_shares_of_the_clean_forward(plain_run: RunData) -> None:
    report = build_layer_report(plain_run)
    # layers pass: forward = 20 gap + 80 + 60 + 20 + 20 = 200 ms; timing forward p50 = 100 ms
    assert report.time_pass == "layers"
    assert report.time_iterations == 3  # the warm-up and the stray iteration -1 forward are not counted
    assert report.forward_ms == pytest.approx(100.0)
    assert report.source_forward_ms == pytest.approx(200.0)
    assert report.scale == pytest.approx(0.5)
    assert _layer(report, "model.0").share == pytest.approx(0.4)
    assert _layer(report, "model.0").time_ms == pytest.approx(40.0)
    assert _layer(report, "model.0").time_raw_ms == pytest.approx(80.0)
    assert _layer(report, "model.1").time_ms == pytest.approx(30.0)
    assert report.outside_ms == pytest.approx(10.0)
    assert report.outside_ms is not None
    total = sum(r.time_ms or 0.0 for r in report.layers) + report.outside_ms
    assert total == pytest.approx(report.forward_ms)
    assert "scaled" in report.time_note and "x0.500" in report.time_note


def test_shares_are_taken_per_iteration(tmp_path: Path) -> None:
    """A slow iteration (the host got busy) stretches every layer alike: shares do not move."""
    fast = {"model.0": 80.0, "model.1": 60.0, "model.2": 20.0, "model.3": 20.0}
    slow = {k: 3 * v for k, v in fast.items()}
    data = RunData.load(make_run(tmp_path / "r", layer_ms=(fast, slow, fast), gap_ms=20.0))
    report = build_layer_report(data)
    # shares: model.0 = 80/200 in fast iterations and 240/560 in the slow one
    expected = (0.4 + 0.4 + 240 / 560) / 3
    assert _layer(report, "model.0").share == pytest.approx(expected)
    assert report.outside_ms is not None and report.forward_ms
    total = sum(r.share or 0.0 for r in report.layers) + report.outside_ms / report.forward_ms
    assert total == pytest.approx(1.0)


def test_nested_layers_use_inclusive_time_for_gflops(tmp_path: Path) -> None:
    per = {"model.0": 80.0, "model.1": 60.0, "model.1.cv1": 30.0, "model.2": 20.0, "model.3": 20.0}
    data = RunData.load(make_run(tmp_path / "n", layer_ms=(per,) * 3, nested=True))
    report = build_layer_report(data)
    parent, child = _layer(report, "model.1"), _layer(report, "model.1.cv1")
    assert child.depth == 2
    assert parent.time_ms == pytest.approx(15.0)  # (60 - 30) / 200 x 100
    assert parent.time_incl_ms == pytest.approx(30.0)
    assert parent.gflops_s == pytest.approx(2.0e9 / 0.030 / 1e9)
    assert [r.name for r in report.top_level] == ["model.0", "model.1", "model.2", "model.3"]
    types = {t.type: t for t in by_type(report)}
    assert types["C2f"].time_ms == pytest.approx(30.0)  # the nested Conv is not counted again
    assert types["Conv"].count == 1


def test_no_clean_timing_pass_says_not_scaled(tmp_path: Path) -> None:
    root = make_run(tmp_path / "t")
    run = json.loads((root / "run.json").read_text())
    del run["passes"]["timing"]
    (root / "run.json").write_text(json.dumps(run))
    report = build_layer_report(RunData.load(root))
    assert report.scale is None
    assert "NOT scaled" in report.time_note
    assert _layer(report, "model.0").time_ms == pytest.approx(80.0)


# ----------------------------------------------------------------------------- roofline


def test_roofline_bound_and_percentages(plain_run: RunData) -> None:
    report = build_layer_report(plain_run)
    roof = report.roof.roof
    assert roof is not None and roof.ridge == pytest.approx(10.0)
    conv, concat, detect = _layer(report, "model.0"), _layer(report, "model.2"), _layer(report, "model.3")
    assert conv.bound == COMPUTE and concat.bound == MEMORY and detect.bound == MEMORY
    assert conv.gflops_s == pytest.approx(4.0e9 / 0.040 / 1e9)
    assert conv.pct_peak == pytest.approx(100.0)
    assert detect.intensity == pytest.approx(0.1e9 / 50_001_200)
    assert detect.attainable_gflops == pytest.approx(detect.intensity * 10.0)
    assert detect.pct_roof == pytest.approx(100 * detect.gflops_s / detect.attainable_gflops)
    assert concat.gbps == pytest.approx(40_000_000 / 0.010 / 1e9)
    for r in report.layers:
        assert r.intensity is not None
        assert (r.bound == MEMORY) == (r.intensity < roof.ridge)


def test_roof_arithmetic() -> None:
    roof = Roof(200.0, 20.0)
    assert roof.ridge == 10.0
    assert roof.attainable_gflops(5.0) == 100.0
    assert roof.attainable_gflops(50.0) == 200.0
    assert roof.bound(9.99) == MEMORY and roof.bound(10.0) == COMPUTE


def test_no_peaks_means_no_roofline_and_a_reason(tmp_path: Path) -> None:
    data = RunData.load(make_run(tmp_path / "np", peaks=None))
    a = analyse(data)
    assert a.roofline is None
    assert all(r.bound is None and r.pct_peak is None for r in a.layers.layers)
    assert "no measured machine peaks" in a.layers.missing["roofline"].reason
    assert roof_from_run(PeaksDoc.of(status="unavailable", reason="r", fix="f")).reason == "r"
    assert not [f for f in a.findings if f.kind == "roofline"]


def test_busy_host_peaks_are_flagged(tmp_path: Path) -> None:
    busy = {**PEAKS, "load_avg_1m": 9.0}
    a = analyse(RunData.load(make_run(tmp_path / "b", peaks=busy)))
    assert a.layers.roof.roof is not None and a.layers.roof.roof.busy_host
    assert any("busy host" in f.title for f in a.findings if f.kind == "caveat")


# ----------------------------------------------------------------------------- counters, energy, missing


def test_missing_counters_and_energy_are_none_with_reasons(plain_run: RunData) -> None:
    report = build_layer_report(plain_run)
    for r in report.layers:
        assert r.cpi is None and r.ipc is None and r.llc_mpki is None and r.energy_j is None
    assert "cycles, instructions could not be counted" in report.missing["counters"].reason
    assert "no PMU in this VM" in report.missing["counters"].reason
    assert report.missing["counters"].fix == "enable the vPMU"
    assert report.missing["energy"].reason == "rapl: no powercap driver"
    assert report.missing["energy"].fix == "sudo modprobe intel_rapl_msr"
    assert "torch_profiler" in report.missing["kernels"].reason


def _perf_tables(cpi: dict[str, float], mpki: dict[str, float]) -> MetricTables:
    tables = MetricTables()
    for name in cpi:
        instructions = 1e9
        tables.layers[name] = {
            "cycles": cpi[name] * instructions,
            "instructions": instructions,
            "CPI": cpi[name],
            "IPC": 1 / cpi[name],
            "LLC MPKI": mpki[name],
            "memory traffic (estimate)": mpki[name] * 1e6 * 64,
            "CPUs utilized": 1.9,
        }
    tables.stages["forward"] = {"gap.task-clock": 3.0 * MS}
    return tables


def _perf_ok() -> dict[str, Any]:
    return {"status": "ok", "reason": "", "fix": "", "pass": "layers", "summary": {}}


def test_counters_give_cpi_and_a_memory_stall_finding_only_with_high_mpki(tmp_path: Path) -> None:
    cpi = {"model.0": 0.7, "model.1": 0.8, "model.2": 2.1, "model.3": 0.6}
    mpki = {"model.0": 1.0, "model.1": 1.2, "model.2": 9.0, "model.3": 0.9}
    data = RunData.load(
        make_run(
            tmp_path / "c",
            collectors={"perf_events": _perf_ok()},
            metrics={"perf_events": _perf_tables(cpi, mpki)},
        )
    )
    a = analyse(data)
    concat = _layer(a.layers, "model.2")
    assert concat.cpi == pytest.approx(2.1) and concat.llc_mpki == pytest.approx(9.0)
    assert concat.measured_bytes == pytest.approx(9.0 * 1e6 * 64)
    assert "counters" not in a.layers.missing
    cpi_findings = [f for f in a.findings if f.kind == "counters"]
    assert len(cpi_findings) == 1
    assert "CPI 2.10 in layer 2 (Concat)" in cpi_findings[0].title
    assert "memory stalls" in cpi_findings[0].evidence
    types = {t.type: t for t in a.types}
    assert types["Concat"].cpi == pytest.approx(2.1)
    # measured traffic gives a second bound: Conv moves 64 MB for 4 GFLOPs -> 62.5 FLOP/B, compute
    conv = _layer(a.layers, "model.0")
    assert conv.measured_intensity == pytest.approx(4.0e9 / 64e6)
    assert conv.bound_measured == COMPUTE
    assert a.overheads.outside_layers_cpu_ms == pytest.approx(3.0)


def test_model_thread_counts_make_no_threads_finding_and_a_negative_gap_is_unavailable(tmp_path: Path) -> None:
    """--counter-threads model: CPUs utilized is one thread's, so it says nothing of the intra-op threads; a
    negative task-clock gap (rotated reads) is reported unavailable with its reason, never as a CPU time."""
    cpi = {"model.0": 0.7, "model.1": 0.8, "model.2": 0.9, "model.3": 0.6}
    mpki = dict.fromkeys(cpi, 1.0)
    tables = _perf_tables(cpi, mpki)
    for row in tables.layers.values():
        row["CPUs utilized"] = 0.9
    tables.stages["forward"]["gap.task-clock"] = -2.5 * MS

    def run(name: str, summary: dict[str, Any]) -> Any:
        perf = {**_perf_ok(), "summary": summary}
        return analyse(
            RunData.load(make_run(tmp_path / name, collectors={"perf_events": perf}, metrics={"perf_events": tables}))
        )

    every_thread = run("all", {})
    assert any(f.topic == "threads-idle" for f in every_thread.findings)
    model = run("model", {"counter_threads": "model"})
    assert not any(f.topic and f.topic.startswith("threads") for f in model.findings)
    assert model.overheads.outside_layers_cpu_ms is None
    missing = model.overheads.missing["outside_layers_cpu"]
    assert "negative (-2.50 ms)" in missing.reason and "--counter-reads every" in missing.fix
    notes = " ".join(overhead_spec(model).notes)
    assert "CPU (perf task-clock gap) unavailable: the forward's task-clock" in notes and "-2.50 ms CPU" not in notes


def test_high_cpi_without_high_mpki_is_not_called_memory_stalls(tmp_path: Path) -> None:
    cpi = {"model.0": 0.7, "model.1": 0.8, "model.2": 2.1, "model.3": 0.6}
    mpki = {"model.0": 1.0, "model.1": 1.2, "model.2": 1.1, "model.3": 0.9}
    data = RunData.load(
        make_run(
            tmp_path / "c2",
            collectors={"perf_events": _perf_ok()},
            metrics={"perf_events": _perf_tables(cpi, mpki)},
        )
    )
    finding = next(f for f in analyse(data).findings if f.kind == "counters")
    assert "memory stalls" not in finding.evidence
    assert "not cache misses" in finding.evidence


def test_rapl_energy_per_stage_and_layer(tmp_path: Path) -> None:
    rapl = MetricTables(
        layers={"model.0": {"energy_J": 0.5}},
        stages={"forward": {"energy_J": 2.0}, "iteration": {"energy_J": 2.4}},
        units={"energy_J": "J"},
    )
    status = {
        "status": "ok",
        "reason": "",
        "fix": "",
        "pass": "layers",
        "summary": {
            "per_inference": {"J_per_inference": 2.4, "avg_W": 20.0},
            "per_layer": {"reported": 1, "withheld": 3},
        },
    }
    a = analyse(RunData.load(make_run(tmp_path / "e", collectors={"rapl": status}, metrics={"rapl": rapl})))
    assert a.stages.j_per_image == pytest.approx(2.4)
    assert _stage(a, "forward").energy_j == pytest.approx(2.0)
    assert _stage(a, "load").energy_j is None
    assert a.stages.energy_missing is None
    assert _layer(a.layers, "model.0").energy_j == pytest.approx(0.5)
    assert _layer(a.layers, "model.1").energy_j is None
    assert "energy" not in a.layers.missing


def _doc(run: dict[str, Any]) -> RunDoc:
    return RunDoc.read({"schema_version": SCHEMA_VERSION, "status": "ok", **run}, "run.json")


def test_collector_missing_prefers_the_collector_that_ran() -> None:
    run = {
        "collectors": {
            "perf_events": PERF_UNAVAILABLE,
            "papi": {"status": "skipped", "reason": "not requested for this run"},
        }
    }
    missing = collector_missing(_doc(run), ["perf_events", "papi"], "CPI", events=("cycles",))
    assert missing.reason.startswith("cycles could not be counted (perf_events)")
    only_skipped = collector_missing(
        _doc({"collectors": {"papi": {"status": "skipped", "reason": "not requested"}}}),
        ["perf_events", "papi"],
        "CPI",
    )
    assert only_skipped.reason == "papi skipped: not requested"
    absent = collector_missing(_doc({"collectors": {}}), ["torch_profiler"], "kernels")
    assert "no torch_profiler collector" in absent.reason and absent.fix
    ran = collector_missing(_doc({"collectors": {"pyspy": {"status": "ok"}}}), ["pyspy"], "native frames")
    assert ran.reason == "pyspy ran but recorded no native frames"


# ----------------------------------------------------------------------------- kernels, frames, overhead


KERNELS = {
    "iterations": 3,
    "layers": {
        "model.0": [
            {
                "name": "aten::mkldnn_convolution",
                "label": "brg_conv_fwd:avx512_core",
                "calls": 3,
                "calls_per_iter": 1,
                "self_us": 30000.0,
            },
            {"name": "aten::silu_", "label": None, "calls": 3, "calls_per_iter": 1, "self_us": 10000.0},
        ],
        "model.3": [
            {
                "name": "aten::_slow_conv2d_forward",
                "label": None,
                "calls": 3,
                "calls_per_iter": 1,
                "self_us": 9000.0,
            },
            {"name": "aten::cat", "label": None, "calls": 3, "calls_per_iter": 1, "self_us": 1000.0},
        ],
    },
    "outside_layers": {},
}
HOTSPOTS = {
    "layers": {
        "model.0": {
            "sampled_ms_per_iter": 40.0,
            "shares": {"python": 0.05, "native": 0.55, "waiting": 0.4},
            "native": [{"function": "dnnl::brgemm (libtorch_cpu)", "ms_per_iter": 20.0, "share": 0.5}],
        },
    }
}


def test_kernels_frames_and_between_ops(tmp_path: Path) -> None:
    prof = MetricTables(
        layers={"model.0": {"aten_self_ms": 40.0, "profiler_layer_ms": 50.0}},
        stages={"forward": {"aten_self_ms": 150.0, "profiler_stage_ms": 200.0}},
    )
    ok = {"status": "ok", "reason": "", "fix": "", "pass": "trace", "summary": {}}
    data = RunData.load(
        make_run(
            tmp_path / "k",
            collectors={"torch_profiler": ok, "pyspy": ok},
            metrics={"torch_profiler": prof},
            extra_files={
                "passes/layers/torch_profiler.kernels.json": KERNELS,
                "passes/layers/pyspy.hotspots.json": HOTSPOTS,
            },
        )
    )
    a = analyse(data)
    conv = _layer(a.layers, "model.0")
    assert [k.name for k in conv.kernels] == ["aten::mkldnn_convolution", "aten::silu_"]
    assert conv.kernels[0].share == pytest.approx(0.75)
    assert conv.kernels[0].self_ms == pytest.approx(30.0)
    assert conv.kernels[0].label == "brg_conv_fwd:avx512_core"
    assert conv.frames[0].function.startswith("dnnl::brgemm") and conv.frames[0].share == 0.5
    assert conv.frame_shares["waiting"] == 0.4
    assert "kernels" not in a.layers.missing and "frames" not in a.layers.missing
    assert a.overheads.between_ops_ms == pytest.approx(50.0)
    assert a.overheads.between_ops_share == pytest.approx(0.25)
    assert a.overheads.between_ops_layers[0][:2] == ("model.0", pytest.approx(10.0))
    slow = [f for f in a.findings if f.kind == "kernels"]
    assert slow and slow[0].title.endswith("runs in layer 3")
    assert "_slow_conv2d_forward" in slow[0].title


# ----------------------------------------------------------------------------- findings


def test_findings_follow_from_the_numbers(plain_run: RunData) -> None:
    a = analyse(plain_run)
    titles = [f.title for f in a.findings]
    # model.0 40% + model.1 30% >= 50%
    assert "2 layers take 70% of forward" in titles
    movers = next(f for f in a.findings if "data" in f.title)
    assert movers.title == "layer 2 (Concat) only moves data: 10% of forward"
    memory = next(f for f in a.findings if "memory-bound" in f.title)
    assert memory.title == "layer 3 is memory-bound: 10% of forward"
    assert "ridge of 10.0 FLOP/B" in memory.evidence
    small = next(f for f in a.findings if f.kind == "stage")
    assert small.title == "load, postprocess are 1.9%, 0.9% of the pipeline: not worth optimising"
    ranked = [f.weight for f in a.findings if f.kind != "caveat"]
    assert ranked == sorted(ranked, reverse=True)
    assert a.findings[-1].kind == "caveat"  # 3 iterations: a caveat, listed after the findings
    assert not [f for f in a.findings if f.kind in ("counters", "threads", "kernels")]


def test_big_stage_finding(tmp_path: Path) -> None:
    data = RunData.load(make_run(tmp_path / "s", timing_forward_ms=(5.0, 5.0, 5.0)))
    a = analyse(data)
    big = [f for f in a.findings if f.kind == "stage" and "worth optimising beside" in f.title]
    assert sorted(f.title.split(" ")[0] for f in big) == ["load", "preprocess"]


def test_index_ranges() -> None:
    assert index_ranges([3, 0, 1, 2, 7, 9, 10]) == "0-3, 7, 9-10"
    assert index_ranges([]) == ""


def test_finding_is_plain_data() -> None:
    f = Finding("t", "e", "hotspot", 0.5, topic="data-movement")
    assert f.to_dict() == {
        "title": "t", "evidence": "e", "kind": "hotspot", "weight": 0.5, "topic": "data-movement", "layers": [],
        "sources": [], "unconfirmed": "", "unfit": [],
    }  # fmt: skip


def test_sysstat_memory_and_cores_per_stage(tmp_path: Path) -> None:
    sysstat = MetricTables(stages={"forward": {"rss_peak_bytes": 4.0e8, "cores_busy": 1.6}})
    ok = {"status": "ok", "reason": "", "fix": "", "pass": "layers", "summary": {"peak_rss_bytes": 4.1e8}}
    a = analyse(RunData.load(make_run(tmp_path / "m", collectors={"sysstat": ok}, metrics={"sysstat": sysstat})))
    assert _stage(a, "forward").rss_peak_bytes == 4.0e8
    assert _stage(a, "forward").cores_busy == 1.6
    assert _stage(a, "load").rss_peak_bytes is None
    assert a.stages.peak_rss_bytes == 4.1e8 and a.stages.process_missing is None
    bare = analyse(RunData.load(make_run(tmp_path / "n")))
    assert bare.stages.process_missing is not None
    assert "no sysstat collector" in bare.stages.process_missing.reason


def test_faster_than_peak_raises_the_roof(tmp_path: Path) -> None:
    """More in test_roof.py: the run's roof is its best layer rate where a layer beats the measured peak."""
    a = analyse(RunData.load(make_run(tmp_path / "p", peaks={**PEAKS, "gflops": 50.0})))
    assert _layer(a.layers, "model.0").pct_peak == pytest.approx(100.0)
    caveat = next(f for f in a.findings if "faster than the measured peak" in f.title)
    assert caveat.kind == "caveat" and caveat.title.startswith("2 layers ran faster")  # 100 and 67 GFLOP/s


def test_counter_checks_in_words() -> None:
    from hwprof.analysis.overhead import counter_checks

    closure = {
        "task-clock": {"sum_layers": 9.0, "gap": 1.0, "forward": 10.0, "ratio": 1.0},
        "page-faults": {"sum_layers": 9.0, "gap": 0.0, "forward": 9.1, "ratio": 0.989},
    }
    cpu = {"event_ns": 10.5e9, "process_cpu_ns": 10e9, "ratio": 1.05, "iterations": 3}
    run: dict[str, Any] = {"collectors": {"perf_events": {"status": "ok", "summary": {"checks": {}}}}}
    checks = run["collectors"]["perf_events"]["summary"]["checks"]
    checks.update(layers_plus_gap_vs_forward=closure, task_clock_vs_process_cpu=dict(cpu))
    lines = counter_checks(_doc(run))
    assert lines[0] == "perf_events: layers + gap = forward for 2 events (worst ratio 0.9890)"
    assert (
        lines[1] == "perf_events: forward task-clock 1.050x the counted threads' CPU time"
    )  # no steal figure: no verdict
    checks["task_clock_vs_process_cpu"].update(host_steal_irq_ns=0.6e9, consistent=True)
    assert counter_checks(_doc(run))[1].endswith("host steal+IRQ 6.0% of it (consistent)")
    checks["task_clock_vs_process_cpu"].update(host_steal_irq_ns=0.0, consistent=False)
    assert "OUTSIDE the band" in counter_checks(_doc(run))[1]
    assert counter_checks(_doc({"collectors": {"timing": {"status": "ok", "summary": {}}}})) == []


def test_host_steal_per_pass_becomes_a_caveat(tmp_path: Path) -> None:
    root = make_run(tmp_path / "st")
    run = json.loads((root / "run.json").read_text())
    assert set(run["passes"]) >= {"timing", "layers"}
    run["passes"]["timing"]["host_steal_share"] = 0.02  # below the caveat
    run["passes"]["layers"]["host_steal_share"] = 0.12
    (root / "run.json").write_text(json.dumps(run))
    a = analyse(RunData.load(root))
    steal = {p.name: p.host_steal_share for p in a.overheads.passes}
    assert steal["timing"] == 0.02 and steal["layers"] == 0.12
    caveat = next(f for f in a.findings if "hypervisor stole" in f.title)
    assert caveat.kind == "caveat" and caveat.title == "the hypervisor stole 12.0% of the CPUs during the layers pass"
    run["passes"]["layers"]["host_steal_share"] = 0.03
    (root / "run.json").write_text(json.dumps(run))
    assert not [f for f in analyse(RunData.load(root)).findings if "hypervisor stole" in f.title]


def test_steal_reader_on_a_recorded_proc_stat(tmp_path: Path) -> None:
    import os

    from hwprof.perf.steal import busy_ns, steal_ns, uncharged_ns

    stat = tmp_path / "stat"
    stat.write_text("cpu  1170053 0 304717 398947 8163 10 1773 35870 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    tick = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    assert steal_ns(str(stat)) == 35870 * tick
    assert uncharged_ns(str(stat)) == (10 + 1773 + 35870) * tick
    assert busy_ns(str(stat)) == (1170053 + 0 + 304717 + 10 + 1773 + 35870) * tick  # not idle, not iowait
    stat.write_text("cpu  1 2 3 4\n")  # an old kernel without the steal column
    assert steal_ns(str(stat)) is None and steal_ns(str(tmp_path / "missing")) is None
