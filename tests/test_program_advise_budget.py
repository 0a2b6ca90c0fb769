"""advise on a program knows its budget before it spends it (issue 45): the calls each candidate's schedule needs
against the calls the run saw (or advise counted), refused in one line where too few; advice.json's `resolved`
and the table's NOT RESOLVED from one property; an interrupted advise names what finished and what was cut."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_program_advise import worker_spec

from hwprof.advisor.program_budget import (
    COUNT_MODE,
    Budget,
    CallsSeen,
    calls_line,
    calls_seen,
    count_needed,
    finder_calls,
    refusal,
)
from hwprof.advisor.program_target import program_baseline
from hwprof.advisor.program_worker import run as run_worker
from hwprof.advisor.runner import plan_advice
from hwprof.analysis.advice.candidate import Candidate, Variant
from hwprof.analysis.advice.interrupt import INTERRUPTED, NOT_STARTED, interrupted_note, interrupted_rows
from hwprof.analysis.advice.speedup import Speedup
from hwprof.analysis.advice.table import FAILED, MEASURED, NOT_RUN, Advice, AdviceRow
from hwprof.analysis.paired_cost import PASS_LEVEL
from hwprof.core.config import RunConfig
from hwprof.core.program_spec import ProgramSpec
from hwprof.program.advise_calls import BASELINE, paired_steps, single_steps
from hwprof.render.advice.export import csv_row
from hwprof.render.advice.table import advice_spec
from hwprof.schema.advise_result import AdviseResult, AdviseSpec
from hwprof.schema.program import ProgramOutcome

FIXTURE = Path(__file__).parent / "fixtures" / "program_run"
PAIRED_C = Candidate("channels_last", "nhwc", "code: x", (), Variant(channels_last=True))
ENV_C = Candidate("threads-1", "1 thread", "OMP_NUM_THREADS=1 python p.py", (), Variant(threads=1), env={"X": "1"})


def outcome(calls: int, ended: str, model: str | None = "model") -> ProgramOutcome:
    return ProgramOutcome.of(calls=calls, ended=ended, model=model)


def test_a_pass_that_saw_the_program_end_gives_its_count_and_a_stopped_one_a_lower_bound() -> None:
    stopped = outcome(14, "stopped after the measured calls")
    seen = calls_seen([("timing", stopped), ("layers", outcome(30, "ran to its end"))])
    assert seen == CallsSeen(30, True, "the run's layers pass saw the program end after 30")
    bound = calls_seen([("timing", stopped), ("layers", outcome(24, "stopped after the measured calls"))])
    assert bound is not None and not bound.exact and bound.calls == 24
    assert calls_seen([("timing", outcome(3, "ran to its end", model=None))]) is None


def test_each_candidate_needs_the_finder_s_calls_and_its_schedule() -> None:
    budget = Budget(warmup=2, blocks=8, before=finder_calls(None))
    assert budget.needs(PAIRED_C) == 2 + len(paired_steps(2, 8)) == 47  # the 45 once found, and 2 to find it
    assert budget.needs(ENV_C) == 2 + len(single_steps(BASELINE, 2, 8)) == 20
    assert Budget(2, 8, finder_calls("detector.model")).needs(ENV_C) == 19
    for calls in (20, 30, 47, 60):  # the most blocks that fit do fit, one more does not
        for c in (PAIRED_C, ENV_C):
            b = budget.most_blocks(not c.env, calls)
            if b:
                assert Budget(2, b, 2).needs(c) <= calls < Budget(2, b + 1, 2).needs(c)


def test_too_few_calls_are_refused_in_one_line_with_the_calls_needed_and_the_fix() -> None:
    budget = Budget(warmup=2, blocks=8, before=2)
    seen = CallsSeen(30, True, "the run's timing pass saw the program end after 30")
    line = refusal(seen, budget, [ENV_C, PAIRED_C], "run")
    assert "\n" not in line and line.startswith("the program makes 30 calls of its model (the run's timing pass")
    assert "advise needs 47 for channels_last at 8 blocks (" in line and "threads-1" not in line.split("fix:")[0]
    assert "more images or frames" in line and "`hwprof advise run --only threads-1` (20 calls at 8 blocks)" in line
    # channels_last would fit at 3 blocks, fewer than a cost is resolved from (issue 58): not named
    assert Budget(2, 3, 2).needs(PAIRED_C) <= 30 < Budget(2, 4, 2).needs(PAIRED_C) and "--blocks 3" not in line
    alone = refusal(seen, budget, [PAIRED_C], "run", prefix="advise-")
    assert "none fits in 30 calls even at --advise-blocks 4 (" in alone and "channels_last needs 31 there" in alone
    assert refusal(CallsSeen(47, True, ""), budget, [ENV_C, PAIRED_C], "run") == ""


def test_a_lower_bound_short_of_the_schedules_is_counted_first_and_says_so() -> None:
    budget = Budget(2, 8, 2)
    bound = CallsSeen(14, False, "the run's timing pass stopped the program after 14")
    assert count_needed(budget, bound, [PAIRED_C]) == 47
    assert "counting them first (one run of the program, stopped at 47)" in calls_line(budget, bound, [PAIRED_C])
    assert count_needed(budget, CallsSeen(60, False, "x"), [PAIRED_C]) == 0  # the bound is enough already
    assert count_needed(budget, CallsSeen(14, True, "x"), [PAIRED_C]) == 0  # all of them: refused, not counted
    assert count_needed(budget, bound, []) == 0


def test_a_run_that_saw_the_program_end_with_too_few_calls_is_refused_before_anything_runs(tmp_path: Path) -> None:
    run = run_whose_program_ended(tmp_path, calls=30)
    with pytest.raises(ValueError, match=r"^the program makes 30 calls of its model .*advise needs 47 for ") as exc:
        plan_advice(run, blocks=8)
    assert "no candidate was run" in str(exc.value) and not (run / "advise").exists()
    plan = plan_advice(run, blocks=2)  # 2 blocks: 23 calls, enough
    assert plan.calls is not None and plan.calls.exact and plan.count_needed() == 0


def test_the_worker_counts_a_program_s_calls_up_to_the_number_asked(tmp_path: Path) -> None:
    spec = worker_spec(tmp_path, 8)
    assert _counted(spec, 40).calls == 6  # it ended: its 8 calls, 2 of them the finder's
    assert _counted(spec, 4).calls == 4  # stopped once it made as many as asked


def _counted(spec: AdviseSpec, calls: int) -> AdviseResult:
    one = spec.for_mode(COUNT_MODE, "")
    one.update(calls=calls)
    return run_worker(one)


def test_the_baseline_is_printed_as_the_user_types_it() -> None:
    spec = ProgramSpec(["detect.py", "--source", "my images"], "/w", model_path="detector.model")
    config = RunConfig(threads=2, program=spec)
    assert (
        program_baseline(config)
        == "--threads 2 --program-model detector.model -- python detect.py --source 'my images'"
    )


def _row(key: str, disturbed: str = "") -> AdviceRow:
    forward = Speedup(PASS_LEVEL, 1.3, q1=1.2, q3=1.4, blocks=8, before_ms=10.0, after_ms=7.7)
    return AdviceRow(key, key, f"OMP_X=1 python {key}.py", "f", MEASURED, forward=forward, disturbed=disturbed)


def test_resolved_in_advice_json_and_csv_agrees_with_the_table() -> None:
    advice = Advice(
        "--threads 2 -- python p.py", "cpu", [_row("clean"), _row("busy", "the baseline process was disturbed")]
    )
    doc = advice.to_dict()
    rows = {r["key"]: r for r in doc["rows"]}
    assert rows["clean"]["resolved"] and rows["clean"]["forward"]["resolved"] and rows["clean"]["ranked"]
    busy = rows["busy"]
    assert busy["resolved"] is False and busy["forward"]["resolved"] is False and busy["ranked"] is False
    assert csv_row(advice.rows[1], None)["forward_resolved"] is False
    spec = advice_spec(advice)
    cells = {row[1].split("\n")[0].split(" [")[0]: row for row in spec.rows}
    assert cells["busy"][2].startswith("not resolved") and "not resolved" not in cells["clean"][2]
    for key, row in rows.items():  # one source: the table marks exactly the rows the file says are not resolved
        assert cells[key][2].startswith("not resolved") == (not row["resolved"])
    assert Advice.from_dict(json.loads(json.dumps(doc))).to_dict() == doc


def test_an_interrupted_advise_names_the_finished_the_cut_and_the_never_started() -> None:
    runnable = [ENV_C, PAIRED_C, Candidate("compile", "c", "code: c", (), compile_mode="default")]
    rows = [
        _row("threads-1"),
        AdviceRow("channels_last", "c", "h", "f", FAILED, reason=f"{INTERRUPTED} at 13 of 45 calls"),
    ]
    rows += interrupted_rows(runnable, rows)
    assert [(r.key, r.status, r.reason) for r in rows[2:]] == [("compile", NOT_RUN, NOT_STARTED)]
    note = interrupted_note("SIGINT", runnable, rows)
    assert note == (
        "interrupted by SIGINT: 1 of 3 candidates finished (threads-1); cut: channels_last (interrupted at 13 of 45 "
        "calls); not started: compile"
    )


def run_whose_program_ended(tmp_path: Path, calls: int) -> Path:
    """A copy of the recorded program run whose timing pass saw the program end after `calls` calls."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    doc = json.loads((run / "run.json").read_text())
    doc["passes"]["timing"]["program"].update(calls=calls, ended="ran to its end")
    (run / "run.json").write_text(json.dumps(doc))
    return run
