"""Damaged and partial run directories (issue 24): one line naming the file and field, exit 2, never a
traceback; a pass that is missing, interrupted or torn makes its figures "unavailable: <reason>", never 0.

Every case damages a copy of tests/fixtures/rundir_small (a real yolov8n run: timing, layers, trace and
scalene passes), the way a killed collect, a full disk or a hand edit would.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hwprof.cli.main import main
from hwprof.rundir.reader import RunData
from hwprof.schema.run import RunDoc

pytestmark = pytest.mark.fault

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_small"


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich folds long paths at 80 columns: the assertions below look for whole paths."""
    monkeypatch.setenv("COLUMNS", "400")


def damaged(tmp_path: Path, edit: Callable[[Path], None], name: str = "run") -> Path:
    run_dir = tmp_path / name
    shutil.copytree(FIXTURE, run_dir)
    edit(run_dir)
    return run_dir


def edit_run(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    def edit(run_dir: Path) -> None:
        path = run_dir / "run.json"
        run = json.loads(path.read_text())
        result = change(run)
        path.write_text(json.dumps(run if result is None else result))

    return edit


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, " ".join((out.out + out.err).split())


def one_error(text: str) -> str:
    errors = re.findall(r"hwprof: error:", text)
    assert len(errors) == 1, text
    assert "Traceback" not in text
    return text


def set_passes_null(run: dict[str, Any]) -> None:
    run["passes"] = None


def set_version_string(run: dict[str, Any]) -> None:
    run["schema_version"] = "1"


def interrupt_layers(run: dict[str, Any]) -> None:
    run["status"] = "interrupted"
    run["passes"]["layers"]["status"] = "interrupted"
    run["passes"]["trace"]["status"] = "interrupted"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (edit_run(lambda run: []), "run.json: must be a JSON object, found an empty list"),
        (edit_run(set_passes_null), 'run.json: field "passes" must be an object, found null'),
        (edit_run(set_version_string), 'run.json: field "schema_version" must be an integer, found a string ("1")'),
    ],
    ids=["run-json-list", "passes-null", "schema-version-string"],
)
@pytest.mark.parametrize("command", ["report", "trace", "compare"])
def test_damaged_run_json_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Callable[[Path], None], expected: str, command: str
) -> None:
    run_dir = damaged(tmp_path, edit)
    (run_dir / "trace.pftrace").write_bytes(b"an earlier build")
    argv = [command, str(run_dir)] if command != "compare" else [command, str(FIXTURE), str(run_dir)]
    code, text = cli(capsys, *argv)
    assert code == 2
    assert f"{run_dir}/{expected}" in one_error(text)
    if command == "trace":  # no stale trace that looks current: kept under a name that says it is stale
        assert not (run_dir / "trace.pftrace").exists()
        assert (run_dir / "trace-stale.pftrace").read_bytes() == b"an earlier build"
        assert "renamed trace-stale.pftrace" in text


def _roofline_text(text: str) -> str:
    return text[text.index("roofline") :]


def _assert_no_unmeasured_zero(text: str) -> None:
    roof = _roofline_text(text)
    assert not re.search(r"(memory|compute)-bound layers │ 0,", roof), roof
    assert "- FLOP/B" not in roof and "--bound" not in roof
    assert "top 0 layers" not in text


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda d: shutil.rmtree(d / "passes" / "layers"), "the layers pass's folder passes/layers is missing"),
        (edit_run(interrupt_layers), "the layers pass was interrupted (run interrupted)"),
    ],
    ids=["layers-folder-removed", "interrupted"],
)
def test_missing_pass_figures_unavailable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Callable[[Path], None], reason: str
) -> None:
    run_dir = damaged(tmp_path, edit)
    code, text = cli(capsys, "report", str(run_dir))
    assert code == 0 and "Traceback" not in text
    assert f"warning {reason}" in text
    assert f"unavailable: flops: {reason}" in " ".join(_roofline_text(text).split())
    _assert_no_unmeasured_zero(text)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["roofline"]["layers_by_bound"] == {}
    assert summary["roofline"]["unavailable"]["flops"].startswith("unavailable: flops: ")
    assert any(reason in w for w in summary["warnings"])


def test_interrupted_before_layers_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def edit(run_dir: Path) -> None:
        for name in ("layers", "trace", "scalene"):
            shutil.rmtree(run_dir / "passes" / name)

        def change(run: dict[str, Any]) -> None:
            run["status"] = "interrupted"
            run["passes"] = {"timing": run["passes"]["timing"]}

        edit_run(change)(run_dir)

    run_dir = damaged(tmp_path, edit)
    code, text = cli(capsys, "report", str(run_dir))
    assert code == 0 and "Traceback" not in text
    assert "per-layer time: unavailable: the run was interrupted before the layers pass" in text
    assert "the layers and trace passes did not run" not in text
    _assert_no_unmeasured_zero(text)


def _truncate_mid_line(path: Path) -> int:
    """Cut the file in the middle of a line past its half; the number of the torn line."""
    text = path.read_text()
    cut = text.index("\n", len(text) // 2) + 5
    path.write_text(text[:cut])
    return text[:cut].count("\n") + 1


def test_truncated_markers_warn_and_say_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torn: list[int] = []

    def edit(run_dir: Path) -> None:
        torn.append(_truncate_mid_line(run_dir / "passes" / "layers" / "markers.jsonl"))
        for name in ("trace", "scalene"):  # no other pass with layer markers to fall back on
            shutil.rmtree(run_dir / "passes" / name)

    run_dir = damaged(tmp_path, edit)
    code, text = cli(capsys, "report", str(run_dir))
    assert code == 0 and "Traceback" not in text
    where = f"{run_dir}/passes/layers/markers.jsonl:{torn[0]}: last line is cut short"
    assert f"warning {where}" in text
    assert "the layers and trace passes did not run" not in text
    assert "per-layer time: unavailable: the layers pass's markers.jsonl holds no complete measured iteration" in text
    roof = _roofline_text(text)
    assert "0.0% of forward" not in roof
    assert "share of forward: unavailable" in " ".join(roof.split())


def test_corrupt_markers_line_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def edit(run_dir: Path) -> None:
        path = run_dir / "passes" / "layers" / "markers.jsonl"
        lines = path.read_text().splitlines(keepends=True)
        lines[9] = '["layer", "B", \n'
        path.write_text("".join(lines))

    run_dir = damaged(tmp_path, edit)
    code, text = cli(capsys, "report", str(run_dir))
    assert code == 2
    assert f"{run_dir}/passes/layers/markers.jsonl:10: not a JSON line" in one_error(text)


def test_sweep_plan_damaged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sweep_plan.json").write_text("[]")
    code, text = cli(capsys, "sweep", "--resume", str(tmp_path))
    assert code == 2
    assert f"{tmp_path}/sweep_plan.json: must be a JSON object, found an empty list" in one_error(text)
    (tmp_path / "sweep_plan.json").write_text(json.dumps({"plan": {"models": None}, "ray": None}))
    code, text = cli(capsys, "sweep", "--resume", str(tmp_path))
    assert code == 2
    assert 'sweep_plan.json: field "plan.models" must be a list of model names, found null' in one_error(text)


def test_sweep_json_damaged(tmp_path: Path) -> None:
    from hwprof.analysis.sweep.rows import load_sweep
    from hwprof.schema.check import RunDirError

    (tmp_path / "sweep.json").write_text(json.dumps({"rows": None}))
    with pytest.raises(RunDirError, match=r'sweep\.json: field "rows" must be a list, found null'):
        load_sweep(tmp_path)
    (tmp_path / "sweep.json").write_text(json.dumps({"rows": [{"model": "yolov8n", "threads": "2"}]}))
    with pytest.raises(RunDirError, match=r'field "rows\[0\]\.threads" must be an integer, found a string \("2"\)'):
        load_sweep(tmp_path)


def _compare(a: Path, b: Path, seed: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    command = [sys.executable, "-m", "hwprof", "compare", str(a), str(b)]
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=300)


def test_compare_marks_interrupted_run_and_is_stable(tmp_path: Path) -> None:
    """Two processes (different string hashes) print the same comparison; the interrupted run is marked and
    each run's layer-time pass is named (the old note listed a set: "None, layers" or "layers, None")."""
    run_dir = damaged(tmp_path, edit_run(interrupt_layers), "interrupted")
    first, second = _compare(FIXTURE, run_dir, "1"), _compare(FIXTURE, run_dir, "2")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    text = " ".join(first.stdout.split())
    assert "run [interrupted]" in text
    assert f"run B ({run_dir}) is interrupted" in text
    # its layers and trace passes are unusable: its layer times come from the scalene pass, and say so
    assert "layer times come from different passes: A: layers pass; B: scalene pass" in text
    assert "run B: the layers pass was interrupted (run interrupted): its figures are unavailable" in text
    assert "None" not in text


def test_corrupt_records_line_fails_the_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def edit(run_dir: Path) -> None:
        path = run_dir / "passes" / "trace" / "torch_profiler.records.jsonl"
        lines = path.read_text().splitlines(keepends=True)
        lines[3] = '{"kind": "span", \n'
        path.write_text("".join(lines))

    run_dir = damaged(tmp_path, edit)
    code, text = cli(capsys, "trace", str(run_dir))
    assert code == 2
    assert f"{run_dir}/passes/trace/torch_profiler.records.jsonl:4: not a JSON line" in one_error(text)
    assert not (run_dir / "trace.pftrace").exists()


def test_a_failure_while_finishing_still_saves_the_final_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collect whose passes all finished but whose summaries cannot be derived (here: stage_stats raises, as an
    ImportError did when the code changed under a running collect) leaves run.json with its final status and the
    error, not "running" forever."""
    from hwprof.session import finish

    run_dir = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "fixtures" / "rundir_small", run_dir)
    run = json.loads((run_dir / "run.json").read_text())
    run["status"] = "ok"

    def broken(*_a: object, **_k: object) -> None:
        raise ImportError("cannot import name 'X'")

    monkeypatch.setattr(finish, "stage_stats", broken)
    with pytest.raises(ImportError):
        finish.finalize(run_dir, RunDoc.read(run, "run.json"))
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["status"] == "ok" and "ImportError: cannot import name 'X'" in saved["finish_error"]
    monkeypatch.undo()
    assert any("could not be derived: ImportError" in w for w in RunData.load(run_dir).warnings)
