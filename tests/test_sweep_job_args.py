"""The pure parts of `hwprof sweep --submit` (hwprof/sweep/ray_job.py): the job's entrypoint gives the same sweep,
the job's progress read from its log, and the job record read back or refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwprof.analysis.sweep.rows import NODE_THREADS
from hwprof.cli.args import build_parser
from hwprof.schema.check import SCHEMA_VERSION
from hwprof.sweep.points import SweepPlan
from hwprof.sweep.ray_job import JOB_FILE, JobRecord, progress_of, sweep_arguments


@pytest.mark.parametrize("threads", [[1, 4], [NODE_THREADS]])
def test_the_entrypoint_asks_for_the_same_sweep(threads: list[int]) -> None:
    plan = SweepPlan(
        ["yolov8n", "yolov7-tiny"], threads, [1, 8], Path("x"), imgsz=320, iters=7, warmup=2,
        extra_args=["--only", "timing,flops"], timeout_s=90.0, runtimes=["torch", "onnxruntime"],
        precisions=["fp32", "int8"], advise=True,
    )  # fmt: skip
    args = build_parser().parse_args(["sweep", "--ray", "auto", *sweep_arguments(plan, True, ("epyc",))])
    assert args.models == plan.models and args.batch == plan.batches and args.imgsz == 320
    assert args.iters == 7 and args.warmup == 2 and args.timeout == 90.0 and args.advise
    assert args.runtimes == plan.runtimes and args.precisions == plan.precisions
    assert args.threads == ([] if threads == [NODE_THREADS] else threads)  # none: each node's own count
    assert args.collect_args == ["--only", "timing,flops"] and args.per_host and args.hosts == ["epyc"]


def test_progress_counts_the_points_finished_from_the_log() -> None:
    log = "\n".join([
        "Running entrypoint for job x",
        "[1/3] yolov8n-t1-b1: running on node vm (abcd)",
        "[2/3] yolov8n-t2-b1: running on node vm (ef01)",
        "[1/3] yolov8n-t1-b1: complete on vm in 30 s",
        "[2/3] yolov8n-t2-b1: interrupted on vm in 3 s: stopped",
    ])  # fmt: skip
    progress = progress_of(log)
    assert (progress.total, progress.finished) == (3, 2)
    assert progress.last.startswith("[2/3] yolov8n-t2-b1: interrupted")
    assert progress_of("Runtime env is setting up.").total == 0


def test_a_job_record_is_read_back_and_a_damaged_one_refused(tmp_path: Path) -> None:
    record = JobRecord("hwprof-sweep-1", "h:6379", "http://h:8265", "~/hwprof-sweeps/x", "python ...", 1.0)
    record.save(tmp_path)
    assert JobRecord.load(tmp_path) == record
    (tmp_path / JOB_FILE).write_text('{"submission_id": 3}')
    with pytest.raises(ValueError, match=JOB_FILE):
        JobRecord.load(tmp_path)
    with pytest.raises(ValueError, match="not the --out of"):
        JobRecord.load(tmp_path / "none")


def test_fetch_packs_finished_runs_not_held_and_the_files_around_them(tmp_path: Path) -> None:
    import json

    from hwprof.sweep.ray_job import collect_finished

    def run(rel: str, status: str) -> None:
        (tmp_path / rel).mkdir(parents=True)
        (tmp_path / rel / "run.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION, "status": status}))

    run("a", "complete")
    run("b", "interrupted")
    run("c", "complete")
    run("d", "running")
    (tmp_path / "e.receiving").mkdir()
    (tmp_path / "e.receiving" / "part").write_text("x")
    (tmp_path / "sweep.json").write_text("{}")
    (tmp_path / "a.log").write_text("log")
    got = collect_finished(str(tmp_path), ["c"])
    assert sorted(got.runs) == ["a", "b"] and got.pending == ["d"]
    assert sorted(got.files) == ["a.log", "sweep.json"]


def test_a_run_landing_while_the_folder_is_read_comes_whole_with_the_next_fetch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CI failure of stop 53: a point's run directory renamed into place between the search for runs and
    the walk for loose files came back as loose files (its run.json among them), which the next fetch took
    for a run already held, so the run never came whole."""
    import json

    from hwprof.sweep import ray_job

    def land(rel: str) -> None:
        partial = tmp_path / (rel + ".receiving")
        partial.mkdir()
        (partial / "run.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION, "status": "complete"}))
        (partial / "trace.perfetto").write_text("t")
        partial.rename(tmp_path / rel)

    land("a")
    (tmp_path / "sweep.csv").write_text("x")
    real = ray_job._listing

    def listing_then_a_landing(root: Path) -> list[Path]:
        seen = real(root)
        land("b")
        return seen

    monkeypatch.setattr(ray_job, "_listing", listing_then_a_landing)
    got = ray_job.collect_finished(str(tmp_path), [])
    assert sorted(got.runs) == ["a"] and sorted(got.files) == ["sweep.csv"], (got.runs.keys(), got.files.keys())
    monkeypatch.setattr(ray_job, "_listing", real)
    again = ray_job.collect_finished(str(tmp_path), ["a"])
    assert sorted(again.runs) == ["b"] and sorted(again.files) == ["sweep.csv"]
