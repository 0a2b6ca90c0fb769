"""`hwprof advise` on a program's run: its candidates planned from the run's facts, the schedule of the program's
calls, and the output check of the program's own calls (fast: a small conv model, no program run)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import torch

from hwprof.advisor.program_target import program_baseline
from hwprof.advisor.program_worker import change_of, check_calls, head_reader, reference_outputs, threads_taken
from hwprof.advisor.program_worker import run as run_worker
from hwprof.advisor.runner import plan_advice
from hwprof.analysis.advice.candidate import RunFacts
from hwprof.analysis.finding import Finding
from hwprof.analysis.paired_cost import PAIRED, PASS_LEVEL
from hwprof.analysis.program.candidates import NO_FINDING_PROGRAM, ProgramFacts, program_candidates
from hwprof.core.config import RunConfig
from hwprof.core.program_spec import ProgramSpec
from hwprof.program.advise_calls import (
    BASELINE,
    CHECK_CALLS,
    SOLO_CALLS,
    VARIANT,
    AdviseCalls,
    Change,
    Step,
    paired_steps,
    single_steps,
)
from hwprof.program.driver import ProgramStop
from hwprof.program.finder import Found
from hwprof.schema.advise_result import AdviseSpec

ARGV = ["/x/detect.py", "--model", "yolov8n"]


def facts(threads: int = 2, flags: tuple[str, ...] | None = ("avx512f", "avx512_bf16"), **kw: object) -> ProgramFacts:
    run = RunFacts("torch", "fp32", str(kw.pop("device", "cpu")), False, threads, 1, flags)
    return ProgramFacts(run, ARGV, model="model", **kw)  # type: ignore[arg-type]


def by_key(f: ProgramFacts, findings: tuple[Finding, ...] = ()) -> dict[str, object]:
    return {c.key: c for c in program_candidates(f, findings)}


def test_a_program_gets_the_changes_its_environment_and_the_model_call_allow_each_with_its_method() -> None:
    cs = program_candidates(facts())
    assert [c.key for c in cs] == [
        "threads-1",
        "omp-passive",
        "malloc-keep",
        "jemalloc",
        "tcmalloc",
        "channels_last",
        "bf16",
        "compile",
    ]
    method = {c.key: c.method for c in cs}
    assert {k for k, m in method.items() if m == PASS_LEVEL} == {
        "threads-1",
        "omp-passive",
        "malloc-keep",
        "jemalloc",
        "tcmalloc",
    }
    assert {k for k, m in method.items() if m == PAIRED} == {"channels_last", "bf16", "compile"}
    threads = cs[0]
    assert threads.env == {"OMP_NUM_THREADS": "1"} and threads.variant.threads == 1
    assert threads.how.startswith("OMP_NUM_THREADS=1 python /x/detect.py --model yolov8n")
    keep = cs[2]
    assert "python /x/detect.py" in keep.how and "hwprof collect" not in keep.how
    # no finding is needed: every runnable one runs, and its row says none pointed to it
    assert all(c.finding == NO_FINDING_PROGRAM for c in cs)
    assert {c.key for c in cs if c.blocked} == {"jemalloc", "tcmalloc"}  # no library found (none given)


def test_a_finding_that_points_to_a_change_is_named_in_its_row() -> None:
    f = Finding("threads spin idle", "evidence", "cpu", 0.3, topic="openmp-wait")
    cs = by_key(facts(), (f,))
    assert cs["omp-passive"].finding == "threads spin idle"  # type: ignore[attr-defined]
    assert cs["threads-1"].finding == "threads spin idle"  # type: ignore[attr-defined]
    assert cs["compile"].finding == NO_FINDING_PROGRAM  # type: ignore[attr-defined]


def test_what_cannot_be_applied_from_outside_the_code_says_why() -> None:
    no_units = by_key(facts(flags=("avx2",)))
    assert "no bf16 units" in no_units["bf16"].blocked  # type: ignore[attr-defined]
    unknown = by_key(facts(flags=None))
    assert "recorded no ISA flags" in unknown["bf16"].blocked  # type: ignore[attr-defined]
    scripted = by_key(facts(scripted=True))
    assert "TorchScript" in scripted["compile"].blocked  # type: ignore[attr-defined]
    assert not scripted["channels_last"].blocked  # type: ignore[attr-defined]
    one = by_key(facts(threads=1))
    assert "omp-passive" not in one and not any(k.startswith("threads-") for k in one)


def test_no_model_or_a_gpu_model_runs_no_candidate_and_says_why() -> None:
    none = program_candidates(facts(no_model="the program called no torch module"))
    assert none and all("no model was measured" in c.blocked for c in none)
    gpu = program_candidates(facts(device="cuda"))
    assert gpu and all("runs on cuda" in c.blocked for c in gpu)


def test_the_paired_schedule_is_baseline_alone_then_abba_blocks_then_the_variant_alone() -> None:
    steps = paired_steps(warmup=1, blocks=2)
    assert steps[0] == Step(BASELINE, -1, "warmup")
    assert [s for s in steps if s.phase == "solo" and s.side == BASELINE] == [
        Step(BASELINE, k, "solo") for k in range(SOLO_CALLS)
    ]
    measured = [(s.side[0], s.iteration) for s in steps if s.phase == "measure"]
    assert measured == [("b", 0), ("v", 0), ("v", 1), ("b", 1), ("b", 2), ("v", 2), ("v", 3), ("b", 3)]
    assert steps[-SOLO_CALLS:] == [Step(VARIANT, k, "solo") for k in range(SOLO_CALLS)]
    assert [s.iteration for s in single_steps(VARIANT, 2, 2)] == [-2, -1, 0, 1, 2, 3]


def test_the_spec_says_what_the_variant_changes() -> None:
    base = RunConfig(threads=2).to_dict()
    spec = AdviseSpec.of(baseline=base, variant=RunConfig(threads=1).to_dict())
    assert change_of(spec) == Change(threads=1)
    spec = AdviseSpec.of(baseline=base, variant=RunConfig(threads=2, channels_last=True).to_dict())
    assert change_of(spec) == Change(channels_last=True) and change_of(spec).in_process
    spec = AdviseSpec.of(baseline=base, variant=base, compile_mode="default")
    assert change_of(spec).needs_copy


class Head(torch.nn.Module):
    """A conv model with a YOLO-shaped head: (batch, 4 + 2 classes, boxes)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        y = self.conv(x)
        head = torch.cat((y[:, :4].abs() * 16, y[:, 4:].sigmoid()), 1).flatten(2)
        return head, [y]


def program_loop(model: torch.nn.Module, calls: AdviseCalls, n: int) -> int:
    """A program's loop: n calls of its model on different inputs; the number made before ProgramStop."""
    found = Found(model, "model", "test", model, "its top-level children", False)
    calls.adopt(found, ())
    made = 0
    with torch.no_grad():
        for i in range(n):
            torch.manual_seed(100 + i)
            try:
                model(torch.rand(1, 3, 16, 16))
            except ProgramStop:
                return made + 1
            made += 1
    return made


def test_abba_over_the_programs_own_calls_records_each_side_and_checks_the_variant_on_its_inputs() -> None:
    model = Head().eval()
    steps = paired_steps(warmup=1, blocks=2)
    calls = AdviseCalls(steps, Change(channels_last=True))
    assert program_loop(model, calls, 100) == len(steps)
    assert "forward" not in model.__dict__  # the forward is given back
    base, var = calls.sides[BASELINE], calls.sides[VARIANT]
    assert sorted(base.forward_ms) == sorted(var.forward_ms) == [0, 1, 2, 3]
    assert sorted(base.solo_ms) == sorted(var.solo_ms) == list(range(SOLO_CALLS))
    assert all(var.iteration_ms[k] >= var.forward_ms[k] for k in var.forward_ms)
    assert len(var.checked) == CHECK_CALLS and "prepare_s" in var.setup
    assert next(model.parameters()).is_contiguous()  # the program's own model is unchanged: the variant is a copy
    reference = reference_outputs(model, var.checked)
    check = check_calls(reference, var.checked, RunConfig(conf=0.5))
    assert check.within_tolerance and check.head_max_abs < 1e-4
    assert check.detections_reference == check.detections > 0


def test_a_changed_output_and_a_changed_input_are_caught() -> None:
    model = Head().eval()
    calls = AdviseCalls(single_steps(VARIANT, 1, 2), Change())
    program_loop(model, calls, 100)
    checked = calls.sides[VARIANT].checked
    reference = reference_outputs(model, checked)
    wrong = [(x, (out[0].flip(-1), out[1])) for x, out in checked]
    check = check_calls(reference, wrong, RunConfig(conf=0.5))
    assert not check.within_tolerance
    other = [(x + 1, out) for x, out in checked]
    with pytest.raises(ValueError, match="another input"):
        check_calls(reference, other, RunConfig())


def test_an_output_that_is_not_a_yolo_head_says_so() -> None:
    with pytest.raises(ValueError, match="not a YOLO head"):
        head_reader(torch.zeros(2, 10), RunConfig())
    assert (
        head_reader((torch.zeros(1, 84, 8400),), RunConfig()).output_format
        != head_reader(torch.zeros(1, 6300, 85), RunConfig()).output_format
    )


TINY_PROGRAM = """
import sys
import torch

class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return torch.cat((y[:, :4].abs() * 16, y[:, 4:].sigmoid()), 1).flatten(2), [y]

model = Head().eval()
with torch.no_grad():
    for i in range(int(sys.argv[1])):
        torch.manual_seed(100 + i)
        model(torch.rand(1, 3, 16, 16))
"""


def worker_spec(tmp_path: Path, calls: int, variant: RunConfig | None = None, mode: str = "paired") -> AdviseSpec:
    script = tmp_path / "tiny.py"
    script.write_text(TINY_PROGRAM)
    base = RunConfig(
        threads=torch.get_num_threads(), conf=0.5, program=ProgramSpec([str(script), str(calls)], str(tmp_path))
    )
    var = variant if variant is not None else dataclasses.replace(base, channels_last=True)
    return AdviseSpec.of(
        key="x", baseline=base.to_dict(), variant=var.to_dict(), blocks=2, warmup=1, work_dir=str(tmp_path), mode=mode
    )


def test_the_worker_runs_the_program_pairs_its_calls_and_checks_the_variant(tmp_path: Path) -> None:
    result = run_worker(worker_spec(tmp_path, 40))
    assert set(result.sides) == {BASELINE, VARIANT} and result.output_error is None
    assert len(result.sides[VARIANT].forward_ms) == 4 and result.sides[VARIANT].solo_forward_ms
    assert result.output is not None and result.output["within_tolerance"]


def test_a_variant_in_its_own_process_is_checked_against_the_baselines_recorded_calls(tmp_path: Path) -> None:
    spec = worker_spec(tmp_path, 40)
    run_worker(spec.for_mode("baseline", str(tmp_path / "b.json")))
    result = run_worker(spec.for_mode("variant", str(tmp_path / "v.json")))
    assert result.output is not None and result.output["within_tolerance"], result.output_error
    assert result.sides[VARIANT].glibc_tunables is None and result.sides[VARIANT].preloaded == {}


def test_a_program_that_calls_its_model_too_few_times_says_how_many_advise_needs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"after 6 calls of its model once found; advise.s schedule needs 19"):
        run_worker(worker_spec(tmp_path, 8))


def test_a_program_that_sets_its_own_thread_count_cannot_be_given_another() -> None:
    calls = AdviseCalls([], Change(threads=1))
    calls.side(VARIANT).threads.add(2)
    assert "sets its own thread count" in threads_taken(Change(threads=1), calls)
    assert threads_taken(Change(), calls) == ""


def test_advise_plans_a_recorded_program_run_from_its_own_facts(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "fixtures" / "program_run", run)
    plan = plan_advice(run, blocks=2)
    cs = {c.key: c for c in plan.candidates}
    assert plan.config.program is not None and plan.config.threads == 2
    assert {"threads-1", "omp-passive", "malloc-keep", "channels_last", "bf16", "compile"} <= set(cs)
    assert {k for k in cs if cs[k].method == PAIRED} == {"channels_last", "bf16", "compile"}
    assert not cs["bf16"].blocked  # the run's host recorded AVX512-BF16 and AMX-BF16
    assert not cs["compile"].blocked  # an eager model (the run's pass found it, not scripted)
    assert "python /home/user/project/tests/programs/detect_like.py --model yolov8n" in cs["omp-passive"].how
    # as the user types it: hwprof's options before `--`, the program's own after
    assert program_baseline(plan.config) == (
        "--threads 2 -- python /home/user/project/tests/programs/detect_like.py "
        "--model yolov8n --img-size 64 --frames 40"
    )
