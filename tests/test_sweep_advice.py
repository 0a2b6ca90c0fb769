"""`hwprof sweep --advise`: every point's collect runs --advise (locally, on Ray, on --resume), each point's
row carries its best change read from its advice.json, and one summary says which change wins per kind of
machine. The point runs here are made by hand (advice.json from analysis/advice/table.py's records); no collect."""

from __future__ import annotations

import copy
import csv
import io
import json
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console
from test_analysis import make_run
from test_sweep_hosts import EPYC_HOST, other_host, run_on

from hwprof.analysis.advice.speedup import Speedup
from hwprof.analysis.advice.table import (
    ADVICE_FILE,
    CHANGED_OUTPUT,
    FAILED,
    NOT_RUN,
    Advice,
    AdviceRow,
    OutputCheck,
)
from hwprof.analysis.paired_cost import PAIRED, PASS_LEVEL
from hwprof.analysis.sweep.advice import SWEEP_ADVICE_CSV
from hwprof.analysis.sweep.rows import SweepPoint, SweepResult, SweepRow, point_row, row_from_run
from hwprof.cli.main import main
from hwprof.core.host_kinds import host_kind
from hwprof.render.compare.views import render_sweep, sweep_markdown
from hwprof.sweep import points as sweep_mod
from hwprof.sweep.points import SweepPlan, collect_command, plan_from_file, write_sweep
from hwprof.sweep.ray import Cluster, RayOptions, RaySweep
from hwprof.sweep.resume import write_plan_json

GOOD_OUTPUT = OutputCheck(0.01, 10.0, 50, 50, 10, 10, 10)
CHANGED = OutputCheck(0.8, 10.0, 50, 61, 10, 7, 6)
"""Detections 10 -> 7, 6 matched: 5 unmatched of 10, far beyond the tolerance."""


def change(key: str, ratio: float, q1: float, q3: float, output: OutputCheck = GOOD_OUTPUT, **kw: Any) -> AdviceRow:
    method = kw.pop("method", PAIRED)
    speedup = Speedup(method, ratio, q1, q3, q1 - 0.05, q3 + 0.05, 8, 100.0, 100.0 / ratio)
    if method == PASS_LEVEL:
        speedup.q1 = speedup.q3 = None
    return AdviceRow(key, f"change {key}", f"--{key}", "a finding", forward=speedup, output=output, **kw)


def not_measured(key: str, status: str, reason: str) -> AdviceRow:
    return AdviceRow(key, f"change {key}", f"--{key}", "a finding", status=status, reason=reason)


ADVICE_A = {
    "p1": [
        change("channels_last", 1.30, 1.25, 1.35),
        change("compile", 1.10, 1.05, 1.15),
        change("t1", 0.9, 0.85, 0.95),
    ],
    "p2": [change("channels_last", 1.20, 1.10, 1.30), change("compile", 1.50, 1.40, 1.60)],
    "p3": [
        change("channels_last", 1.40, 1.30, 1.50),
        change("onnxruntime", 1.45, 1.40, 1.50, CHANGED, status=CHANGED_OUTPUT, reason="detections changed"),
    ],
}
ADVICE_B = {
    "p4": [change("onnxruntime", 2.0, 1.9, 2.1), change("compile", 1.8, 1.7, 1.9), change("omp", 1.1, 1.0, 1.2)],
    "p5": [change("channels_last", 1.02, 0.95, 1.08)],  # within its spread: not measured faster
    "p8": [
        not_measured("compile", FAILED, "inductor: no C++ compiler\nsecond line"),
        not_measured("bf16", NOT_RUN, "no AVX512-BF16"),
    ],
}
PASS_LEVEL_POINT = {"p9": [change("omp", 1.3, 1.30, 1.40, method=PASS_LEVEL)]}
"""A pass-level estimate (spread low-high, no quartiles), on kind B."""
NO_ADVICE = "p6"
DAMAGED = "p7"


@pytest.fixture(scope="module")
def hosts() -> tuple[dict[str, Any], dict[str, Any]]:
    mine = copy.deepcopy(EPYC_HOST)  # fixed data: this host's CPU may be of either kind
    return mine, other_host(mine)


def write_advice(run_dir: Path, rows: list[AdviceRow]) -> None:
    advice = Advice("--model toyolo --imgsz 64", "cpu", rows, wall_s=12.0)
    (run_dir / ADVICE_FILE).write_text(json.dumps(advice.to_dict(), indent=1))


def point(name: str) -> SweepPoint:
    return SweepPoint("toyolo", "torch", "fp32", int(name[1:]), 1)


@pytest.fixture(scope="module")
def advised_rows(
    tmp_path_factory: pytest.TempPathFactory, hosts: tuple[dict[str, Any], dict[str, Any]]
) -> list[SweepRow]:
    """Points p1-p3 on this machine's kind, p4-p9 on another: advice.json by hand, one missing, one damaged."""
    root = tmp_path_factory.mktemp("advised")
    template = make_run(root / "template")
    kinds = {**{k: hosts[0] for k in ADVICE_A}, **{k: hosts[1] for k in (*ADVICE_B, NO_ADVICE, DAMAGED)}}
    kinds.update({k: hosts[1] for k in PASS_LEVEL_POINT})
    rows = []
    for name, host in sorted(kinds.items(), key=lambda kv: int(kv[0][1:])):
        run_dir = root / name
        shutil.copytree(template, run_dir)
        run_on(run_dir, host)
        advice = {**ADVICE_A, **ADVICE_B, **PASS_LEVEL_POINT}.get(name)
        if advice is not None:
            write_advice(run_dir, advice)
        if name == DAMAGED:
            write_advice(run_dir, ADVICE_A["p1"])
            text = (run_dir / ADVICE_FILE).read_text()
            (run_dir / ADVICE_FILE).write_text(text[: len(text) // 2])  # cut off mid-write
        rows.append(row_from_run(run_dir, point(name), "complete"))
    return rows


def expected_summary(advice_by_point: dict[str, list[AdviceRow]]) -> dict[str, tuple[int, float]]:
    """change -> (points where it was the top ranked row, median forward speed-up where ranked), by hand."""
    wins: dict[str, int] = {}
    ratios: dict[str, list[float]] = {}
    for rows in advice_by_point.values():
        ranked = [r for r in rows if r.ranked and r.forward is not None]
        for r in ranked:
            ratios.setdefault(r.key, []).append(r.forward.ratio)  # type: ignore[union-attr]
        if ranked:
            top = max(ranked, key=lambda r: r.forward.ratio)  # type: ignore[union-attr]
            wins[top.key] = wins.get(top.key, 0) + 1
    return {k: (wins.get(k, 0), statistics.median(v)) for k, v in ratios.items()}


def test_each_point_has_its_advice(advised_rows: list[SweepRow]) -> None:
    by = {r.name: r for r in advised_rows}
    p1, p2 = by["p1"], by["p2"]
    assert (p1.advice, p1.advice_forward, p1.advice_spread, p1.advice_method) == (
        "channels_last",
        1.30,
        "1.25-1.35",
        PAIRED,
    )
    assert (p2.advice, p2.advice_forward) == ("compile", 1.50)
    assert by["p3"].advice == "channels_last" and "onnxruntime" not in by["p3"].advice_ranked  # changed output
    assert p1.advice_ranked == {"channels_last": 1.30, "compile": 1.10}  # t1 is slower: not ranked
    assert (by["p9"].advice_method, by["p9"].advice_spread) == (PASS_LEVEL, "1.25-1.45")
    assert by["p5"].advice == "" and by["p5"].advice_status == "no change measured faster"
    assert by["p6"].advice_status == "advice not run" and f"no {ADVICE_FILE} in" in by["p6"].advice_note
    failed = by["p8"]
    assert (
        failed.advice_status == "advice failed"
        and "compile: inductor: no C++ compiler second line" in failed.advice_note
    )
    damaged = by[DAMAGED]
    assert damaged.advice_status == "advice unreadable" and "\n" not in damaged.advice_note
    assert "JSONDecodeError" in damaged.advice_note and "hwprof advise" in damaged.advice_note
    # the rest of the damaged point's row is still read
    assert damaged.latency_ms == by["p1"].latency_ms and damaged.host_kind == by["p4"].host_kind
    unfinished = point_row(point("p10"), Path("nowhere"), "timeout")
    assert unfinished.advice_status == "advice not run" and "did not finish (timeout)" in unfinished.advice_note


def test_which_change_wins_per_kind(
    advised_rows: list[SweepRow], hosts: tuple[dict[str, Any], dict[str, Any]], tmp_path: Path
) -> None:
    result = SweepResult(advised_rows, tmp_path, ["--imgsz", "64", "--advise"])
    write_sweep(result)
    summary = {k["host_kind"]: k for k in json.loads((tmp_path / "sweep.json").read_text())["advice_summary"]}
    kind_a, kind_b = host_kind(hosts[0]).label, host_kind(hosts[1]).label
    assert list(summary) == [kind_a, kind_b]
    for kind, advice in ((kind_a, ADVICE_A), (kind_b, {**ADVICE_B, **PASS_LEVEL_POINT})):
        want = expected_summary(advice)
        got = {c["key"]: (c["wins"], c["median_forward"]) for c in summary[kind]["changes"]}
        assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in want.items()}
        assert {k: v[1] for k, v in got.items()} == pytest.approx({k: v[1] for k, v in want.items()})
        winner = max(want, key=lambda k: want[k])
        assert summary[kind]["winner"] == winner and summary[kind]["changes"][0]["key"] == winner
    assert summary[kind_a]["winner"] == "channels_last" and summary[kind_b]["winner"] == "onnxruntime"
    # kind B: p4, p5, p9 advised; p6 (no advice.json), p7 (damaged), p8 (every candidate failed) not
    assert (summary[kind_b]["points"], summary[kind_b]["advised"], summary[kind_b]["none_faster"]) == (6, 3, 1)
    with open(tmp_path / SWEEP_ADVICE_CSV) as f:
        lines = list(csv.DictReader(f))
    assert [(x["host_kind"], x["key"], x["wins"]) for x in lines if x["winner"] == "True"] == [
        (kind_a, "channels_last", "2"),
        (kind_b, "onnxruntime", "1"),
    ]
    assert float(next(x for x in lines if x["key"] == "compile" and x["host_kind"] == kind_a)["median_forward"]) == 1.3
    with open(tmp_path / "sweep.csv") as f:
        cells = {Path(x["run_dir"]).name: x for x in csv.DictReader(f)}
    assert cells["p2"]["advice"] == "compile" and cells["p2"]["advice_forward"] == "1.5"
    assert cells[DAMAGED]["advice_status"] == "advice unreadable"


def test_advice_in_the_table_and_summary(advised_rows: list[SweepRow], tmp_path: Path) -> None:
    result = SweepResult(advised_rows, tmp_path, ["--advise"])
    text = sweep_markdown(result)
    p1 = next(line for line in text.splitlines() if line.startswith("| ") and "channels_last 1.30x" in line)
    assert "channels_last 1.30x (1.25-1.35, paired)" in p1
    assert "omp 1.30x (1.25-1.45, estimate)" in text
    assert "### which change wins, per kind of machine" in text
    assert "| channels_last | 2 of 3 | 3 | 1.30x (1.20x-1.40x) |" in text
    assert "| compile | 1 of 3 | 2 | 1.30x (1.10x-1.50x) |" in text
    assert "| onnxruntime | 1 of 3 | 1 | 2.00x |" in text
    assert "(3 of 6 points advised)" in text
    notes = [line for line in text.splitlines() if line.startswith("> p")]
    assert [n.split(":")[0] for n in notes] == ["> p6", "> p7", "> p8"]
    assert any(line.startswith("| ") and "| no change measured faster |" in line for line in text.splitlines())
    assert all(n.count("\n") == 0 for n in notes)
    buf = io.StringIO()
    render_sweep(result, Console(file=buf, width=100, color_system=None))
    out = buf.getvalue()
    assert all(cell_len(line.rstrip()) <= 100 for line in out.splitlines())
    assert "which change wins, per kind of machine" in out and "channels_last" in out and "2 of 3" in out
    assert "columns left out" not in out.split("which change wins")[1]


def test_no_advice_without_advise(advised_rows: list[SweepRow], tmp_path: Path) -> None:
    """A sweep without --advise shows no advice column and writes no summary."""
    result = SweepResult(advised_rows, tmp_path, ["--imgsz", "64"])
    write_sweep(result)
    assert "advice_summary" not in json.loads((tmp_path / "sweep.json").read_text())
    assert not (tmp_path / SWEEP_ADVICE_CSV).exists()
    assert "which change wins" not in sweep_markdown(result) and "| advice |" not in sweep_markdown(result)


def test_point_commands_carry_advise(tmp_path: Path) -> None:
    """Local points, Ray points and a resumed sweep's points all run `collect ... --advise`."""
    plan = SweepPlan(["yolov8n"], [1, 2], [1], tmp_path, imgsz=64, advise=True)
    shared = plan.collect_args()
    assert shared.count("--advise") == 1
    assert collect_command(plan.points()[0], tmp_path / "p", shared)[-1] == "--advise"
    assert (
        SweepPlan(["yolov8n"], [1], [1], tmp_path, extra_args=["--advise"], advise=True)
        .collect_args()
        .count("--advise")
        == 1
    )
    assert "--advise" not in SweepPlan(["yolov8n"], [1], [1], tmp_path).collect_args()
    ray_sweep = RaySweep(None, plan, RayOptions("auto"), Cluster({}), lambda _e: None)
    assert ray_sweep.shared == shared and len(ray_sweep.jobs) == 2
    write_plan_json(tmp_path, plan.to_dict())
    resumed, _ = plan_from_file(tmp_path)
    assert resumed.advise and resumed.collect_args() == shared


def test_sweep_advise_cli_and_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`hwprof sweep --advise` through the CLI, then --resume of its missing point: every point's command
    line carries --advise, and the table has each point's advice (fake collects: a copied run and advice.json)."""
    template = make_run(tmp_path / "template")
    write_advice(template, ADVICE_A["p1"])
    commands: list[list[str]] = []

    def command(point: SweepPoint, out: Path, shared: list[str]) -> list[str]:
        commands.append(collect_command(point, out, shared))
        code = "import shutil, sys; shutil.copytree(sys.argv[1], sys.argv[2])"
        return [sys.executable, "-c", code, str(template), str(out)]

    monkeypatch.setattr(sweep_mod, "collect_command", command)
    out = tmp_path / "sweep"
    base = ["sweep", "--models", "yolov8n", "--threads", "1,2", "--imgsz", "64", "--out", str(out)]
    assert main([*base, "--advise", "--", "--only", "timing"]) == 0
    assert len(commands) == 2 and all(c.count("--advise") == 1 for c in commands)
    rows = json.loads((out / "sweep.json").read_text())["rows"]
    assert [r["advice"] for r in rows] == ["channels_last", "channels_last"]
    shutil.rmtree(out / "yolov8n-t2-b1")
    commands.clear()
    assert main(["sweep", "--resume", str(out)]) == 0
    assert len(commands) == 1 and "--advise" in commands[0] and "yolov8n-t2-b1" in " ".join(commands[0])
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["advice_summary"][0]["winner"] == "channels_last"
    assert doc["advice_summary"][0]["changes"][0]["wins"] == 2
    assert (out / SWEEP_ADVICE_CSV).exists()


def test_resume_refuses_advise_it_did_not_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_plan_json(tmp_path, SweepPlan(["yolov8n"], [1], [1], tmp_path).to_dict())
    assert main(["sweep", "--resume", str(tmp_path), "--advise"]) == 2
    out = " ".join(capsys.readouterr().err.split())
    assert "which have no --advise" in out and "hwprof advise RUN_DIR" in out
