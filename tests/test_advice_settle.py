"""The end of advise's race (issue 66): the contenders among the first rows get more paired blocks, in processes of
their own, until the 95% intervals of their median speed-ups are apart, their rounds or their share of advise's
time are spent; a process whose guard fires is kept out of the figure; each row says how far it ran."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from hwprof.advisor import runner as runner_module
from hwprof.advisor.children import ChildOutcome
from hwprof.advisor.program_budget import Budget, CallsSeen
from hwprof.advisor.runner import AdvisePlan, AdviseRun
from hwprof.analysis.advice.candidate import Candidate, RunFacts, Variant
from hwprof.analysis.advice.race import SETTLE_BLOCKS, settled_text, top_order
from hwprof.analysis.advice.speedup import PAIRED, Speedup
from hwprof.analysis.advice.table import Advice, AdviceRow
from hwprof.core.config import RunConfig
from hwprof.perf.neighbours import NeighbourLoad
from hwprof.render.advice.table import advice_spec
from hwprof.rundir.advise_files import write_advise_result
from hwprof.schema.advise_result import AdviseResult, AdviseSpec
from hwprof.session.stopping import StopSignals

FIRST = {
    "first": [1.9, 2.1, 2.0, 1.95, 2.05, 2.0, 1.92, 2.08],
    "second": [1.85, 2.0, 1.9, 1.88, 1.93, 1.95, 1.87, 1.91],
    "third": [1.5, 1.45, 1.55, 1.5, 1.52, 1.48, 1.5, 1.51],
}
"""Each candidate's first process: the blocks' ratios. first's and second's 95% intervals (their ranges, at 8
blocks) overlap; second's and third's do not."""
MORE = {
    "first": [2.0, 2.01, 1.99, 2.02, 2.0, 1.98, 2.01, 2.0],
    "second": [1.9, 1.9, 1.89, 1.9, 1.91, 1.9, 1.9, 1.9],
}
"""Their second processes: pooled, first's interval 1.98-2.02 lies above second's 1.89-1.93."""
BASELINE_MS = 30.0


def paired(ratios: list[float], moved: bool = False) -> AdviseResult:
    """A paired worker's result whose blocks have these ratios (the baseline at 30 ms); `moved`: the variant's
    forward alone 1.3x faster than beside the baseline (the pairing guard fires)."""

    def side(forward: list[float], solo: float) -> dict[str, Any]:
        ms = {str(i): v for i, v in enumerate(forward)}
        return {
            "forward_ms": ms,
            "iteration_ms": {k: v + 1.0 for k, v in ms.items()},
            "batch": 1,
            "setup": {"prepare_s": 1.0, "first_forward_s": 1.0},
            "solo_forward_ms": {str(i): solo for i in range(4)},
            "stamps": {str(i): [100 * i, 100 * i + 50, 100 * i + 10, 100 * i + 40] for i in range(len(forward))},
        }

    variant = [BASELINE_MS / r for r in ratios for _ in (0, 1)]
    solo = statistics.median(variant) / (1.3 if moved else 1.0)
    doc = {"sides": {"baseline": side([BASELINE_MS] * len(variant), BASELINE_MS), "variant": side(variant, solo)}}
    return AdviseResult.from_json(doc, "paired.json")


def candidate(key: str) -> Candidate:
    return Candidate(key, key, f"--{key}", (), Variant(runtime="openvino"), finding="f")


def advise(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    results: dict[tuple[str, str], AdviseResult],
    share: float,
    program: bool = False,
) -> tuple[Advice, list[tuple[str, str]]]:
    """advise's candidates run (not a zygote's: _run) with each (key, process name)'s result written for it."""
    started: list[tuple[str, str]] = []

    def worker(run: AdviseRun, spec: AdviseSpec, work: Path, c: Candidate, name: str) -> ChildOutcome:
        started.append((c.key, name))
        assert spec.blocks == (SETTLE_BLOCKS if name != "paired" else 8) and (name == "paired" or not spec.race_bar)
        write_advise_result(Path(spec.out), results[(c.key, name)])
        return ChildOutcome(0)

    class QuietWatch:  # the host's own load never decides these rows
        def start(self) -> QuietWatch:
            return self

        def stop(self) -> NeighbourLoad:
            return NeighbourLoad(1.0, [0, 1], 0.0, 0.0, 0.0, 1.0, [])

    monkeypatch.setattr(AdviseRun, "_worker", worker)
    monkeypatch.setattr(runner_module, "NeighbourWatch", QuietWatch)
    monkeypatch.setattr(runner_module, "SETTLE_SHARE", share)
    config = RunConfig(model="yolov7-tiny", imgsz=320, threads=2)
    facts = RunFacts("torch", "fp32", "cpu", False, 2, 1, None)
    plan = AdvisePlan(tmp_path, config, facts, [candidate(k) for k in FIRST], blocks=8, layers=False)
    if program:  # a program's budget: its calls counted for the plan's blocks (hwprof.advisor.program_budget)
        plan.budget, plan.calls = Budget(1, 8, 3), CallsSeen(10_000, True, "the run")
    return AdviseRun(plan, StopSignals(), lambda key, event: None)._run(), started


def _rows(advice: Advice) -> dict[str, AdviceRow]:
    return {r.key: r for r in advice.rows}


def test_the_contenders_whose_order_is_open_get_more_blocks_until_it_is_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = {(k, "paired"): paired(v) for k, v in FIRST.items()}
    results |= {(k, "paired-2"): paired(v) for k, v in MORE.items()}
    advice, started = advise(tmp_path, monkeypatch, results, share=1000.0)
    assert started == [(k, "paired") for k in FIRST] + [("first", "paired-2"), ("second", "paired-2")]
    rows = _rows(advice)
    first = rows["first"].forward
    assert first is not None and first.blocks == 16 and first.method == PAIRED
    assert first.ratio == pytest.approx(statistics.median(FIRST["first"] + MORE["first"]))
    assert rows["first"].race == (
        "ran the plan's 8 blocks; then 8 more in 1 paired process of its own to settle the order of the first rows "
        "(16 blocks in all, the same statistics over all of them)"
    )
    assert rows["third"].race == "" and rows["third"].forward is not None and rows["third"].forward.blocks == 8
    assert [r.key for r in advice.ordered()] == ["first", "second", "third"]
    assert any(n.startswith("the first rows' order is resolved") for n in advice.notes), advice.notes
    stamped = [b.block for b in advice.blocks if b.key == "first" and b.side == "variant"]  # both processes' stamps
    assert sorted(set(stamped)) == list(range(16)) and len(stamped) == 32
    assert any(line.startswith("first: ran the plan's 8 blocks; then 8 more") for line in advice_spec(advice).notes)


def test_a_more_process_whose_pairing_moved_is_kept_out_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = {(k, "paired"): paired(v) for k, v in FIRST.items()}
    results |= {
        ("first", "paired-2"): paired(MORE["first"], moved=True),
        ("second", "paired-2"): paired(MORE["second"]),
    }
    results |= {("second", "paired-3"): paired(MORE["second"])}
    advice, started = advise(tmp_path, monkeypatch, results, share=1000.0)
    rows = _rows(advice)
    assert rows["first"].forward is not None and rows["first"].forward.blocks == 8  # its second process not pooled
    assert "its process paired-2 was not pooled: beside the baseline, the variant's" in rows["first"].race
    assert ("first", "paired-3") not in started and ("second", "paired-3") in started
    assert any(n.startswith("the first rows' order is not resolved") for n in advice.notes), advice.notes


def test_the_settling_stops_at_its_share_of_advises_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = {(k, "paired"): paired(v) for k, v in FIRST.items()}
    advice, started = advise(tmp_path, monkeypatch, results, share=0.0)
    assert started == [(k, "paired") for k in FIRST]
    note = next(n for n in advice.notes if n.startswith("the first rows' order"))
    assert "is not resolved" in note and "would pass its share of advise's time" in note, note


def test_the_order_holds_a_process_level_row_to_its_spread_and_gives_it_no_blocks() -> None:
    """A row measured as processes has no blocks to add: its spread is its interval, and only its paired
    neighbour may get more blocks."""
    level = AdviceRow("env", "env", "--env", "f")
    level.forward = Speedup("pass-level estimate", 2.0, None, None, 1.9, 2.1, 0, 30.0, 15.0)
    pair = AdviceRow("pair", "pair", "--pair", "f")
    pair.forward = Speedup(PAIRED, 1.95, 1.9, 2.0, 1.85, 2.05, 8, 30.0, 15.4)
    order = top_order([level, pair], {"pair": FIRST["second"]}, {"pair"})
    assert order.keys == ["env", "pair"] and order.open_pairs == [("env", "pair")] and order.extend == ["pair"]
    assert order.bands["env"] == (1.9, 2.1) and order.bands["pair"] == (1.85, 2.0)


def test_a_row_that_left_the_race_and_was_settled_says_both() -> None:
    """channels_last+bf16 on yolov7-tiny 320 (2026-11-29): below the best after its first 4 blocks, then third of
    the first rows, whose order its neighbours' intervals left open."""
    left = "left the race after 4 of 8 blocks: its spread 2.23-2.38 lies wholly below that of openvino-bf16 (4.04-4.24)"
    assert settled_text(left, 4, 20, 3) == (
        f"{left}; then 16 more in 2 paired processes of its own to settle the order of the first rows (20 blocks in "
        "all, the same statistics over all of them)"
    )


def test_a_programs_rows_are_not_settled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each more process would run the program again, whose calls its budget counted for the plan's blocks."""
    results = {(k, "paired"): paired(v) for k, v in FIRST.items()}
    advice, started = advise(tmp_path, monkeypatch, results, share=1000.0, program=True)
    assert started == [(k, "paired") for k in FIRST]
    assert not any(n.startswith("the first rows' order") for n in advice.notes)


def test_an_open_pair_of_process_level_rows_is_said_to_have_no_blocks_to_add() -> None:
    """yolov7-tiny 320 (2026-11-29 11:16): onnxruntime 2.57-2.71 and openvino 2.47-2.62, both measured as
    processes: nothing to run, and the note says why."""
    from hwprof.advisor.settle import Settling

    rows = []
    for key, ratio, low, high in (("onnxruntime", 2.64, 2.57, 2.71), ("openvino", 2.55, 2.47, 2.62)):
        r = AdviceRow(key, key, f"--{key}", "f")
        r.forward = Speedup("pass-level estimate", ratio, None, None, low, high, 0, 30.0, 30.0 / ratio)
        rows.append(r)
    advice = Advice("--model m", "cpu", rows)

    def never(*_: object) -> Any:
        raise AssertionError("no process to run")

    note = Settling(advice, never, never, lambda: False, lambda: None).run(1000.0)
    assert note.startswith("the first rows' order is not resolved"), note
    assert note.endswith("not given more blocks: onnxruntime and openvino: measured as processes (no blocks to add)")
