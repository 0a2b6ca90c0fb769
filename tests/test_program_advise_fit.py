"""advise on a program (issue 58): the refusal of a program with too few calls names the `hwprof advise` command
whose --blocks and --only fit the calls it makes (and that command runs), computed from the schedules' own
budget; a program that fails in one of advise's runs shows its own error and advise exits non-zero."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from test_program_advise import worker_spec
from test_program_advise_budget import run_whose_program_ended

from hwprof.advisor.program_budget import COUNT_MODE, Budget, CallsSeen, fits, refusal
from hwprof.advisor.program_failure import ProgramFailed
from hwprof.advisor.program_target import count_calls
from hwprof.advisor.program_worker import run as run_worker
from hwprof.advisor.runner import plan_advice
from hwprof.analysis.advice.candidate import Candidate, Variant
from hwprof.analysis.paired_cost import MIN_BLOCKS
from hwprof.cli.args import build_parser
from hwprof.core.config import RunConfig
from hwprof.core.program_spec import ProgramSpec
from hwprof.session.stopping import StopSignals

FIXTURE = Path(__file__).parent / "fixtures" / "program_run"
ENV_KEYS = ("threads-1", "omp-passive", "malloc-keep")
PAIRED_KEYS = ("channels_last", "bf16", "compile")
SIX = [Candidate(k, k, f"X=1 python p.py ({k})", (), Variant(threads=1), env={"X": "1"}) for k in ENV_KEYS] + [
    Candidate(k, k, f"code: {k}", (), Variant(channels_last=True)) for k in PAIRED_KEYS
]
MISSING = "ModuleNotFoundError: No module named 'nonexistent_module_xyz'"


def named_command(line: str) -> list[str]:
    """The first `hwprof advise ...` command a refusal names, as words."""
    match = re.search(r"`(hwprof advise [^`]*)`", line)
    assert match, line
    return shlex.split(match.group(1))


def exact(calls: int) -> CallsSeen:
    return CallsSeen(calls, True, f"the run's timing pass saw the program end after {calls}")


def test_the_issue_s_six_candidates_in_12_calls_are_refused_naming_the_blocks_and_only_that_fit() -> None:
    budget = Budget(warmup=2, blocks=8, before=2)
    line = refusal(exact(12), budget, SIX, "runs/a b")
    assert "\n" not in line and line.startswith("the program makes 12 calls of its model")
    assert "advise needs 47 for threads-1, omp-passive, malloc-keep, channels_last, bf16, compile at 8 blocks" in line
    words = named_command(line)
    assert words == ["hwprof", "advise", "runs/a b", "--blocks", "4", "--only", "threads-1,omp-passive,malloc-keep"]
    assert "(12 calls at 4 blocks)" in line and line.endswith("for at least 47 calls of its model")
    args = build_parser().parse_args(words[1:])  # the command parses as hwprof's own
    named = [c for c in SIX if c.key in args.advise_only.split(",")]
    assert Budget(2, args.blocks, 2).most(named) <= 12 < Budget(2, args.blocks + 1, 2).most(named)
    assert all(Budget(2, MIN_BLOCKS, 2).needs(c) > 12 for c in SIX if c not in named)  # none left out would fit


def test_the_candidates_that_fit_now_come_first_then_the_most_that_fit_at_fewer_blocks() -> None:
    budget = Budget(warmup=2, blocks=8, before=2)
    # 31 calls: the environment's at 8 blocks (20), every one at 4 (a paired schedule then takes 31)
    assert [(f.blocks, f.keys, f.need) for f in fits(31, budget, SIX)] == [
        (8, ENV_KEYS, 20),
        (4, ENV_KEYS + PAIRED_KEYS, 31),
    ]
    line = refusal(exact(31), budget, SIX, "run")
    assert "run `hwprof advise run --only threads-1,omp-passive,malloc-keep` (20 calls at 8 blocks), or run " in line
    assert "`hwprof advise run --blocks 4` (31 calls at 4 blocks)" in line  # every candidate: no --only
    # 38: paired ones fit at 5 blocks, the most that all fit
    assert fits(38, budget, SIX)[-1].blocks == 5 and Budget(2, 6, 2).most(SIX) > 38 >= Budget(2, 5, 2).most(SIX)
    # what the user asked for stays in the command: an --only of all of them, blocks other than the default
    asked = refusal(exact(31), budget, SIX, "run", only=True)
    assert "`hwprof advise run --blocks 4 --only threads-1,omp-passive,malloc-keep,channels_last,bf16,compile`" in asked
    assert "`hwprof advise run --blocks 6 --only threads-1,omp-passive,malloc-keep` (16 calls at 6 blocks)" in refusal(
        exact(31), Budget(2, 6, 2), SIX, "run"
    )
    # collect --advise's door: its own options named beside the command on the run it kept
    assert "(collect's --advise-blocks 4)" in refusal(exact(31), budget, SIX, "run", prefix="advise-")


def test_no_candidate_fitting_even_at_the_fewest_blocks_a_cost_resolves_from_is_said() -> None:
    budget = Budget(warmup=2, blocks=8, before=2)
    line = refusal(exact(10), budget, SIX, "run")
    assert fits(10, budget, SIX) == [] and "`hwprof advise" not in line
    assert f"none fits in 10 calls even at --blocks {MIN_BLOCKS} (the fewest a cost is resolved from: " in line
    assert "threads-1 needs 12 there); fix: give the program more input" in line
    # never fewer blocks than asked for where that is below MIN_BLOCKS: 2 asked, 2 suggested at most
    assert all(f.blocks <= 2 for f in fits(10, Budget(2, 2, 2), SIX))


def test_a_run_refused_names_a_command_that_then_plans(tmp_path: Path) -> None:
    run = run_whose_program_ended(tmp_path, calls=12)
    with pytest.raises(ValueError, match=r"^the program makes 12 calls of its model .*advise needs 47 ") as exc:
        plan_advice(run, blocks=8)
    args = build_parser().parse_args(named_command(str(exc.value))[1:])
    assert args.run_dir == run and args.blocks == MIN_BLOCKS
    plan = plan_advice(args.run_dir, args.blocks, only=tuple(args.advise_only.split(",")))
    assert [c.key for c in plan.runnable] == list(ENV_KEYS) and plan.count_needed() == 0


@pytest.mark.parametrize("mode", ["paired", "baseline", COUNT_MODE])
def test_a_program_failing_unchanged_in_the_worker_is_its_own_error(tmp_path: Path, mode: str) -> None:
    spec = worker_spec(tmp_path, 40)
    (tmp_path / "tiny.py").write_text("import nonexistent_module_xyz\n")
    one = spec if mode == "paired" else spec.for_mode(mode, "")
    one.update(calls=10)  # the count's: stop at 10 calls once found
    with pytest.raises(ProgramFailed) as exc:
        run_worker(one)
    assert str(exc.value) == f"the program failed before it called its model: {MISSING}"


def test_a_program_failing_with_the_change_fails_the_candidate_not_advise(tmp_path: Path) -> None:
    spec = worker_spec(tmp_path, 40)
    (tmp_path / "tiny.py").write_text("import nonexistent_module_xyz\n")
    with pytest.raises(ValueError) as exc:
        run_worker(spec.for_mode("variant", ""))
    assert not isinstance(exc.value, ProgramFailed)
    assert str(exc.value) == f"the program failed with the change, before it called its model: {MISSING}"


def test_advise_s_count_of_a_program_that_fails_names_its_error(tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text("import torch\nimport nonexistent_module_xyz\n")
    config = RunConfig(threads=1, program=ProgramSpec([str(script)], str(tmp_path)))
    (tmp_path / "advise").mkdir()
    with pytest.raises(ProgramFailed) as exc:
        count_calls(config, tmp_path, 10, tmp_path / "advise", StopSignals(), lambda e: None)
    message = str(exc.value)
    assert message.startswith(f"the program failed before it called its model: {MISSING}, in advise's count")
    assert "called no torch module" not in message and str(tmp_path / "advise" / "count.log") in message
    assert "Traceback" in (tmp_path / "advise" / "count.log").read_text()  # the program's own, kept in the log
