"""`hwprof runs [DIR]` (issue 60): the run directories under a folder as one table, from their run.json alone:
nested sweeps found, filters, JSON and CSV, and a damaged run skipped with its reason."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
RUNS = ("rundir_report", "rundir_small", "gpu_run_yolov8n")


def results(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    for name in RUNS[:2]:
        shutil.copytree(FIXTURES / name, root / name)
    shutil.copytree(FIXTURES / RUNS[2], root / "sweep" / "point-1")  # a sweep's point, one level down
    damaged = root / "torn"
    damaged.mkdir()
    (damaged / "run.json").write_text('{"schema_version": 1, "status": "comp')
    return root


def hwprof(*words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hwprof", *words], capture_output=True, text=True, timeout=120)


def test_every_run_is_a_row_with_its_run_jsons_figures_and_a_damaged_one_is_skipped(tmp_path: Path) -> None:
    root = results(tmp_path)
    done = hwprof("runs", str(root), "--format", "json")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert sorted(Path(r["path"]).name for r in listed["runs"]) == sorted(["rundir_report", "rundir_small", "point-1"])
    (skipped,) = listed["skipped"]
    assert skipped.startswith(f"{root / 'torn'}: ") and f"skipped {root / 'torn'}" in done.stderr
    for row in listed["runs"]:
        run = json.loads((Path(row["path"]) / "run.json").read_text())
        assert row["id"] == run["run_id"] and row["status"] == run["status"] and row["created"] == run["created"]
        assert (row["imgsz"], row["threads"]) == (run["config"].get("imgsz"), run["config"].get("threads"))
        assert row["forward_p50_ms"] == run["stages"]["forward"]["p50_ms"]
        if "timing" in run["passes"]:
            assert row["health"] in ("clean", "disturbed") and (row["health"] == "disturbed") == bool(row["disturbed"])
        else:  # an imported GPU recording: no timing pass to judge
            assert row["health"] == "-"
    created = [r["created"] for r in listed["runs"]]
    assert created == sorted(created, reverse=True)  # newest first


def test_filters_and_csv(tmp_path: Path) -> None:
    root = results(tmp_path)
    model = json.loads((root / "rundir_small" / "run.json").read_text())["model"]["name"]
    done = hwprof("runs", str(root), "--format", "csv", "--model", model)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert rows and all(r["model"] == model for r in rows)
    assert list(rows[0])[:3] == ["id", "created", "model"]
    none = hwprof("runs", str(root), "--format", "json", "--status", "interrupted")
    assert json.loads(none.stdout)["runs"] == []
    table = hwprof("runs", str(root))
    assert table.returncode == 0 and "3 runs under" in table.stdout, table.stdout


def test_a_folder_that_is_not_there_is_one_line() -> None:
    done = hwprof("runs", "/nonexistent-results")
    assert done.returncode == 2 and "no such folder" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_any_damage_to_run_json_is_skipped_with_its_reason_and_report_says_it_in_one_line(tmp_path: Path) -> None:
    """Issue 67: one deeply nested run.json among damaged runs ended `hwprof runs` (and `report` on it) in a
    RecursionError traceback, listing nothing."""
    root = results(tmp_path)
    good = json.loads((root / "rundir_small" / "run.json").read_text())
    damage = {
        "deep": '{"passes": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "list": "[]",
        "binary": "\udcff\udcfe",
        "config-number": json.dumps({**good, "config": 5}),
        "status-object": json.dumps({**good, "status": {}}),
        "forward-text": json.dumps({**good, "stages": {"forward": {"p50_ms": "x", "n": "y"}}}),
    }
    for name, text in damage.items():
        (root / name).mkdir()
        (root / name / "run.json").write_text(text, errors="surrogateescape")
    done = hwprof("runs", str(root), "--format", "json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    listed = json.loads(done.stdout)
    assert len(listed["runs"]) == 3 and {Path(s.split(": ")[0]).name for s in listed["skipped"]} == {"torn", *damage}
    assert any("nested deeper" in s for s in listed["skipped"]), listed["skipped"]
    report = hwprof("report", str(root / "deep"))
    lines = report.stderr.strip().splitlines()
    assert report.returncode == 2 and len(lines) == 1 and "nested deeper" in lines[0], report.stderr[-2000:]


def test_the_table_keeps_every_id_whole_at_80_columns_and_counts_in_words(tmp_path: Path) -> None:
    """Issue 68: the id a user must copy was cut (`yolo…` at 80 columns) and one run was "1 runs"."""
    root = results(tmp_path)
    kept = [p for p in root.rglob("*") if (p / "run.json").is_file() and p.name != "torn"]  # torn: skipped
    ids = [json.loads((p / "run.json").read_text())["run_id"] for p in kept]
    for columns in ("80", "200"):
        done = subprocess.run(
            [sys.executable, "-m", "hwprof", "runs", str(root)],
            capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": columns},
        )  # fmt: skip
        assert done.returncode == 0 and all(i in done.stdout for i in ids), done.stdout
        assert max(len(line) for line in done.stdout.splitlines()) <= int(columns)
    assert "left out at this width" in done.stdout or "created" in done.stdout
    one = tmp_path / "one"
    shutil.copytree(FIXTURES / RUNS[1], one / RUNS[1])
    assert "1 run under" in hwprof("runs", str(one)).stdout


def test_before_the_first_collect_runs_says_so_and_succeeds(tmp_path: Path) -> None:
    """Issue 68: before any collect, `hwprof runs` (results/ by default) exited 2 with "no such folder"."""
    done = subprocess.run(
        [sys.executable, "-m", "hwprof", "runs"], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0 and "no run directory under results" in done.stdout, done.stdout + done.stderr
    assert "hwprof collect" in done.stdout and not (tmp_path / "results").exists()
