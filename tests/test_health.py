"""Every verdict follows the health of the measurement under it (hwprof.analysis.health): the findings, the
advice's "answers" and compare ask one place whether a pass was fit for a verdict (the gate's tests are in
test_gate.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_analysis import make_run

from hwprof.analysis.advice.candidate import Candidate
from hwprof.analysis.advice.candidates import tie_findings
from hwprof.analysis.finding import LAYER_TIME, TIMING, Finding
from hwprof.analysis.health import RunHealth, follow_health
from hwprof.analysis.run_analysis import analyse
from hwprof.rundir.reader import RunData

STRESS = {"pid": 4242, "name": "stress", "cpu_s": 7.3}


def _disturb(root: Path, name: str, share: float) -> Path:
    doc = json.loads((root / "run.json").read_text())
    load = {"wall_s": 5.0, "cpus": [0, 1], "other_cpu_s": share * 10, "share": share, "steal_s": 0.0}
    doc["passes"][name]["neighbours"] = {**load, "own_cpu_s": 5.0, "top": [STRESS]}
    (root / "run.json").write_text(json.dumps(doc))
    return root


def _layer_findings(a_findings: list[Finding]) -> list[Finding]:
    return [f for f in a_findings if LAYER_TIME in f.sources]


def test_findings_from_a_disturbed_pass_are_unconfirmed_and_off_the_first_screen(tmp_path: Path) -> None:
    from hwprof.render.summary import top_findings, withheld_line

    clean = analyse(RunData.load(make_run(tmp_path / "clean")))
    ranked = _layer_findings(clean.findings)
    assert ranked and all(f.ranked and not f.unconfirmed for f in ranked)  # the rule would speak on a clean run
    a = analyse(RunData.load(_disturb(make_run(tmp_path / "busy"), "layers", 0.52)))
    held = _layer_findings(a.findings)
    assert [f.title for f in held] == [f.title for f in ranked]
    assert all(not f.ranked and f.unconfirmed.startswith("the layers pass was disturbed") for f in held)
    assert "stress (pid 4242)" in held[0].unconfirmed
    assert not {f.title for f in held} & {f.title for f in top_findings(a)}
    line = withheld_line(a) or ""
    assert line.startswith(f"{len(held)} findings withheld as unconfirmed: the layers pass was disturbed")
    ranked_then_held = [f.ranked for f in a.findings if f.kind != "caveat"]
    assert ranked_then_held == sorted(ranked_then_held, reverse=True)  # every ranked one before every unconfirmed


def test_a_disturbance_below_the_reports_threshold_changes_nothing(tmp_path: Path) -> None:
    a = analyse(RunData.load(_disturb(make_run(tmp_path / "r"), "layers", 0.09)))
    assert not a.health.unfit and all(not f.unconfirmed for f in a.findings)


def test_a_disturbed_timing_pass_leaves_share_findings_ranked(tmp_path: Path) -> None:
    """A layer's share of forward comes from the layers pass alone: only rules that rest on the timing pass too
    (stages, rates against its forward) follow its health."""
    a = analyse(RunData.load(_disturb(make_run(tmp_path / "r"), "timing", 0.40)))
    assert "timing" in a.health.unfit and "layers" not in a.health.unfit
    judged = [f for f in a.findings if f.kind != "caveat"]
    assert {TIMING in f.sources for f in judged} == {True, False}  # both kinds are there to tell apart
    for f in judged:
        assert bool(f.unconfirmed) == (TIMING in f.sources), f.title


def test_the_report_lists_an_unconfirmed_finding_with_its_reason(tmp_path: Path) -> None:
    from hwprof.render.report import render_markdown

    a = analyse(RunData.load(_disturb(make_run(tmp_path / "r"), "layers", 0.52)))
    text = render_markdown(a)
    held = next(f for f in a.findings if f.unconfirmed)
    assert f"- unconfirmed: {held.title}" in text and "unconfirmed: the layers pass was disturbed" in text


def test_a_rule_that_does_not_say_what_it_rests_on_cannot_speak() -> None:
    with pytest.raises(AssertionError, match="finding without sources"):
        follow_health([Finding("t", "e", "hotspot", 0.5)], RunHealth())


def test_health_joins_each_unfit_pass_once() -> None:
    health = RunHealth({"layers": "the layers pass was disturbed (x)", "kernels": "the kernels pass was disturbed (y)"})
    assert health.why(["timing"]) is None
    assert health.why(["layers", "kernels", "layers"]) == (
        "the layers pass was disturbed (x); the kernels pass was disturbed (y)"
    )


def test_advice_answers_a_measured_finding_first_and_labels_an_unconfirmed_one() -> None:
    held = Finding(
        "threads wait", "e", "threads", 0.9, topic="threads-idle", unconfirmed="the layers pass was disturbed"
    )
    fact = Finding("layer 3 waits", "e", "threads", 0.2, topic="threads-idle")

    def one() -> list[Candidate]:
        return [Candidate("threads-1", "one thread", "t", topics=("threads-idle",))]

    assert tie_findings(one(), [held, fact])[0].finding == "layer 3 waits"
    only = tie_findings(one(), [held])[0].finding
    assert only == "unconfirmed: threads wait (the layers pass was disturbed)"


def test_compare_marks_the_ratios_that_rest_on_a_disturbed_pass(tmp_path: Path) -> None:
    from hwprof.analysis.compare import compare_runs
    from hwprof.render.compare.views import specs

    base = make_run(tmp_path / "a")
    busy = _disturb(make_run(tmp_path / "b"), "timing", 0.47)
    c = compare_runs([base, busy])
    forward = next(r for r in c.stages if r.key == "forward")
    assert forward.unconfirmed[1].startswith("B: the timing pass was disturbed")
    assert c.layers is not None and not any(r.unconfirmed for r in c.layers)  # the layers passes were clean
    assert any(n.startswith("run B: the timing pass was disturbed") and "marked ?" in n for n in c.notes)
    stages = next(s for s in specs(c) if s.title.startswith("stages"))
    assert any(cell.endswith("x?") for row in stages.rows for cell in row)
    clean = compare_runs([base, make_run(tmp_path / "c")])
    assert not any(r.unconfirmed for r in clean.stages)
