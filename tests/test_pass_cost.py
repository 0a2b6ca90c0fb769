"""Each pass's own cost: paired in the pass (clean iterations interleaved in ABBA blocks) or a
pass-level estimate, with its spread and method, in run.json, the overheads table and the layer scale."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from hwprof.collectors.scalene.collector import MAX_ITERATIONS, MIN_PROFILED_S
from test_analysis import _iteration, _write_markers, make_run

from hwprof.analysis.layers.report import build_layer_report
from hwprof.analysis.paired_cost import (
    MIN_BLOCKS,
    PAIRED,
    PASS_LEVEL,
    PassCostFigure,
    cost_words,
    paired_cost,
    pass_level_cost,
)
from hwprof.analysis.run_analysis import analyse
from hwprof.core.markers import Marker
from hwprof.core.spans import clean_forward_ms_by_iteration, forward_ms_by_iteration, measured_pieces, timing_forward_s
from hwprof.render.overhead_section import overhead_spec
from hwprof.rundir.reader import RunData
from hwprof.rundir.worker_files import write_config
from hwprof.schema.run import RunDoc
from hwprof.session.finish import finalize
from hwprof.session.paired import schedule

LAYER_MS = {"model.0": 80.0, "model.1": 60.0, "model.2": 20.0, "model.3": 20.0}
"""The layers pass of make_run: 20 ms gap + 180 ms of layers = 200 ms measured forward."""


def test_schedule_starts_measured_and_balances_clean_iterations() -> None:
    assert schedule(4) == [(True, 0), (False, 0), (False, 1), (True, 1), (True, 2), (False, 2), (False, 3), (True, 3)]
    assert schedule(3)[-2:] == [(True, 2), (False, 2)]  # a last odd block: one of each
    for n in range(1, 9):
        steps = schedule(n)
        assert [i for on, i in steps if on] == list(range(n)) == [i for on, i in steps if not on]


def test_paired_cost_is_the_median_of_block_ratios_with_its_spread() -> None:
    # blocks: on 11+13 / off 10+10 = 1.2; 10+10/10+10 = 1.0; 21+21/20+20 = 1.05; a torn last block: on 30 / off 25
    on = {0: 11.0, 1: 13.0, 2: 10.0, 3: 10.0, 4: 21.0, 5: 21.0, 6: 30.0}
    off = {0: 10.0, 1: 10.0, 2: 10.0, 3: 10.0, 4: 20.0, 5: 20.0, 6: 25.0}
    cost = paired_cost(on, off)
    assert cost is not None and cost.method == PAIRED
    assert cost.block_ratios == pytest.approx([1.2, 1.0, 1.05, 1.2])
    assert cost.blocks == 4
    assert cost.ratio == pytest.approx(1.125)
    assert (cost.low, cost.high) == (pytest.approx(1.0), pytest.approx(1.2))
    assert cost.q1 == pytest.approx(1.0375) and cost.q3 == pytest.approx(1.2)
    assert cost.spread_text() == "IQR 1.038-1.200 (4 blocks)"
    # The host three times as busy during the first block: both of its sides slow, its ratio stays.
    busy = paired_cost(on | {0: 33.0, 1: 39.0}, off | {0: 30.0, 1: 30.0})
    assert busy is not None and busy.block_ratios == pytest.approx(cost.block_ratios)
    assert paired_cost(on, {}) is None


def test_pass_level_estimate_is_spread_by_the_timing_pass_iterations() -> None:
    cost = pass_level_cost([110.0, 112.0, 108.0], [90.0, 100.0, 110.0, 100.0, 100.0])
    assert cost is not None and cost.method == PASS_LEVEL and cost.blocks == 0
    assert cost.ratio == pytest.approx(1.1)
    assert cost.low == pytest.approx(110.0 / 100.0) and cost.high == pytest.approx(110.0 / 100.0)
    wide = pass_level_cost([110.0], [80.0, 100.0, 120.0])
    assert wide is not None and (wide.low, wide.high) == (pytest.approx(110 / 110), pytest.approx(110 / 90))
    assert wide.spread_text() == "1.00-1.22 (timing IQR)"
    assert pass_level_cost([], [1.0]) is None


def test_clean_markers_round_trip_and_are_not_measured() -> None:
    m = Marker("stage", "B", "forward", 5, 2, False, clean=True)
    assert Marker.from_row(json.loads(json.dumps(m.to_row()))) == m and not m.measured
    replayed = Marker("layer", "B", "model.0", 5, 2, False, 0, replayed=True)
    assert Marker.from_row(replayed.to_row()) == replayed and replayed.measured


def _paired_layers_pass(root: Path, clean_ms: float, on_layer_ms: dict[str, float], n: int) -> list[Marker]:
    """A layers pass as the worker runs it: warm-up, then measured and clean iterations in schedule order."""
    t = 50_000 * 1_000_000
    markers, t = _iteration(t, -1, True, on_layer_ms, 0.0, 20.0)
    for on, i in schedule(n):
        if on:
            block, t = _iteration(t, i, False, on_layer_ms, 0.0, 20.0)
        else:
            block, t = _iteration(t, i, False, None, clean_ms, 0.0)
            block = [dataclasses.replace(m, clean=True) for m in block]
        markers += block
    return markers


def _rewrite_layers_pass(root: Path, markers: list[Marker], paired: dict[str, list[str]] | None) -> RunData:
    _write_markers(root / "passes/layers/markers.jsonl", markers)
    (root / "passes/layers/result.json").write_text(json.dumps({"pass": "layers", "paired": paired}))
    run = json.loads((root / "run.json").read_text())
    finalize(root, RunDoc.read(run, "run.json"))
    return RunData.load(root)


def test_a_paired_pass_states_its_own_cost_beside_layers_that_add_up_to_the_stated_forward(tmp_path: Path) -> None:
    # timing pass 100 ms (another process, e.g. a quiet moment); layers pass: 200 ms measured, 160 ms clean
    root = make_run(tmp_path / "paired")
    markers = _paired_layers_pass(root, 160.0, LAYER_MS, 8)  # 4 ABBA blocks: paired_cost.MIN_BLOCKS
    assert sorted(forward_ms_by_iteration(markers)) == list(range(8))
    assert clean_forward_ms_by_iteration(markers) == {i: pytest.approx(160.0) for i in range(8)}
    assert {p.iteration for p in measured_pieces(markers)} == set(range(8))
    clean_starts = {m.t_ns for m in markers if m.clean}
    assert all(not (p.start_ns < t < p.end_ns) for p in measured_pieces(markers) for t in clean_starts)

    data = _rewrite_layers_pass(root, markers, {"switched": ["layer markers", "flops"], "always_on": []})
    entry = data.doc.to_json()["passes"]["layers"]
    assert entry["overhead"]["method"] == PAIRED
    assert entry["overhead"]["ratio"] == pytest.approx(1.25) and entry["overhead"]["blocks"] == 4
    assert entry["overhead"]["covers"] == ["layer markers", "flops"]
    assert entry["overhead_pass_level"]["method"] == PASS_LEVEL
    assert entry["overhead_pass_level"]["ratio"] == pytest.approx(2.0)  # the cross-process noise
    assert entry["overhead_vs_timing"] == pytest.approx(2.0)
    assert "overhead" not in data.doc.to_json()["passes"]["timing"]

    report = build_layer_report(data)
    # the layers add up to the forward the report states (the timing pass's); the cost is the pass's own
    assert not report.scale_paired and report.forward_ms == pytest.approx(100.0)
    assert report.layers[0].time_ms == pytest.approx(100.0 * 80.0 / 200.0)
    assert "paired in it: 1.250x (median of 4 ABBA blocks" in report.time_note
    assert "not a cost" in report.time_note

    a = analyse(data)
    layers = next(p for p in a.overheads.passes if p.name == "layers")
    assert layers.cost is not None and layers.cost.method == PAIRED
    spec = overhead_spec(a)
    heads = [c.header for c in spec.cols]
    row = next(r for r in spec.rows if r[0] == "layers")
    assert row[heads.index("cost")] == "1.250x" and row[heads.index("method")] == PAIRED
    assert row[heads.index("spread")] == "1.250-1.250" and row[heads.index("blocks")] == "4"
    assert any(n.startswith("paired in the pass: clean and measured iterations interleaved") for n in spec.methods)
    assert not [f for f in a.findings if "slower than" in f.title or "clean timing pass's forward" in f.title]
    assert not [f for f in a.findings if "not resolved" in f.title]  # 4 equal blocks: IQR 0


def test_a_paired_cost_with_widely_spread_blocks_is_a_caveat(tmp_path: Path) -> None:
    root = make_run(tmp_path / "spread")
    markers = _paired_layers_pass(root, 160.0, LAYER_MS, 8)
    # the host got busy in the measured iterations of blocks 1 and 2: their ratios move, the IQR widens
    slow = {2, 3, 4, 5}
    shifted: list[Marker] = []
    extra = 0
    for m in markers:
        if m.kind == "stage" and m.name == "forward" and m.measured and m.iteration in slow and m.phase == "E":
            extra += 100 * 1_000_000
        shifted.append(dataclasses.replace(m, t_ns=m.t_ns + extra))
    data = _rewrite_layers_pass(root, shifted, {"switched": ["layer markers"], "always_on": []})
    cost = data.doc.to_json()["passes"]["layers"]["overhead"]
    assert cost["blocks"] == 4 and cost["q3"] - cost["q1"] > 0.1
    caveat = next(f for f in analyse(data).findings if "not resolved" in f.title)
    assert caveat.kind == "caveat" and caveat.title.startswith("the paired cost of the layers pass is not resolved")


def test_without_a_timing_pass_layers_add_up_to_the_pass_own_clean_forward(tmp_path: Path) -> None:
    root = make_run(tmp_path / "notiming")
    markers = _paired_layers_pass(root, 160.0, LAYER_MS, 4)
    run = json.loads((root / "run.json").read_text())
    del run["passes"]["timing"]
    (root / "run.json").write_text(json.dumps(run))
    data = _rewrite_layers_pass(root, markers, {"switched": ["layer markers"], "always_on": []})
    assert data.doc.to_json()["passes"]["layers"]["overhead"]["method"] == PAIRED
    assert data.doc.to_json()["passes"]["layers"]["overhead_pass_level"] is None
    report = build_layer_report(data)
    assert report.scale_paired and report.scale == pytest.approx(0.8)
    assert report.forward_ms == pytest.approx(160.0)  # 200 ms measured / its paired cost 1.25
    assert report.layers[0].time_ms == pytest.approx(160.0 * 80.0 / 200.0)
    assert "no timing pass" in report.time_note


def test_an_always_on_collector_is_named_with_the_pass_level_figure(tmp_path: Path) -> None:
    root = make_run(tmp_path / "always")
    markers = _paired_layers_pass(root, 190.0, LAYER_MS, 2)
    data = _rewrite_layers_pass(root, markers, {"switched": ["layer markers"], "always_on": ["pyspy"]})
    assert data.doc.to_json()["passes"]["layers"]["overhead"]["always_on"] == ["pyspy"]
    notes = overhead_spec(analyse(data)).notes
    assert any(n.startswith("layers: pyspy stayed on") and f"{PASS_LEVEL}: 2.00x" in n for n in notes)


def test_a_pass_without_clean_iterations_is_a_pass_level_estimate(tmp_path: Path) -> None:
    data = RunData.load(make_run(tmp_path / "plain"))
    entry = data.doc.to_json()["passes"]["layers"]
    assert entry["overhead"]["method"] == PASS_LEVEL and entry["overhead"]["ratio"] == pytest.approx(2.0)
    report = build_layer_report(data)
    assert not report.scale_paired and report.forward_ms == pytest.approx(100.0)
    assert "pass-level estimate" in report.time_note
    spec = overhead_spec(analyse(data))
    row = next(r for r in spec.rows if r[0] == "layers")
    heads = [c.header for c in spec.cols]
    assert row[heads.index("method")] == "pass-level" and row[heads.index("cost")] == "2.00x"


@pytest.mark.slow
def test_collect_states_each_pass_cost_with_its_method(run_hwprof, tmp_path: Path) -> None:
    from hwprof.core.markers import read_markers

    only = "timing,flops,torch_profiler,pyspy,scalene"
    proc = run_hwprof(
        "collect", "--model", "yolov8n", "--imgsz", "160", "--warmup", "1", "--iters", "2", "--only", only,
        "--out", "run", timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    root = tmp_path / "run"
    run = json.loads((root / "run.json").read_text())
    passes, collectors = run["passes"], run["collectors"]
    layers = passes["layers"]["overhead"]
    assert layers["method"] == PAIRED and layers["blocks"] == 1 and len(layers["block_ratios"]) == 1
    assert layers["covers"][0] == "layer markers" and "flops" in layers["covers"]
    assert layers["forward_on_ms"] > 0 and layers["forward_off_ms"] > 0
    assert passes["layers"]["overhead_pass_level"]["method"] == PASS_LEVEL
    assert "overhead" not in passes["timing"]
    markers = read_markers(root / "passes/layers/markers.jsonl")
    clean = {m.iteration for m in markers if m.clean and m.kind == "iteration"}
    measured = {m.iteration for m in markers if m.measured and m.kind == "iteration" and m.iteration >= 0}
    assert clean == measured == {0, 1}
    assert not [m for m in markers if m.clean and m.kind == "layer"]  # the layer hooks are off in clean iterations
    if collectors["torch_profiler"]["status"] == "ok":
        trace = passes["trace"]["overhead"]
        assert trace["method"] == PAIRED and "torch_profiler" in trace["covers"]
        assert trace["always_on"] == []  # py-spy is stopped in the clean iterations (issue 29)
        if "pyspy" in passes["trace"]["collectors"]:
            assert "pyspy" in trace["covers"]
            assert collectors["pyspy"]["summary"]["paused_switches"] >= 2
        assert collectors["torch_profiler"]["summary"]["iterations"] == 2  # the clean ones are not profiled
    if collectors["scalene"]["status"] == "ok":
        assert passes["scalene"]["overhead"]["method"] == PAIRED
        window = json.loads((root / "passes/scalene/scalene.window.json").read_text())
        scalene = read_markers(root / "passes/scalene/markers.jsonl")
        clean_iterations = {m.iteration for m in scalene if m.clean and m.kind == "iteration"}
        measured = {m.iteration for m in scalene if m.measured and m.kind == "iteration" and m.iteration >= 0}
        # Scalene's pass runs enough iterations for 1.5 s of forward (it writes no profile below about 1 s), by the
        # timing pass's forward p50 of this run (on a loaded machine a slow forward needs fewer: not a fixed count)
        forward_s = timing_forward_s(root)
        assert forward_s
        wanted = max(2, min(MAX_ITERATIONS, math.ceil(MIN_PROFILED_S / forward_s)))
        assert len(measured) >= wanted, (forward_s, wanted, sorted(measured))  # + any ABBA blocks
        # clean ones beside them until the pass's cost resolved (4 ABBA blocks at the least), or beside every one:
        # two per block the cost counts, but one in an odd plan's last block (148 measured, 147 clean, 74 blocks)
        cost = passes["scalene"]["overhead"]
        assert 0 <= 2 * cost["blocks"] - len(clean_iterations) <= 1, (cost, len(measured), len(clean_iterations))
        assert len(window["paused"]) == len(clean_iterations)
        assert window["start_ns"] < window["paused"][0][0] < window["stop_ns"]
    assert "collector overheads" in proc.stdout  # the method stands in markdown, the terminal says where
    page = (root / "report.html").read_text()
    assert "paired in the pass: clean and measured iterations" in page


@pytest.mark.parametrize(
    ("pass_name", "names", "runtime", "paired"),
    [
        ("layers", "flops,sysstat", "torch", {"switched": ["layer markers", "flops", "sysstat"], "always_on": []}),
        ("trace", "pyspy", "torch", {"switched": ["layer markers", "pyspy"], "always_on": []}),  # SIGSTOP, SIGCONT
        ("callgrind", "callgrind", "torch", None),  # under a simulator: no clean iterations
        ("ncu", "ncu", "torch", None),  # under Nsight Compute's replay: likewise
        ("ncu_range", "ncu_range", "torch", None),
        ("layers", "flops", "onnxruntime", None),  # the runtime profiles its whole pass
        ("timing", "timing", "torch", None),
    ],
)
def test_which_passes_interleave_clean_iterations(
    tmp_path: Path, pass_name: str, names: str, runtime: str, paired: dict[str, list[str]] | None
) -> None:
    from hwprof.core.config import RunConfig
    from hwprof.session.pass_runner import PassRunner

    write_config(tmp_path, RunConfig(model="yolov8n"))
    (tmp_path / "images.json").write_text(json.dumps({"paths": []}))
    runner = PassRunner(tmp_path, pass_name, names.split(","))
    if pass_name != "timing":
        runner._remove_hooks = lambda: None  # the worker attaches layer hooks in every pass but timing
    assert runner._pairs(runtime) is (paired is not None)
    if paired is not None:
        assert runner.paired is not None
        assert sorted(runner.paired.switched or []) == sorted(paired["switched"])
        assert runner.paired.always_on == paired["always_on"]


def test_clean_iterations_reach_only_collectors_that_ask(tmp_path: Path) -> None:
    """NVML's sampler stays on in the clean iterations and takes its energy windows from them (live on an
    H100 the layers pass's measured iterations took 45-75 ms against 11 ms clean); no other collector
    sees a clean iteration."""
    from hwprof.collectors.gpu.nvml.collector import NvmlCollector
    from hwprof.collectors.perf_events.collector import PerfEvents

    from hwprof.core.config import RunConfig
    from hwprof.core.markers import Marker
    from hwprof.session.pass_runner import PassRunner

    write_config(tmp_path, RunConfig(model="yolov8n"))
    (tmp_path / "images.json").write_text(json.dumps({"paths": []}))
    runner = PassRunner(tmp_path, "layers", ["sysstat"])
    seen: dict[str, list[Marker]] = {"nvml": [], "perf_events": []}
    nvml, perf = NvmlCollector(RunConfig()), PerfEvents(RunConfig())
    nvml.on_marker = seen["nvml"].append  # type: ignore[method-assign]
    perf.on_marker = seen["perf_events"].append  # type: ignore[method-assign]
    deliver_nvml, deliver_perf = runner._guarded(nvml), runner._guarded(perf)
    runner.clean_iteration = True
    marker = Marker("stage", "B", "forward", 1, 0, False, clean=True)
    deliver_nvml(marker)
    deliver_perf(marker)
    assert seen == {"nvml": [marker], "perf_events": []}


# ----------------------------------------------------------------------------- a stated minimum of blocks (issue 56)


def _blocks(ratios: list[float]) -> tuple[dict[int, float], dict[int, float]]:
    """Measured and clean forward ms whose ABBA blocks have these ratios (clean 10 ms)."""
    on = {i: 10.0 * r for b, r in enumerate(ratios) for i in (2 * b, 2 * b + 1)}
    return on, dict.fromkeys(on, 10.0)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_a_paired_cost_from_fewer_than_the_minimum_of_blocks_is_not_resolved(n: int) -> None:
    """Equal blocks (quartiles 0 apart): before issue 56 one block was 'resolved', its spread its one value."""
    cost = paired_cost(*_blocks([1.25] * n))
    assert cost is not None and cost.blocks == n < MIN_BLOCKS
    why = f"{n} block{'' if n == 1 else 's'}: too few to resolve a cost, at least {MIN_BLOCKS} needed"
    assert not cost.resolved and cost.unresolved_why == cost.too_few_blocks == why
    recorded = cost.to_dict()
    assert recorded["resolved"] is False and recorded["unresolved_why"] == why
    assert cost_words(cost, lambda: "host noise") == f"not resolved ({why})"  # the blocks say why, not the host
    if n == 1:  # one block's range is its one value: no spread
        assert cost.spread_text() == "none (1 block)" and cost.spread_figures() is None
    else:
        assert cost.spread_text() == f"1.250-1.250 ({n} blocks)"


def test_the_minimum_of_blocks_resolves_and_noise_still_does_not() -> None:
    cost = paired_cost(*_blocks([1.25] * MIN_BLOCKS))
    assert cost is not None and cost.resolved and cost.unresolved_why == "" and "unresolved_why" not in cost.to_dict()
    assert cost_words(cost, lambda: "host noise") == "1.250x" and cost.spread_text() == "IQR 1.250-1.250 (4 blocks)"
    noisy = paired_cost(*_blocks([1.0, 1.5, 0.8, 1.3]))
    assert noisy is not None and not noisy.resolved and noisy.too_few_blocks == ""
    assert noisy.unresolved_why == "the quartiles of its 4 ABBA blocks' ratios, 0.950-1.350, lie more than 0.10 apart"
    assert cost_words(noisy, lambda: "host noise") == "not resolved (host noise)"
    level = pass_level_cost([110.0], [100.0])  # a pass-level estimate has no blocks: the minimum is not its
    assert level is not None and level.resolved


@pytest.mark.parametrize(("blocks", "mixed", "resolved"), [(2, {1}, False), (4, {3}, False), (5, {0}, True)])
def test_blocks_left_out_for_mixed_input_shapes_do_not_count(blocks: int, mixed: set[int], resolved: bool) -> None:
    """The issue's run: 2 blocks, 1 left out for mixed input shapes, and the one left was 'resolved'."""
    on, off = _blocks([1.25] * blocks)
    measured = {i: "1x3x64x64" for i in on}
    clean = {i: ("1x3x96x96" if i // 2 in mixed and i % 2 else "1x3x64x64") for i in off}
    cost = paired_cost(on, off, (measured, clean))
    assert cost is not None and cost.blocks == blocks - len(mixed) and cost.resolved is resolved
    assert cost.shapes.startswith(f"{len(mixed)} of its {blocks} ABBA blocks mixed input shapes")
    if not resolved:
        assert cost.unresolved_why.startswith(f"{blocks - len(mixed)} block")


def test_a_recorded_resolved_true_of_one_block_reads_as_not_resolved() -> None:
    """run.json written before the minimum: `resolved: true` with 1 block; the flag is worked out again on read."""
    old = {
        "method": PAIRED, "ratio": 0.531, "low": 0.531, "high": 0.531, "q1": 0.531, "q3": 0.531, "blocks": 1,
        "block_ratios": [0.531], "resolved": True, "method_text": "paired in the pass",
    }  # fmt: skip
    cost = PassCostFigure.from_dict(old)
    assert not cost.resolved and cost.unresolved_why.startswith("1 block: too few")


def _mixed_inputs(root: Path, n: int, mixed: set[int]) -> None:
    """run.json passes.layers.inputs: the layers pass's measured iterations all one shape, the clean iterations of
    the blocks in `mixed` another (the issue's program, whose input shape changed per call)."""
    run = json.loads((root / "run.json").read_text())
    clean = {str(i): "1x3x96x96" if i // 2 in mixed and i % 2 else "1x3x64x64" for i in range(n)}
    odd = sum(1 for s in clean.values() if s == "1x3x96x96")
    run["passes"]["layers"]["inputs"] = {
        "shapes": {"1x3x64x64": {"warmup": 1, "measured": n, "clean": n - odd}, "1x3x96x96": {"clean": odd}},
        "measured": {str(i): "1x3x64x64" for i in range(n)},
        "clean": clean,
    }
    (root / "run.json").write_text(json.dumps(run))


def test_one_block_left_by_mixed_shapes_is_not_resolved_in_run_json_the_table_and_the_api(tmp_path: Path) -> None:
    """The issue's run: every paired pass had `overhead.blocks: 1`, `resolved: true` (1 of its 2 blocks left out for
    mixed input shapes), and the overheads table showed the one block's ratio, its 'spread' equal to it."""
    from hwprof.api.report_frames import pass_costs

    root = make_run(tmp_path / "mixed")
    markers = _paired_layers_pass(root, 160.0, LAYER_MS, 4)
    _mixed_inputs(root, 4, {1})
    data = _rewrite_layers_pass(root, markers, {"switched": ["layer markers"], "always_on": []})
    why = f"1 block: too few to resolve a cost, at least {MIN_BLOCKS} needed"
    entry = json.loads((root / "run.json").read_text())["passes"]["layers"]["overhead"]
    assert entry["blocks"] == 1 and entry["resolved"] is False and entry["unresolved_why"] == why
    assert entry["shapes"].startswith("1 of its 2 ABBA blocks mixed input shapes")

    a = analyse(data)
    spec = overhead_spec(a)
    heads = [c.header for c in spec.cols]
    row = next(r for r in spec.rows if r[0] == "layers")
    assert row[heads.index("cost")] == "not resolved [1]"
    assert row[heads.index("spread")] == "none" and row[heads.index("blocks")] == "1"
    assert f"[1] layers: not resolved ({why})" in spec.notes
    assert f"not resolved ({why})" in a.layers.time_note  # the layer table's note says the same
    frame = pass_costs(a)
    layers = frame.filter(frame["pass"] == "layers").row(0, named=True)
    assert layers["cost_resolved"] is False and layers["cost_ratio"] is None
    assert layers["cost_unresolved_why"] == why and layers["cost_text"] == f"not resolved ({why})"
    summary = next(p for p in a.overheads.to_dict()["passes"] if p["name"] == "layers")["cost"]
    assert summary["resolved"] is False and summary["unresolved_why"] == why and summary["ratio"] is None


def test_two_equal_blocks_are_too_few_for_the_table(tmp_path: Path) -> None:
    root = make_run(tmp_path / "two")
    data = _rewrite_layers_pass(
        root, _paired_layers_pass(root, 160.0, LAYER_MS, 4), {"switched": ["layer markers"], "always_on": []}
    )
    a = analyse(data)
    spec = overhead_spec(a)
    heads = [c.header for c in spec.cols]
    row = next(r for r in spec.rows if r[0] == "layers")
    assert row[heads.index("cost")] == "not resolved [1]" and row[heads.index("spread")] == "1.250-1.250"
    assert f"[1] layers: not resolved (2 blocks: too few to resolve a cost, at least {MIN_BLOCKS} needed)" in spec.notes
    caveat = next(f for f in a.findings if "not resolved" in f.title)
    assert caveat.title.startswith("the paired cost of the layers pass is not resolved")
