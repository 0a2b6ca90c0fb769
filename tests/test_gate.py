"""The performance gate (hwprof compare --fail-above): its statistics on synthetic runs, the exact gate on the
recorded callgrind run, and its JUnit XML, markdown and JSON."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from hwprof.analysis.gate.judge import GateRun, LayerSamples, judge
from hwprof.analysis.gate.verdict import FAIL, PASS, UNRESOLVED, GateError, GateOptions, parse_percent
from hwprof.render.gate import verdict_junit, verdict_markdown

FIXTURES = Path(__file__).parent / "fixtures" / "callgrind"
OPTS = GateOptions(fail_above=0.05)
IDENTITY = {"model": "yolov7-tiny", "imgsz": "320", "batch": "1", "runtime": "torch", "precision": "fp32"}


def _samples(median: float, n: int, seed: int, spread: float = 0.03) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median * (1 + spread * rng.standard_normal(n)))


def _run(label: str, seed: int, forward: float = 20.0, layer_scale: dict[str, float] | None = None) -> GateRun:
    scale = layer_scale or {}
    forward_ms = _samples(forward, 20, seed)
    layers = {}
    for i, ms in enumerate((6.0, 4.0, 0.1)):
        times = _samples(ms * scale.get(f"model.{i}", 1.0), 20, seed + i)
        shares = [t / f for t, f in zip(times, forward_ms, strict=True)]
        layers[f"model.{i}"] = LayerSamples("Conv", times, ms / forward, shares=shares)
    return GateRun(
        label,
        forward_ms,
        _samples(forward + 3, 20, seed + 100),
        layers,
        "layers",
        None,
        {**IDENTITY, "threads": "2"},
    )


def test_identical_runs_pass_or_are_not_resolved() -> None:
    v = judge(_run("A", 1), _run("B", 1), OPTS)
    assert v.outcome in (PASS, UNRESOLVED) and v.exit_code == 0 and not v.failed
    same = judge(_run("A", 1), _run("B", 7), OPTS)  # same configuration, other noise
    assert same.exit_code == 0 and same.outcome in (PASS, UNRESOLVED)
    assert "pass" not in same.line.lower() or same.outcome == PASS
    assert "bootstrap" in v.method and "95%" in v.method


def test_a_slower_forward_fails_naming_it() -> None:
    v = judge(_run("A", 1), _run("B", 2, forward=26.0), OPTS)
    assert v.outcome == FAIL and v.exit_code == 1
    forward = next(f for f in v.figures if f.name == "forward")
    assert forward.outcome == FAIL and forward.low is not None and forward.low > 1.05
    assert 1.2 < forward.ratio < 1.4 and "forward" in v.line


def test_a_slower_layer_fails_naming_it_and_small_layers_are_not_gated() -> None:
    v = judge(_run("A", 1), _run("B", 1, layer_scale={"model.1": 1.5}), OPTS)
    failed = [f.name for f in v.failed]
    assert failed == ["model.1 Conv"] and v.exit_code == 1 and "model.1 Conv" in v.line
    assert "model.2 Conv" not in [f.name for f in v.figures]  # 0.5% of forward: below --gate-share 2%


def test_noise_is_not_resolved_and_the_option_decides_its_exit() -> None:
    base = _run("A", 1)
    noisy = _run("B", 3)
    noisy.forward_ms = _samples(21.0, 6, 5, spread=0.3)
    v = judge(base, noisy, OPTS)
    assert v.outcome == UNRESOLVED and v.exit_code == 0 and v.line.startswith("NOT RESOLVED")
    strict = judge(base, noisy, GateOptions(fail_above=0.05, unresolved_fails=True))
    assert strict.exit_code == 1 and strict.outcome == UNRESOLVED


def test_bad_input_is_one_line() -> None:
    other = _run("B", 1)
    other.identity = {**other.identity, "imgsz": "640"}
    with pytest.raises(GateError, match="imgsz 320 vs 640"):
        judge(_run("A", 1), other, OPTS)
    v = judge(_run("A", 1), other, GateOptions(fail_above=0.05, allow_different=True))
    assert "differ in imgsz 320 vs 640" in v.line
    bare = _run("B", 1)
    bare.forward_ms, bare.iteration_ms = [], []
    with pytest.raises(GateError, match="no measured forward"):
        judge(_run("A", 1), bare, OPTS)
    no_layers = _run("B", 1)
    no_layers.layers = {}
    with pytest.raises(GateError, match="no per-layer times"):
        judge(_run("A", 1), no_layers, OPTS)
    assert parse_percent("5%", "--fail-above") == pytest.approx(0.05)
    with pytest.raises(GateError, match="--fail-above"):
        parse_percent("five", "--fail-above")


def test_junit_has_one_case_per_figure_and_the_failures() -> None:
    v = judge(_run("A", 1), _run("B", 2, forward=26.0, layer_scale={"model.0": 1.4}), OPTS)
    root = ET.fromstring(verdict_junit(v))
    cases = root.findall("testcase")
    assert len(cases) == len(v.figures) and int(root.get("tests", "0")) == len(cases)
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert {"forward", "model.0 Conv"} <= failed and failed == {f.name for f in v.failed}
    assert int(root.get("failures", "0")) == len(failed)
    text = verdict_markdown(v, OPTS.fail_above)
    assert text.startswith("## hwprof gate: FAIL") and "| forward |" in text
    assert json.loads(json.dumps(v.to_dict()))["outcome"] == FAIL


def _callgrind_counts(grow: dict[str, float] | None = None) -> dict[str, dict[str, float]]:
    from hwprof.collectors.callgrind.parse import events_present, read_parts, readings_at_markers

    from hwprof.core.markers import read_markers
    from hwprof.perf.metric_tables import analyse

    parts = read_parts(FIXTURES / "yolov8n_64.callgrind.out")
    markers = read_markers(FIXTURES / "yolov8n_64.markers.jsonl")
    events = events_present(parts)
    tables = analyse(readings_at_markers(parts, markers), dict.fromkeys(events, "count"), cpu_event="").tables
    counts = {name: dict(row) for name, row in tables.layers.items()}
    counts["forward"] = dict(tables.stages["forward"])
    for name, factor in (grow or {}).items():
        counts[name] = {k: v * factor for k, v in counts[name].items()}
    return counts


def test_callgrind_counts_gate_exactly() -> None:
    base = GateRun("A", counts=_callgrind_counts(), identity=IDENTITY)
    same = GateRun("B", counts=_callgrind_counts(), identity=IDENTITY)
    v = judge(base, same, OPTS)
    assert v.outcome == PASS and v.exit_code == 0
    assert {f.kind for f in v.figures} == {"instructions"}  # misses move with the memory layout: not by default
    with_misses = judge(base, same, GateOptions(fail_above=0.05, miss_threshold=0.05))
    assert {f.kind for f in with_misses.figures} >= {"instructions", "L1-dcache-load-misses"}
    assert all(max(f.base, f.new) >= 1000 for f in with_misses.figures)  # a few misses either way: not gated
    assert {f.name for f in v.figures} >= {"forward", "model.22"}
    grown = GateRun("B", counts=_callgrind_counts({"model.7": 1.01, "model.3": 1.001}), identity=IDENTITY)
    v = judge(base, grown, OPTS)
    failed = {(f.name, f.kind) for f in v.failed}
    assert ("model.7", "instructions") in failed and not any(name == "model.3" for name, _ in failed)
    seven = next(f for f in v.failed if f.name == "model.7" and f.kind == "instructions")
    assert seven.new == pytest.approx(seven.base * 1.01) and f"{seven.base:,.0f}" in seven.text
    assert v.exit_code == 1 and "model.7" in v.line
    root = ET.fromstring(verdict_junit(v))
    assert any(c.get("name") == "model.7" and c.find("failure") is not None for c in root.findall("testcase"))


def test_too_few_iterations_are_not_resolved_with_the_count_needed() -> None:
    """A 30% slower forward over 3 iterations is neither failed nor dropped: not resolved, the real cause named."""
    base, new = _run("A", 1), _run("B", 2, forward=26.0)
    base.forward_ms, new.forward_ms = base.forward_ms[:3], new.forward_ms[:3]
    v = judge(base, new, OPTS)
    forward = next(f for f in v.figures if f.name == "forward")
    assert forward.outcome == UNRESOLVED and forward.low is None and 1.2 < forward.ratio < 1.4
    assert forward.why == "3 and 3 measured iterations, at least 5 in each run needed"
    assert forward.way == "collect with --iters 5 or more" and "forward" not in [f.name for f in v.failed]


def test_runs_of_two_iterations_say_so_not_that_they_have_nothing_in_common() -> None:
    base, new = _run("A", 1), _run("B", 2)
    for run in (base, new):
        run.forward_ms, run.iteration_ms, run.layers = run.forward_ms[:2], run.iteration_ms[:2], {}
    v = judge(base, new, OPTS)
    assert v.outcome == UNRESOLVED and v.exit_code == 0
    assert "2 and 2 measured iterations, at least 5 in each run needed; collect with --iters 5 or more" in v.line
    assert judge(base, new, GateOptions(fail_above=0.05, unresolved_fails=True)).exit_code == 1


def _disturbed(run: GateRun, passes: tuple[str, ...] = ("timing",), share: str = "47%") -> GateRun:
    why = f"other work on these CPUs, {share} of these CPUs' time: stress (pid 4242) 9.1 s"
    run.unfit = {name: f"the {name} pass was disturbed ({why})" for name in passes}
    return run


def test_a_disturbed_timing_pass_never_fails_the_build() -> None:
    """x1.3 on the forward fails between clean runs; with BASE's timing pass disturbed it is not judged, the
    reason and the way to a verdict in the line; --unresolved fail still fails it, by the user's choice."""
    clean = judge(_run("A", 1), _run("B", 2, forward=26.0), OPTS)
    assert clean.exit_code == 1 and clean.outcome == FAIL
    v = judge(_disturbed(_run("A", 1)), _run("B", 2, forward=26.0), OPTS)
    assert v.outcome == UNRESOLVED and v.exit_code == 0 and not v.failed
    forward = next(f for f in v.figures if f.name == "forward")
    assert forward.outcome == UNRESOLVED and forward.low is not None  # measured, shown, not judged
    assert forward.why.startswith("BASE's run: the timing pass was disturbed (other work on these CPUs, 47%")
    assert "stress (pid 4242)" in v.line and "--paired N" in v.line and "--gate-on counts" in v.line
    layer = next(f for f in v.figures if f.name == "model.0 Conv")
    assert not layer.why  # the layers pass was clean: its figures are judged
    strict = judge(_disturbed(_run("A", 1)), _run("B", 2, forward=26.0), GateOptions(0.05, unresolved_fails=True))
    assert strict.exit_code == 1 and strict.outcome == UNRESOLVED


def test_a_disturbed_layers_pass_leaves_its_layers_unjudged_and_the_forward_judged() -> None:
    v = judge(_run("A", 1), _disturbed(_run("B", 1, layer_scale={"model.1": 1.5}), ("layers",)), OPTS)
    layer = next(f for f in v.figures if f.name == "model.1 Conv")
    assert layer.outcome == UNRESOLVED and layer.why.startswith("NEW's run: the layers pass was disturbed")
    assert not next(f for f in v.figures if f.name == "forward").why and v.exit_code == 0


def test_the_gate_reads_each_runs_health_from_the_run(tmp_path: Path) -> None:
    """gate_run carries what hwprof.analysis.health says of the run (the report's same threshold)."""
    from test_analysis import make_run

    from hwprof.analysis.gate.inputs import gate_run
    from hwprof.analysis.run_analysis import analyse
    from hwprof.rundir.reader import RunData

    root = make_run(tmp_path / "r", timing_forward_ms=tuple(20.0 + i * 0.1 for i in range(8)))
    doc = json.loads((root / "run.json").read_text())
    outsider = {"pid": 4242, "name": "stress", "cpu_s": 4.6}
    load = {"wall_s": 5.0, "cpus": [0, 1], "other_cpu_s": 4.7, "share": 0.47, "steal_s": 0.0, "own_cpu_s": 5.0}
    doc["passes"]["timing"]["neighbours"] = {**load, "top": [outsider]}
    (root / "run.json").write_text(json.dumps(doc))
    data = RunData.load(root)
    run = gate_run(data, analyse(data), "BASE")
    assert run.why_unfit("forward") is not None and "47% of these CPUs' time" in (run.why_unfit("forward") or "")


def test_compare_options_build_the_gate_and_refuse_files_without_a_threshold() -> None:
    from hwprof.cli.args import build_parser
    from hwprof.cli.gate_args import compare_request

    parser = build_parser()
    args = parser.parse_args(["compare", "A", "B", "--fail-above", "5%", "--gate-share", "1%", "--unresolved", "fail"])
    opts = compare_request(args).gate
    assert opts is not None and opts.fail_above == pytest.approx(0.05) and opts.share == pytest.approx(0.01)
    assert opts.unresolved_fails and opts.count_threshold == pytest.approx(0.005) and opts.confidence == 0.95
    assert compare_request(parser.parse_args(["compare", "A", "B"])).gate is None
    with pytest.raises(GateError, match="--junit needs --fail-above"):
        compare_request(parser.parse_args(["compare", "A", "B", "--junit", "x.xml"]))
    compare = next(a for a in parser._actions if a.dest == "command").choices["compare"]  # type: ignore[attr-defined]
    assert all(a.help for a in compare._actions)  # every option of compare says what it does


def test_the_terminal_verdict_comes_first_and_says_not_resolved_in_words() -> None:
    from io import StringIO

    from rich.console import Console

    from hwprof.render.gate import render_verdict

    base, noisy = _run("A", 1), _run("B", 3)
    noisy.forward_ms = _samples(21.0, 6, 5, spread=0.3)
    out = StringIO()
    render_verdict(judge(base, noisy, OPTS), Console(file=out, width=200), OPTS.fail_above)
    first = out.getvalue().splitlines()[0]
    assert first.startswith("gate: NOT RESOLVED") and "PASS" not in first
    assert "bootstrap" in out.getvalue()


def test_different_models_gate_layers_only_where_their_tables_match() -> None:
    wide = _run("B", 1, layer_scale={"model.0": 2.0})
    wide.identity = {**wide.identity, "model": "yolov8s"}
    base = _run("A", 1)
    base.identity = {**base.identity, "model": "yolov8n"}
    v = judge(base, wide, GateOptions(fail_above=0.05, allow_different=True))
    assert [f.name for f in v.failed] == ["model.0 Conv"] and "model yolov8n vs yolov8s" in v.line
    wide.layers["model.1"].type = "C2f"
    v = judge(base, wide, GateOptions(fail_above=0.05, allow_different=True))
    assert not any(f.name.startswith("model.") for f in v.figures)
    assert any("layer tables differ" in n for n in v.notes)


def test_markdown_shows_the_kernels_of_a_layer_that_moved() -> None:
    base, new = _run("A", 1), _run("B", 1, layer_scale={"model.0": 1.5})
    base.layers["model.0"].kernel, new.layers["model.0"].kernel = "brgconv_avx512", "jit_avx2_conv"
    text = verdict_markdown(judge(base, new, OPTS), OPTS.fail_above)
    moved = text.split("### What moved")[1].split("<details>")[0]
    assert "| model.0 Conv | fail |" in moved and "`brgconv_avx512` -> `jit_avx2_conv`" in moved


def test_gate_on_counts_ignores_the_machine_and_needs_counts() -> None:
    base = GateRun("A", forward_ms=_samples(20, 10, 1), counts=_callgrind_counts(), identity=IDENTITY)
    slow = GateRun("B", forward_ms=_samples(40, 10, 2), counts=_callgrind_counts(), identity=IDENTITY)
    assert judge(base, slow, OPTS).exit_code == 1  # both: the timed forward fails
    v = judge(base, slow, GateOptions(fail_above=0.05, gate_on="counts"))
    assert v.outcome == PASS and all(f.kind != "time" for f in v.figures)
    with pytest.raises(GateError, match="no callgrind counts"):
        judge(_run("A", 1), _run("B", 1), GateOptions(fail_above=0.05, gate_on="counts"))


def test_paired_blocks_cancel_a_shift_that_hits_both_sides() -> None:
    from hwprof.analysis.gate.paired import block_ratios, judge_paired

    rng = np.random.default_rng(3)
    load = {k: 1 + 2 * (k // 8) for k in range(16)}  # the machine slows threefold halfway through
    base = {k: 20 * load[k] * (1 + 0.02 * rng.standard_normal()) for k in range(16)}
    same = {k: 20 * load[k] * (1 + 0.02 * rng.standard_normal()) for k in range(16)}
    slower = {k: 26 * load[k] * (1 + 0.02 * rng.standard_normal()) for k in range(16)}
    assert len(block_ratios(base, same)) == 8
    v = judge_paired("A", "B", {"forward": (base, same)}, OPTS)
    assert v.exit_code == 0 and v.outcome in (PASS, UNRESOLVED)
    v = judge_paired("A", "B", {"forward": (base, slower)}, OPTS)
    assert v.outcome == FAIL and v.failed[0].kind == "paired" and 1.2 < v.failed[0].ratio < 1.4
    assert "paired" in v.line and "8 ABBA blocks" in v.line
    with pytest.raises(GateError, match="fewer than 5 ABBA blocks"):
        judge_paired("A", "B", {"forward": ({0: 1.0, 1: 1.0}, {0: 1.0, 1: 1.0})}, OPTS)


def test_layers_judged_on_share_are_free_of_a_whole_process_shift() -> None:
    base = _run("A", 1)
    shifted = _run("B", 1, forward=30.0, layer_scale={f"model.{i}": 1.5 for i in range(3)})  # all 1.5x
    v = judge(base, shifted, OPTS)
    assert [f.name for f in v.failed] == ["forward"] or {f.name for f in v.failed} == {"forward", "iteration"}
    assert all(f.kind == "share" for f in v.figures if f.name.startswith("model."))
    by_ms = judge(base, shifted, GateOptions(fail_above=0.05, layer_stat="ms"))
    assert {"model.0 Conv", "model.1 Conv"} <= {f.name for f in by_ms.failed}


@pytest.mark.parametrize("words", [["--fail-above", "-5%"], ["--fail-above=-5%"], ["--fail-above", "-.5"]])
def test_a_negative_threshold_is_refused_in_one_line_either_way(words: list[str]) -> None:
    """argparse alone took `--fail-above -5%` for a missing value; the gate's own check now says what it takes."""
    from hwprof.cli.gate_args import compare_request
    from hwprof.cli.main import parse_command

    with pytest.raises(GateError, match=r"^--fail-above takes a percentage from 0% to 1000% \(got '-"):
        compare_request(parse_command(["compare", "A", "B", *words]))


def test_a_gate_file_that_cannot_be_written_names_the_users_path() -> None:
    """Not the temporary file beside it (/proc/.nope.xml.23246.tmp)."""
    from hwprof.render.gate import GateOutputs, write_gate_files

    v = judge(_run("A", 1), _run("B", 2, forward=26.0), OPTS)
    with pytest.raises(OSError) as caught:
        write_gate_files(v, GateOutputs(junit=Path("/proc/nope.xml")), OPTS.fail_above)
    assert str(caught.value).endswith(": '/proc/nope.xml'") and ".tmp" not in str(caught.value)
