"""The callgrind counters backend: its output parsed into the shared counter tables, client requests,
finding a usable valgrind, and a real pass (deterministic instruction counts per layer)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hwprof.collectors.callgrind.dump_tables import marker_floor
from hwprof.collectors.callgrind.parse import events_present, read_parts, readings_at_markers
from hwprof.collectors.callgrind.tool import find_valgrind, last_level_geometry

from hwprof.core.markers import read_markers
from hwprof.perf.metric_tables import analyse

FIXTURES = Path(__file__).parent / "fixtures" / "callgrind"


def _recorded() -> tuple[list, list]:
    return read_parts(FIXTURES / "yolov8n_64.callgrind.out"), read_markers(FIXTURES / "yolov8n_64.markers.jsonl")


def test_parts_become_cumulative_readings_at_the_markers() -> None:
    parts, markers = _recorded()
    assert len(markers) == 56 and [p.label for p in parts[:3]] == ["0", "1", "2"]
    assert parts[-1].label == "Program termination"
    readings = readings_at_markers(parts, markers)
    assert len(readings) == len(markers)
    first, second = readings[0].counts["instructions"].value, readings[1].counts["instructions"].value
    assert second - first == parts[1].totals["Ir"]
    assert readings[0].counts["branch-misses"].value == parts[0].totals["Bcm"] + parts[0].totals["Bim"]


def test_recorded_run_gives_per_layer_tables_that_add_up() -> None:
    parts, markers = _recorded()
    events = events_present(parts)
    assert {"instructions", "L1-dcache-load-misses", "LLC-load-misses", "branch-misses"} <= set(events)
    analysis = analyse(readings_at_markers(parts, markers), dict.fromkeys(events, "count"), cpu_event="")
    layers = analysis.tables.layers
    assert set(layers) == {f"model.{i}" for i in range(23)}
    assert all(row["instructions"] > 0 for row in layers.values())
    assert "L1D MPKI" in layers["model.22"] and "branch MPKI" in layers["model.22"]
    check = analysis.closure["instructions"]
    assert check["ratio"] == pytest.approx(1.0, abs=1e-12)  # layers + gap = forward, exactly
    forward = analysis.tables.stages["forward"]["instructions"]
    assert sum(row["instructions"] for row in layers.values()) + check["gap"] == pytest.approx(forward)
    floor = marker_floor(parts)
    assert 0 < (floor.min_instructions or 0) < min(row["instructions"] for row in layers.values())


def test_client_requests_do_nothing_outside_valgrind() -> None:
    from hwprof.collectors.callgrind import client_requests as vc

    assert vc.running_on_valgrind() == 0
    assert vc.request(vc.RUNNING_ON_VALGRIND, default=7) == 7  # the default comes back untouched
    vc.dump_stats_at("outside")
    vc.start_instrumentation()
    vc.stop_instrumentation()


def test_an_old_valgrind_is_refused_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hwprof.collectors.callgrind.collector import CallgrindCollector

    from hwprof.core.config import RunConfig

    fake = tmp_path / "valgrind"
    fake.write_text("#!/bin/sh\necho valgrind-3.19.0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("HWPROF_VALGRIND", str(fake))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    found, why = find_valgrind()
    assert found is None and "valgrind 3.19" in why
    cap = CallgrindCollector.probe(RunConfig(counters="callgrind"))
    assert not cap.available and "install_valgrind.sh" in cap.fix


def test_last_level_cache_geometry_from_sysfs(tmp_path: Path) -> None:
    for index, (level, size, ways) in enumerate([(1, "32K", "8"), (2, "1024K", "8"), (3, "32768K", "16")]):
        d = tmp_path / f"index{index}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "size").write_text(f"{size}\n")
        (d / "ways_of_associativity").write_text(f"{ways}\n")
        (d / "coherency_line_size").write_text("64\n")
    assert last_level_geometry(tmp_path) == f"{32 * 1024 * 1024},16,64"
    (tmp_path / "index2" / "size").write_text("24576K\n")  # 24 MiB: sets not a power of two
    assert last_level_geometry(tmp_path) == f"{16 * 1024 * 1024},16,64"


def test_the_pass_estimates_its_time_from_the_timing_pass(tmp_path: Path) -> None:
    """Before the slow pass starts: its expected time from the timing pass's forward (the recorded markers here),
    nothing without a timing pass."""
    from types import SimpleNamespace

    from hwprof.collectors.callgrind.collector import CallgrindCollector

    from hwprof.core.config import RunConfig
    from hwprof.core.spans import forward_p50_ms

    timing = tmp_path / "passes" / "timing"
    timing.mkdir(parents=True)
    (timing / "markers.jsonl").write_bytes((FIXTURES / "yolov8n_64.markers.jsonl").read_bytes())
    p50 = forward_p50_ms(read_markers(timing / "markers.jsonl"))
    assert p50
    collector = CallgrindCollector(RunConfig(counters="callgrind"))
    text = collector.time_estimate(SimpleNamespace(run_dir=tmp_path))  # type: ignore[arg-type]
    assert text == (
        f"estimate {p50 / 1e3 * 2 * 50:.0f}-{p50 / 1e3 * 2 * 150:.0f} s for 2 instrumented iterations "
        f"(forward p50 {p50:.1f} ms x 50-150 under callgrind), plus start-up"
    )
    assert collector.time_estimate(SimpleNamespace(run_dir=tmp_path / "none")) == ""  # type: ignore[arg-type]


def _collects(*outs: Path) -> list[dict]:
    """Collects side by side: instruction counts do not depend on what else runs (the simulator counts, it does
    not time), so the two runs of the test share its wall time. The timing pass stays: without it the test took
    longer here (73 s against 56-61 s of wall, though 5% less CPU), the callgrind pass's start-up under valgrind
    (torch's import alone: 14 s of CPU) being the test's floor."""
    procs = []
    for out in outs:
        command = [sys.executable, "-m", "hwprof", "collect", "--model", "yolov8n", "--imgsz", "64"]
        command += ["--counters", "callgrind", "--only", "timing,callgrind", "--iters", "1", "--warmup", "1"]
        command += ["--no-report", "--out", str(out)]
        procs.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for proc in procs:
        text, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, text[-3000:]
    return [json.loads((out / "run.json").read_text()) for out in outs]


@pytest.mark.slow
def test_real_callgrind_pass_counts_the_same_twice(tmp_path: Path) -> None:
    if find_valgrind()[0] is None:
        pytest.skip(f"no usable valgrind: {find_valgrind()[1]} (bash scripts/install_valgrind.sh)")
    from hwprof.analysis.run_analysis import analyse as analyse_run
    from hwprof.rundir.reader import RunData
    from hwprof.schema.records import MetricTables

    runs = _collects(tmp_path / "run1", tmp_path / "run2")
    tables = [MetricTables.load(tmp_path / f"run{k}" / "passes/callgrind/callgrind.metrics.json") for k in (1, 2)]
    for run in runs:
        summary = run["collectors"]["callgrind"]["summary"]
        assert run["collectors"]["callgrind"]["status"] == "ok"
        assert summary["checks"]["layers_plus_gap_vs_forward"]["instructions"]["ratio"] == pytest.approx(1.0)
        assert summary["marker_floor"]["min_instructions"] > 0
    first, second = (t.layers for t in tables)
    assert set(first) == set(second) == {f"model.{i}" for i in range(23)}
    spread = max(abs(first[k]["instructions"] - second[k]["instructions"]) / first[k]["instructions"] for k in first)
    assert spread < 0.01, spread  # deterministic up to a few instructions per layer
    a = analyse_run(RunData.load(tmp_path / "run1"))
    assert (
        a.layers.layers[0].time_ms is None or a.layers.missing.get("time") is not None
    )  # no layer time from a simulator


def test_compare_shows_exact_per_layer_instruction_deltas() -> None:
    from hwprof.analysis.compare import Comparison, Row
    from hwprof.render.compare.counters import instructions_spec

    rows = [
        Row("0 Conv", [1_000_000.0, 1_000_000.0], [1.0, 1.0]),
        Row("1 C2f", [5_000_000.0, 4_999_123.0], [1.0, 4_999_123 / 5_000_000]),
        Row("2 Detect", [2_000_000.0, None], [1.0, None]),
    ]
    comparison = Comparison([], [], None, None, [], [], rows, ["callgrind", "callgrind"])
    spec = instructions_spec(comparison, ["A", "B"])
    assert spec is not None
    assert spec.rows[0][:4] == ["1 C2f", "5,000,000", "4,999,123", "-877"]  # largest change first, exact
    assert spec.rows[1][3] == "+0"
    assert "A 8,000,000" in spec.notes[0]


def test_collect_refuses_callgrind_without_a_usable_valgrind(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "valgrind"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho valgrind-3.19.0\n")
    fake.chmod(0o755)
    env = {**os.environ, "HWPROF_VALGRIND": str(fake), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env["PATH"] = f"{fake.parent}:/usr/bin:/bin"
    command = [sys.executable, "-m", "hwprof", "collect", "--model", "yolov8n", "--counters", "callgrind"]
    proc = subprocess.run([*command, "--out", str(tmp_path / "run")], capture_output=True, text=True, env=env)
    text = (proc.stdout + proc.stderr).replace("\n", " ")
    assert proc.returncode == 2, text
    assert "valgrind 3.19" in text and "install_valgrind.sh" in text
    assert not (tmp_path / "run").exists()
