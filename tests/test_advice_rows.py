"""Advice rows from the workers' results: paired and pass-level speed-ups, per image, output, drift, ranking."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from hwprof.advisor.output_check import matched_detections
from hwprof.analysis.advice.candidate import Candidate, Variant
from hwprof.analysis.advice.rows import baseline_drift, measured_row
from hwprof.analysis.advice.speedup import Speedup, paired_speedup
from hwprof.analysis.advice.table import (
    CHANGED_OUTPUT,
    Advice,
    AdviceRow,
    top_layer_deltas,
)
from hwprof.analysis.paired_cost import PAIRED, PASS_LEVEL
from hwprof.schema.advise_result import AdviseResult
from hwprof.schema.check import RunDirError

BEFORE = [10.0, 11.0, 10.5, 10.2, 12.0, 10.1, 10.4, 10.3]
AFTER = [8.0, 8.4, 8.1, 9.0, 8.2, 8.3, 8.0, 8.6]


def side(forward: list[float], batch: int = 1, **extra: object) -> dict:
    return {
        "forward_ms": {str(i): v for i, v in enumerate(forward)},
        "iteration_ms": {str(i): v + 5.0 for i, v in enumerate(forward)},
        "stamps": {str(i): [i * 100, i * 100 + 50, i * 100 + 10, i * 100 + 40] for i in range(len(forward))},
        "batch": batch,
        "setup": {"prepare_s": 1.0, "first_forward_s": 3.0},
        **extra,
    }


def output(detections: int = 10, matched: int = 10) -> dict:
    return dict(
        head_max_abs=0.01,
        head_range=100.0,
        candidates_reference=40,
        candidates=40,
        detections_reference=10,
        detections=detections,
        matched=matched,
    )


def paired_result() -> dict:
    return {"sides": {"baseline": side(BEFORE), "variant": side(AFTER)}, "output": output()}


def read(results: dict[str, dict]) -> dict[str, AdviseResult]:
    """The workers' out files as the runner reads them."""
    return {mode: AdviseResult.from_json(doc, f"{mode}.json") for mode, doc in results.items()}


def drift(paired: dict) -> float | None:
    return baseline_drift(AdviseResult.from_json(paired, "paired.json"))


def test_paired_speedup_is_the_median_of_the_blocks_before_over_after() -> None:
    s = paired_speedup(dict(enumerate(BEFORE)), dict(enumerate(AFTER)))
    assert s is not None and s.method == PAIRED and s.blocks == 4
    blocks = [(BEFORE[2 * b] + BEFORE[2 * b + 1]) / (AFTER[2 * b] + AFTER[2 * b + 1]) for b in range(4)]
    assert s.ratio == pytest.approx(statistics.median(blocks))
    assert s.low == pytest.approx(min(blocks)) and s.high == pytest.approx(max(blocks))
    assert s.resolved and s.q1 is not None and s.q1 > 1


def test_a_paired_row_has_speedups_setup_breakeven_output_and_trace_blocks() -> None:
    c = Candidate("compile", "torch.compile", "code", (), compile_mode="default", finding="f")
    blocks: list = []
    row = measured_row(c, read({"paired": paired_result()}), blocks)
    assert row.forward is not None and row.forward.ratio > 1 and row.ranked
    assert row.end_to_end is not None and row.end_to_end.ratio < row.forward.ratio  # +5 ms on both sides
    after = statistics.median(AFTER)
    assert row.setup_s == pytest.approx(1.0 + 3.0 - after / 1e3)
    saved = statistics.median(BEFORE) - after
    assert row.breakeven_inferences == pytest.approx(row.setup_s * 1e3 / saved)
    assert len(blocks) == 2 * len(BEFORE) and {b.side for b in blocks} == {"baseline", "variant"}
    assert max(b.block for b in blocks) == 3


def test_a_row_whose_p50s_disagree_with_its_block_ratio_is_not_advice() -> None:
    row = AdviceRow("x", "x", "x", "f", forward=Speedup(PAIRED, 1.34, 1.01, 1.5, before_ms=990.0, after_ms=1026.0))
    assert not row.ranked
    row.forward = Speedup(PAIRED, 1.34, 1.01, 1.5, before_ms=990.0, after_ms=800.0)
    assert row.ranked


def test_a_batch_change_is_compared_per_image() -> None:
    c = Candidate("batch-8", "batch 8", "--batch 8", (), Variant(batch=8))
    eight = side([8 * a for a in AFTER], 8)
    row = measured_row(c, read({"paired": {"sides": {"baseline": side(BEFORE), "variant": eight}}}), [])
    assert row.per_image and row.forward is not None
    assert row.forward.after_ms == pytest.approx(statistics.median(AFTER))


def test_changed_detections_mark_the_row_and_it_is_never_advice() -> None:
    c = Candidate("int8", "int8", "--precision int8", (), Variant(precision="int8"))
    result = {"sides": {"baseline": side(BEFORE), "variant": side(AFTER)}, "output": output(12, 8)}
    row = measured_row(c, read({"paired": result}), [])
    assert row.status == CHANGED_OUTPUT and not row.ranked and "10->12, 8 matched" in row.reason
    assert row.forward is not None and row.forward.ratio > 1  # faster, and still not advice
    advice = Advice("--model m", "cpu", [row, AdviceRow("x", "x", "x", "f", forward=Speedup(PAIRED, 1.01, 0.99, 1.03))])
    assert [r.key for r in advice.ordered()] == ["int8", "x"]  # neither is ranked; faster first among them


def test_a_pass_level_row_is_labelled_as_such() -> None:
    c = Candidate("omp-passive", "omp", "OMP_WAIT_POLICY=PASSIVE", (), env={"OMP_WAIT_POLICY": "PASSIVE"})
    results = {"baseline": {"sides": {"baseline": side(BEFORE)}}, "variant": {"sides": {"variant": side(AFTER)}}}
    blocks: list = []
    row = measured_row(c, read(results), blocks)
    assert row.forward is not None and row.forward.method == PASS_LEVEL and row.forward.blocks == 0
    assert blocks == []  # two processes one after the other are no ABBA block for the trace
    assert row.forward.ratio == pytest.approx(statistics.median(BEFORE) / statistics.median(AFTER))


def test_baseline_drift_compares_the_blocks_with_the_baseline_alone() -> None:
    paired = {"sides": {"baseline": side(BEFORE, solo_forward_ms={"0": 5.0, "1": 5.2})}}
    assert drift(paired) == pytest.approx(statistics.median(BEFORE) / 5.2)  # above the solo range
    fast = {"sides": {"baseline": side(BEFORE, solo_forward_ms={"0": 20.0, "1": 30.0})}}
    assert drift(fast) == pytest.approx(statistics.median(BEFORE) / 20.0)  # below it
    wide = {"sides": {"baseline": side(BEFORE, solo_forward_ms={"0": 5.0, "1": 30.0})}}
    assert drift(wide) == 1.0  # a load that moved widens the solo range: not interference
    assert drift({"sides": {"baseline": side(BEFORE)}}) is None


def test_advice_json_round_trips() -> None:
    c = Candidate("channels_last", "cl", "--channels-last", (), Variant(channels_last=True), finding="f")
    blocks: list = []
    row = measured_row(c, read({"paired": paired_result()}), blocks)
    row.layers = top_layer_deltas({0: ("Conv", 5.0), 1: ("C2f", 3.0), 2: ("SPPF", 1.0)}, {0: 4.0, 1: 3.1, 2: 2.5}, 2)
    advice = Advice("--model m", "cpu", [row], blocks)
    back = Advice.from_dict(advice.to_dict())
    assert back.to_dict() == advice.to_dict()
    assert [(d.index, d.delta_ms) for d in back.rows[0].layers] == [(2, 1.5), (0, -1.0)]


def test_detections_match_one_to_one_by_class_and_iou(monkeypatch: pytest.MonkeyPatch) -> None:
    # importing ultralytics sets OMP_NUM_THREADS=1 in os.environ when unset, and every later subprocess of the
    # test session (a real collect) would inherit it: set it here, so monkeypatch removes it again after
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    import torch

    ref = [torch.tensor([[0, 0, 10, 10, 0.9, 1], [20, 20, 30, 30, 0.8, 2]], dtype=torch.float32)]
    moved = [torch.tensor([[1, 0, 11, 10, 0.9, 1], [20, 20, 30, 30, 0.7, 3]], dtype=torch.float32)]
    assert matched_detections(ref, ref) == 2
    assert matched_detections(ref, moved) == 1  # the second box changed class
    twice = [torch.tensor([[0, 0, 10, 10, 0.9, 1], [0, 0, 10, 10, 0.8, 1]], dtype=torch.float32)]
    assert matched_detections(ref, twice) == 1  # one reference box matches once
    # boxes of zero width or height (a random-init head gives them) match themselves, not a shifted copy
    flat = [torch.tensor([[475.6, 219.5, 475.6, 363.5, 0.99, 4], [394.0, 277.2, 585.5, 277.2, 0.89, 31]])]
    assert matched_detections(flat, flat) == 2
    shifted = [flat[0] + torch.tensor([3.0, 0, 3.0, 0, 0, 0])]
    assert matched_detections(flat, shifted) == 1  # the line moved 3 px sideways; the horizontal one moved along


def test_the_worker_result_round_trips_with_every_key_known() -> None:
    """paired_worker's out file as written (side_figures: forward, iteration, stamps, batch, threads, setup,
    runtime; the baseline's solo forward; the output check) is read back key for key."""
    doc = paired_result() | {"mode": "paired"}
    doc["sides"]["baseline"] |= {"threads": 4, "runtime": {"name": "torch"}, "solo_forward_ms": {"0": 5.0}}
    result = AdviseResult.from_json(doc, "paired.json")
    assert result.to_json() == doc and result.unknown_keys() == []
    assert result.sides["variant"].setup.first_forward_s == 3.0 and result.sides["baseline"].images_per_batch == 1
    assert drift({"error": "RuntimeError: boom"}) is None


@pytest.mark.parametrize(
    ("damage", "field", "expected"),
    [
        (lambda d: d["sides"]["variant"].update(batch="8"), "sides.variant.batch", "must be an integer"),
        (
            lambda d: d["sides"]["variant"]["setup"].update(prepare_s="1"),
            "sides.variant.setup.prepare_s",
            "must be a number",
        ),
        (lambda d: d["sides"]["baseline"].pop("forward_ms"), "sides.baseline.forward_ms", "is missing"),
        (lambda d: d.update(sides=[]), "sides", "must be an object"),
    ],
)
def test_a_damaged_worker_result_names_file_and_field(damage: Any, field: str, expected: str) -> None:
    doc = paired_result()
    damage(doc)
    with pytest.raises(RunDirError) as err:
        AdviseResult.from_json(doc, "work/paired.json")
    message = str(err.value)
    assert "\n" not in message and message.startswith(f'work/paired.json: field "{field}" {expected}'), message


def test_the_contenders_are_the_fastest_rows_measured_with_their_output_checked() -> None:
    """Whose variant gets a layers collect (hwprof.advisor.runner._contenders_layers): a row that changed the output
    (openvino-bf16, 2.1x) is no contender however fast; a ranked row comes before an unresolved one; a not-run or
    failed row never is."""
    from advice_sample import sample_rows

    from hwprof.analysis.advice.table import contenders

    rows = sample_rows()
    unresolved = next(r.key for r in rows if r.forward is not None and r.forward.method == "pass-level estimate")
    assert contenders(rows, 2) == {"compile", "channels_last"}
    assert contenders(rows, 3) == {"compile", "channels_last", unresolved}
    assert contenders(rows, 10) == contenders(rows, 3)  # the others are not contenders at any count
