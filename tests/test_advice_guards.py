"""The advice's guards (issue 38): a variant inflated beside the baseline does not keep its paired figure, a
pass-level estimate with a disturbed process is not resolved and never ranked, and a row whose end to end parts
from its forward names the stage that moved."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from hwprof.advisor import runner as runner_module
from hwprof.advisor.children import ChildOutcome
from hwprof.advisor.runner import AdvisePlan, AdviseRun
from hwprof.analysis.advice.candidate import Candidate, RunFacts, Variant
from hwprof.analysis.advice.rows import CHANGED_OUTPUT, measured_row, pairing_note
from hwprof.analysis.advice.table import Advice
from hwprof.analysis.paired_cost import PAIRED, PASS_LEVEL
from hwprof.core.config import RunConfig
from hwprof.perf.neighbours import NeighbourLoad, Outsider
from hwprof.render.advice.export import advice_csv_rows
from hwprof.render.advice.table import advice_spec, heading
from hwprof.rundir.advise_files import write_advise_result
from hwprof.schema.advise_result import AdviseResult, AdviseSpec
from hwprof.session.stopping import StopSignals

TORCH = [29.6, 29.4, 29.8, 29.5, 29.7, 29.3, 29.9, 29.6]
OV_PAIRED = [15.2, 15.4, 15.1, 15.3, 15.2, 15.0, 15.5, 15.2]
"""The quiet host's OpenVINO fp32 side paired beside torch (1.95x), against 12.6 ms alone (2.43x)."""
OV_ALONE = [12.6, 12.7, 12.5, 12.6]


def side(forward: list[float], solo: list[float] | None = None, **stages: list[float]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "forward_ms": {str(i): v for i, v in enumerate(forward)},
        "iteration_ms": {str(i): v + sum(s[i] for s in stages.values()) for i, v in enumerate(forward)},
        "batch": 1,
        "setup": {"prepare_s": 1.0, "first_forward_s": 1.0},
    }
    if solo is not None:
        doc["solo_forward_ms"] = {str(i): v for i, v in enumerate(solo)}
    if stages:
        doc["stage_ms"] = {name: {str(i): v for i, v in enumerate(ms)} for name, ms in stages.items()}
    return doc


def result(name: str, doc: dict[str, Any]) -> AdviseResult:
    return AdviseResult.from_json(doc, f"{name}.json")


def inflated_paired() -> AdviseResult:
    """Baseline within its range alone; the variant 1.2x above its own time alone."""
    return result(
        "paired", {"sides": {"baseline": side(TORCH, [29.2, 30.1, 29.5, 29.9]), "variant": side(OV_PAIRED, OV_ALONE)}}
    )


def processes(baseline: list[float], variant: list[float], after: list[float] | None = None) -> dict[str, AdviseResult]:
    out = {
        "baseline": result("baseline", {"sides": {"baseline": side(baseline)}}),
        "variant": result("variant", {"sides": {"variant": side(variant)}}),
    }
    if after is not None:
        out["baseline-after"] = result("baseline-after", {"sides": {"baseline": side(after)}})
    return out


def load(share: float, *top: Outsider) -> NeighbourLoad:
    return NeighbourLoad(10.0, [0, 1], round(share * 20.0, 3), share, 0.0, 10.0, list(top))


QUIET = load(0.01)
HOG = load(0.48, Outsider("python", 4242, 9.6))
OPENVINO = Candidate("openvino", "OpenVINO", "--runtime openvino", (), Variant(runtime="openvino"), finding="f")


def test_a_variant_inflated_beside_the_baseline_is_named() -> None:
    note = pairing_note(inflated_paired(), 2)
    assert "the variant's forward p50 lay 1.21x outside its range alone" in note, note
    steady = {"baseline": side(TORCH, [29.2, 30.1]), "variant": side(OV_PAIRED, [15.0, 15.6])}
    assert pairing_note(result("paired", {"sides": steady}), 2) == ""


class FakeWorkers:
    """The runner's worker processes replaced: each name's out file written from `results`, and each process's
    neighbours from `loads` (the order the runner starts them)."""

    def __init__(self, results: dict[str, AdviseResult], loads: dict[str, NeighbourLoad]) -> None:
        self.results, self.loads = results, loads
        self.started: list[str] = []

    def worker(self, spec: AdviseSpec, name: str) -> ChildOutcome:
        self.started.append(name)
        write_advise_result(Path(spec.out), self.results[name])
        return ChildOutcome(0)

    def watch(self) -> Any:
        fake = self

        class Watch:
            def start(self) -> Watch:
                return self

            def stop(self) -> NeighbourLoad | None:
                return fake.loads.get(fake.started[-1])

        return Watch


def advise_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeWorkers) -> AdviseRun:
    monkeypatch.setattr(AdviseRun, "_worker", lambda run, spec, work, c, name: fake.worker(spec, name))
    monkeypatch.setattr(runner_module, "NeighbourWatch", fake.watch(), raising=False)
    config = RunConfig(model="yolov7-tiny", imgsz=320, threads=2)
    facts = RunFacts("torch", "fp32", "cpu", False, 2, 1, None)
    plan = AdvisePlan(tmp_path, config, facts, [OPENVINO], blocks=4, layers=False)
    return AdviseRun(plan, StopSignals(), lambda key, event: None)


def test_a_variant_inflated_beside_the_baseline_does_not_keep_its_paired_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone = processes(TORCH, [12.6, 12.7, 12.5, 12.6, 12.8, 12.6, 12.5, 12.7], TORCH)
    fake = FakeWorkers({"paired": inflated_paired(), **alone}, {})
    row = advise_run(tmp_path, monkeypatch, fake)._candidate(OPENVINO)
    assert fake.started == ["paired", "baseline", "variant", "baseline-after"]
    assert row.forward is not None and row.forward.method == PASS_LEVEL
    assert row.forward.ratio == pytest.approx(statistics.median(TORCH) / 12.6, rel=1e-3)  # 2.35x, not 1.95x
    assert "variant's forward p50 lay" in row.pairing_note and row.ranked


def test_a_row_that_left_the_race_for_its_output_is_not_measured_again_as_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pairing guard fires, but the output check failed (CHANGED OUTPUT, never ranked): the paired figure stays,
    its note says why no processes ran (yolov7 640: three such rows took 28 s of processes each for nothing)."""
    from hwprof.analysis.advice.race import NOT_AGAIN

    lost = {"head_max_abs": 9.0, "head_range": 100.0, "candidates_reference": 40, "candidates": 30}
    lost |= {"detections_reference": 10, "detections": 6, "matched": 6}
    paired = inflated_paired()
    paired.output = lost
    paired.stopped = "after 4 of 8 blocks: its output check failed (never ranked)"
    alone = processes(TORCH, [12.6] * 8, TORCH)
    fake = FakeWorkers({"paired": paired, **alone}, {})
    row = advise_run(tmp_path, monkeypatch, fake)._candidate(OPENVINO)
    assert fake.started == ["paired"]
    assert row.status == CHANGED_OUTPUT and not row.ranked
    assert row.pairing_note.endswith(f"; {NOT_AGAIN}") and "variant's forward p50 lay" in row.pairing_note
    assert row.race == f"left the race {paired.stopped}" and row.forward is not None and row.forward.method == PAIRED


def test_a_compiles_processes_share_its_own_inductor_cache_and_its_setup_is_the_cold_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first process compiles into an empty cache folder of the candidate's own (its setup, 30 + 35 + 9 s, is
    the row's); a re-measure as processes finds what it wrote (a warm compile's 2 s is no row's setup); the folder is
    gone once the candidate is measured."""
    c = Candidate("compile", "torch.compile", "code", (), compile_mode="default", finding="f")
    cold = side(OV_PAIRED, OV_ALONE) | {"setup": {"prepare_s": 30.0, "first_forward_s": 35.0, "second_forward_s": 9.0}}
    paired = result("paired", {"sides": {"baseline": side(TORCH, [29.2, 30.1, 29.5, 29.9]), "variant": cold}})
    warm = side([12.6, 12.7, 12.5, 12.6, 12.8, 12.6, 12.5, 12.7]) | {
        "setup": {"prepare_s": 2.0, "first_forward_s": 2.0}
    }
    results = {
        **processes(TORCH, [], TORCH),
        "paired": paired,
        "variant": result("variant", {"sides": {"variant": warm}}),
    }
    seen: list[tuple[str, str, list[str]]] = []

    def run_child(command: list[str], log: Path, *args: Any) -> ChildOutcome:
        env = args[3]
        cache = Path(env["TORCHINDUCTOR_CACHE_DIR"])
        name = log.stem
        seen.append((name, str(cache), sorted(p.name for p in cache.iterdir()) if cache.exists() else []))
        cache.mkdir(parents=True, exist_ok=True)
        (cache / f"{name}.so").write_text("compiled")  # what Inductor leaves
        write_advise_result(log.with_suffix(".json"), results[name])
        return ChildOutcome(0)

    monkeypatch.setattr(runner_module, "run_child", run_child)
    watch = FakeWorkers({}, {"paired": QUIET})
    watch.started = ["paired"]  # every process quiet
    monkeypatch.setattr(runner_module, "NeighbourWatch", watch.watch(), raising=False)
    config = RunConfig(model="yolov7-tiny", imgsz=320, threads=2)
    plan = AdvisePlan(tmp_path, config, RunFacts("torch", "fp32", "cpu", False, 2, 1, None), [c], 4, layers=False)
    run = AdviseRun(plan, StopSignals(), lambda key, event: None)
    stale = run.dir / "compile" / runner_module.INDUCTOR_CACHE
    stale.mkdir(parents=True)
    (stale / "earlier.so").write_text("an earlier advise's")
    row = run._candidate(c)
    assert [name for name, _, _ in seen] == ["paired", "baseline", "variant", "baseline-after"]
    assert len({cache for _, cache, _ in seen}) == 1 and seen[0][2] == []  # one folder, empty for the first
    assert seen[2][2] == ["baseline.so", "paired.so"]  # the re-measured variant finds the cold compile's output
    assert row.forward is not None and row.forward.method == PASS_LEVEL
    # a recompile at the second forward (9 s) is setup too
    assert row.setup_s == pytest.approx(30.0 + 35.0 + 9.0 - 2 * 12.6 / 1e3, abs=0.05), row.setup_s
    assert not stale.exists()


def test_a_pass_level_estimate_with_a_disturbed_baseline_is_not_resolved_and_never_ranked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's case: a baseline forward of 1,402 ms taken beside a CPU hog against a quiet variant at 23.67 ms
    ranked first at 59x."""
    hogged = [1402.1, 1380.0, 1450.2, 1399.0, 1410.3, 1395.5, 1402.0, 1420.8]
    compiled = [23.67, 23.5, 23.9, 23.6, 23.7, 23.8, 23.6, 23.7]
    c = Candidate("compile", "torch.compile", "code", (), compile_mode="default", finding="f")
    drifted = result("paired", {"sides": {"baseline": side(hogged, [310.0, 295.0]), "variant": side(compiled)}})
    loads = {"paired": QUIET, "baseline": HOG, "variant": QUIET, "baseline-after": HOG}  # the hog came later
    fake = FakeWorkers({"paired": drifted, **processes(hogged, compiled, hogged)}, loads)
    row = advise_run(tmp_path, monkeypatch, fake)._candidate(c)
    assert row.forward is not None and row.forward.method == PASS_LEVEL  # the paired baseline drifted
    assert row.forward is not None and row.forward.resolved and row.forward.ratio > 50  # its spread alone passes
    assert not row.ranked
    assert "the baseline process was disturbed" in row.disturbed and "python (pid 4242)" in row.disturbed
    assert row.neighbours["variant"].share == 0.01
    advice = Advice("--model m", "cpu", [row])
    assert heading(advice).startswith("what to do: no change measured faster")
    spec = advice_spec(advice)
    cells = spec.rows[0]
    assert cells[1].endswith("\nnot resolved") and cells[2].startswith(
        "not resolved"
    )  # the whole why in the row's note
    assert "not resolved: the baseline process was disturbed" in spec.notes[0] and spec.notes[0].startswith("[1] ")
    assert advice_csv_rows(advice)[0]["disturbed"] == row.disturbed
    back = Advice.from_dict(advice.to_dict())
    assert back.rows[0].disturbed == row.disturbed and not back.rows[0].ranked
    assert back.rows[0].neighbours["baseline"].top[0].name == "python"


def test_a_disturbed_variant_process_or_a_baseline_that_moved_is_not_resolved_either() -> None:
    c = Candidate("omp-passive", "omp", "OMP_WAIT_POLICY=PASSIVE", (), env={"OMP_WAIT_POLICY": "PASSIVE"})
    row = measured_row(c, processes(TORCH, OV_ALONE * 2, TORCH), [], {"baseline": QUIET, "variant": HOG})
    assert "the variant process was disturbed" in row.disturbed and not row.ranked
    moved = measured_row(c, processes(TORCH, OV_ALONE * 2, [t * 1.3 for t in TORCH]), [], {})
    assert "moved 29.60 -> 38.48 ms between its processes" in moved.disturbed and not moved.ranked
    assert "the host's load moved" in moved.disturbed  # no neighbours recorded: nothing says it was quiet
    loads = {"baseline": QUIET, "variant": QUIET, "baseline-after": QUIET}
    unseen = measured_row(c, processes(TORCH, OV_ALONE * 2, [t * 1.3 for t in TORCH]), [], loads)
    assert "no other work was seen on the run's CPUs: the host itself ran at another speed" in unseen.disturbed
    assert not unseen.ranked
    quiet = measured_row(c, processes(TORCH, OV_ALONE * 2, TORCH), [], {"baseline": QUIET, "variant": QUIET})
    assert quiet.disturbed == "" and quiet.ranked


def test_a_side_that_moved_while_the_paired_process_was_disturbed_is_not_resolved_without_a_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeWorkers({"paired": inflated_paired()}, {"paired": HOG})
    row = advise_run(tmp_path, monkeypatch, fake)._candidate(OPENVINO)
    assert fake.started == ["paired"]  # processes would be no cleaner on a host this busy
    assert row.forward is not None and row.forward.method == PAIRED and not row.ranked
    assert "the variant's forward p50 lay 1.21x outside its range alone" in row.disturbed
    assert "while the paired process was disturbed (other work on these CPUs, 48%" in row.disturbed


def test_a_paired_figure_taken_under_load_is_not_resolved_even_where_no_side_moved() -> None:
    """Measured beside one CPU hog (yolov7-tiny 320, 2 CPUs): OpenVINO bf16 paired 7.64x and bf16 weights with
    channels_last 3.40x, against 2.43x and 1.83x on the quiet host, neither side moved against its time alone: the
    load hit torch's OpenMP side harder, and interleaving did not cancel it."""
    paired = {"sides": {"baseline": side(TORCH, [29.2, 30.1]), "variant": side(OV_PAIRED, [15.0, 15.6])}}
    row = measured_row(OPENVINO, {"paired": result("paired", paired)}, [], {"paired": HOG})
    assert row.forward is not None and row.forward.method == PAIRED and row.neighbours["paired"].share == 0.48
    assert not row.ranked and row.disturbed.startswith("the paired process was disturbed (other work on these CPUs")
    assert "its ratio is the loaded host's" in row.disturbed
    quiet = measured_row(OPENVINO, {"paired": result("paired", paired)}, [], {"paired": QUIET})
    assert quiet.disturbed == "" and quiet.ranked


def test_an_int8_style_row_names_the_stage_that_took_what_the_forward_saved() -> None:
    """Forward 31.1 -> 24.7 ms while end to end stays at 35.8 ms: the variant's postprocess grew by 6.4 ms."""
    c = Candidate("int8", "int8", "--precision int8", (), Variant(runtime="onnxruntime", precision="int8"))
    n = 8
    base = side([31.1] * n, load=[2.0] * n, preprocess=[1.5] * n, postprocess=[1.16] * n)
    int8 = side([24.7] * n, load=[2.0] * n, preprocess=[1.55] * n, postprocess=[7.54] * n)
    row = measured_row(c, {"paired": result("paired", {"sides": {"baseline": base, "variant": int8}})}, [])
    assert row.forward is not None and row.forward.ratio == pytest.approx(31.1 / 24.7)
    assert row.end_to_end is not None and row.end_to_end.ratio == pytest.approx(35.76 / 35.79, rel=1e-3)
    moved = row.stages_moved
    assert moved is not None and moved.short() == "postprocess +6.4 ms"
    assert "postprocess +6.4 ms (1.2->7.5)" in moved.text()
    spec = advice_spec(Advice("--model m", "cpu", [row]))
    assert spec.rows[0][2] == "fwd 1.26x 1.26-1.26\ne2e 1.00x 1.00-1.00"  # the cell: the figures, two lines
    assert "e2e: postprocess +6.4 ms" in spec.notes[0]  # the row's note: the stage that took the difference
    back = Advice.from_dict(Advice("--model m", "cpu", [row]).to_dict()).rows[0]
    assert back.stages_moved is not None and back.stages_moved.short() == "postprocess +6.4 ms"
    steady = side([24.7] * n, load=[2.0] * n, preprocess=[1.5] * n, postprocess=[1.16] * n)
    agree = measured_row(c, {"paired": result("paired", {"sides": {"baseline": base, "variant": steady}})}, [])
    assert agree.stages_moved is None  # end to end follows the forward: nothing to explain


@pytest.mark.slow
def test_the_worker_times_each_side_alone_and_every_stage(tmp_path: Path) -> None:
    """A real paired worker (yolov8n at 64, channels_last, one block): the baseline alone before the variant is
    built, the variant alone after the blocks, and each iteration's other stages, none of them mixed into the
    blocks' figures."""
    import subprocess
    import sys

    from hwprof.advisor.children import paired_command
    from hwprof.advisor.paired_worker import SOLO_ITERATIONS
    from hwprof.rundir.advise_files import read_advise_result

    base = RunConfig(model="yolov8n", imgsz=64, threads=1)
    variant = RunConfig(model="yolov8n", imgsz=64, threads=1, channels_last=True)
    spec = AdviseSpec.of(
        key="channels_last", baseline=base.to_dict(), variant=variant.to_dict(), blocks=1, warmup=1,
        work_dir=str(tmp_path / "work"), mode="paired", out=str(tmp_path / "paired.json"),
    )  # fmt: skip
    command = paired_command(spec, tmp_path / "paired.spec.json")
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and sys.executable == command[0], proc.stderr[-2000:]
    result = read_advise_result(tmp_path / "paired.json")
    for name in ("baseline", "variant"):
        s = result.sides[name]
        assert sorted(s.forward_ms) == ["0", "1"], name  # the block's two iterations, no solo one among them
        assert s.solo_forward_ms is not None and len(s.solo_forward_ms) == SOLO_ITERATIONS, name
        assert s.stage_ms is not None and {"load", "preprocess", "postprocess"} <= set(s.stage_ms), name
        assert all(sorted(ms) == ["0", "1"] for ms in s.stage_ms.values()), name
    row = measured_row(Candidate("channels_last", "cl", "--channels-last", ()), {"paired": result}, [])
    assert [d.name for d in row.stages][:1] and {d.name for d in row.stages} >= {"preprocess", "postprocess"}


def test_a_cold_first_solo_forward_does_not_hide_a_baseline_slowed_beside_the_variant() -> None:
    """yolov7-tiny at 320, ONNX Runtime paired beside torch on a quiet host: the baseline's solo forwards
    (the first still cold) spanned 39.8-54.7 ms and its paired p50 was 56.8 ms, 1.5x its 37 ms alone in the
    other processes of the same advise. The slowest and fastest solo times are left out of the range, so the
    move is seen and the figure measured as processes."""
    paired = result(
        "paired",
        {
            "mode": "paired",
            "sides": {
                "baseline": side([56.8, 57.1, 56.5, 56.9], solo=[54.7, 45.7, 42.5, 39.8]),
                "variant": side([26.6, 26.5, 26.4, 26.7], solo=[24.7, 24.9, 22.7, 24.5]),
            },
        },
    )
    note = pairing_note(paired, 2)
    assert "the baseline's forward p50 lay 1.24x outside its range alone" in note, note
    assert "the variant's" not in note


def test_a_stop_between_a_candidates_processes_cuts_it_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first stop signal with no worker running to forward it to (between a candidate's processes) raises in
    advise's own process: the candidate is cut, the rest are not started, and advice.json says so (a fresh clone's
    advise ended with exit 130 and its file as before the stop: one row, no note)."""
    import signal

    from hwprof.analysis.advice.interrupt import NOT_STARTED, cut
    from hwprof.analysis.advice.table import load_advice

    layout = Candidate("channels_last", "channels_last", "--channels-last", (), Variant(channels_last=True))
    ort = Candidate("onnxruntime", "ONNX Runtime", "--runtime onnxruntime", (), Variant(runtime="onnxruntime"))
    paired = result("paired", {"sides": {"baseline": side(TORCH, [29.2, 30.1]), "variant": side(OV_PAIRED)}})
    fake = FakeWorkers({"paired": paired, **processes(TORCH, OV_ALONE * 2, TORCH)}, {})
    run = advise_run(tmp_path, monkeypatch, fake)
    run.plan.candidates = [OPENVINO, layout, ort]
    monkeypatch.setattr(runner_module.Zygote, "start", lambda *args: None)
    worker = fake.worker

    def stopped_between(spec: AdviseSpec, name: str) -> ChildOutcome:
        if name == "paired" and fake.started.count("paired") == 1:  # the second candidate's first process
            run.stop._handle(signal.SIGINT, None)  # what the handler does with no child: raises Interrupted
        return worker(spec, name)

    monkeypatch.setattr(AdviseRun, "_worker", lambda r, spec, work, c, name: stopped_between(spec, name))
    advice = run.run()
    saved, _ = load_advice(tmp_path)
    assert saved is not None and saved.to_dict() == advice.to_dict()
    rows = {r.key: r for r in advice.rows}
    assert rows["openvino"].forward is not None and not cut(rows["openvino"])
    assert cut(rows["channels_last"]) and rows["onnxruntime"].reason == NOT_STARTED
    (note,) = [n for n in advice.notes if n.startswith("interrupted by SIGINT: ")]
    assert "1 of 3 candidates finished (openvino)" in note and "cut: channels_last" in note, note
