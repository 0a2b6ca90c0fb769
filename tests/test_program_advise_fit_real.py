"""advise on a real program (issue 58), tests/programs/breaks_at_import.py (detect_like.py on yolov8n at 64, 12
frames): refused with too few calls, the line names the `hwprof advise` command whose --blocks and --only fit, and
that command runs; the same program failing at import under advise (its environment changed since the collect)
shows its own ModuleNotFoundError and exits non-zero, not "called no torch module" with 0.

The refusal is asked for two candidates, one that fits 12 calls at the fewest blocks and one that does not
(ASKED): the command it names then runs one candidate. Named for every candidate that fits (threads-1, omp-passive
and malloc-keep, each a baseline, a variant and a second baseline run of the program), it took 54 CPU-s; for one,
25. Which candidates fit is test_program_advise_fit's; threads-1 and malloc-keep on a real program are
test_program_advise_real's."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from program_runs import error_lines
from run_store import option, stored_run

from hwprof.analysis.advice.table import MEASURED, load_advice
from hwprof.analysis.paired_cost import MIN_BLOCKS

pytestmark = pytest.mark.slow
MISSING = "ModuleNotFoundError: No module named 'nonexistent_module_xyz'"
BREAKS = {"BREAK_AT_IMPORT": "1"}
FITS, TOO_BIG = "omp-passive", "channels_last"
"""A candidate with a process of its own (2 + 1 + 2 x 4 = 11 calls at the fewest blocks), and a paired one whose
schedule needs more than 12 calls at the fewest blocks."""
ASKED = ["--only", f"{FITS},{TOO_BIG}"]


def named_command(line: str) -> list[str]:
    """The first `hwprof advise ...` command a refusal names, as words."""
    match = re.search(r"`(hwprof advise [^`]*)`", line)
    assert match, line
    return shlex.split(match.group(1))


def advise(run: Path, *options: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", "advise", str(run), *options],
        cwd=run.parent,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


@pytest.fixture
def twelve_calls(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    """A copy of the stored real program run that makes 12 calls of its model (yolov8n at 64): the issue's (11
    frames, and the one forward of ultralytics' DetectionModel that finds its strides)."""
    stored = stored_run(tmp_path_factory, "program_detect", tmp_path / "run")
    assert stored.returncode == 0, stored.stdout[-3000:] + stored.stderr[-3000:]
    assert int(option("program_detect", "--frames")) + 1 == 12
    return stored.path


def test_a_real_program_with_12_calls_is_refused_naming_a_command_that_runs(twelve_calls: Path) -> None:
    refused = advise(twelve_calls, *ASKED)
    errors = error_lines(refused.stderr)
    assert refused.returncode == 2 and len(errors) == 1, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert errors[0].startswith("hwprof: error: the program makes 12 calls of its model")
    assert not (twelve_calls / "advice.json").exists()  # refused before any candidate ran
    words = named_command(errors[0])
    assert words[:3] == ["hwprof", "advise", str(twelve_calls)] and words[3:5] == ["--blocks", str(MIN_BLOCKS)]
    assert f"(11 calls at {MIN_BLOCKS} blocks)" in errors[0]  # warm-up 1: 2 + 1 + 2 x 4 = 11; 5 blocks take 13
    assert words[5:] == ["--only", FITS], words  # the one asked for that fits, not the paired one
    ran = advise(twelve_calls, *words[3:])
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    advice, error = load_advice(twelve_calls)
    assert advice is not None and not error
    rows = {r.key: r for r in advice.rows}
    assert sorted(rows) == [FITS] and rows[FITS].status == MEASURED, rows[FITS].reason


def test_a_real_program_failing_at_import_under_advise_shows_its_error_and_exits_non_zero(twelve_calls: Path) -> None:
    # the run's pass stopped the program: advise's count of its calls is the first run of it
    proc = advise(twelve_calls, "--blocks", "4", "--only", "threads-1", env=BREAKS)
    errors = error_lines(proc.stderr)
    assert proc.returncode == 2 and len(errors) == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert errors[0].startswith(f"hwprof: error: the program failed before it called its model: {MISSING}, ")
    assert "in advise's count of its calls of its model (the program unchanged; its traceback is in " in errors[0]
    assert "called no torch module" not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    assert MISSING in (twelve_calls / "advise" / "count.log").read_text()


def test_a_real_program_failing_in_a_candidate_s_baseline_process_stops_advise_with_its_error(
    twelve_calls: Path,
) -> None:
    # every pass saw the program end (no count): the candidate's baseline process is advise's first run of it
    doc = json.loads((twelve_calls / "run.json").read_text())
    for one in doc["passes"].values():
        if one.get("program"):
            one["program"].update(calls=12, ended="ran to its end")
    (twelve_calls / "run.json").write_text(json.dumps(doc))
    proc = advise(twelve_calls, "--blocks", "4", "--only", "threads-1", env=BREAKS)
    errors = error_lines(proc.stderr)
    assert proc.returncode == 2 and len(errors) == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert errors[0].startswith(f"hwprof: error: the program failed before it called its model: {MISSING}, ")
    assert "in advise's baseline run for threads-1 (the program unchanged; its traceback is in " in errors[0]
    assert "called no torch module" not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    assert MISSING in (twelve_calls / "advise" / "threads-1" / "baseline.log").read_text()
