"""The paired gate on two users' programs (`hwprof compare OLD NEW --fail-above PCT --paired N` where OLD and NEW
are runs of `hwprof collect -- python ...`): two programs cannot share a process, so each ABBA block runs them
whole, each run a fresh process timing its calls of its model. Here NEW is the same detect-like program at 4x
the image side (16x the pixels and the FLOPs), which no load on this VM hides from ABBA blocks of whole runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from program_runs import collect
from run_store import RECIPES, stored_run

pytestmark = pytest.mark.slow


def test_two_programs_are_gated_on_abba_blocks_of_whole_runs(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    # OLD: the stored run of detect_like.py (breaks_at_import.py, BREAK_AT_IMPORT unset) at 64; NEW: the same
    # collect at 256
    stored = stored_run(tmp_path_factory, "program_detect", tmp_path / "old")
    assert stored.returncode == 0, stored.stderr[-3000:]
    args = list(RECIPES["program_detect"].args)
    at = args.index("--")
    options, command = args[:at], args[at + 2 :]  # the program's words after `-- python`
    command[command.index("--img-size") + 1] = "256"
    old, new = stored.path, tmp_path / "new"
    done = collect(new, options, command)
    assert done.returncode == 0, done.stderr[-3000:]
    verdict_file = tmp_path / "v.json"
    command = [sys.executable, "-m", "hwprof", "compare", str(old), str(new), "--fail-above", "20%", "--paired", "5"]
    done = subprocess.run([*command, "--gate-json", str(verdict_file)], capture_output=True, text=True, timeout=900)
    verdict = json.loads(verdict_file.read_text())
    print(verdict["line"], verdict["figures"])
    forward = next(f for f in verdict["figures"] if f["name"] == "forward")
    assert forward["kind"] == "paired" and forward["n"][0] == 5, verdict
    assert "fresh process" in verdict["method"] and "ABBA" in verdict["method"]
    # 16x the pixels: slower in every block on a quiet host (x3.2, interval x3.0-x3.5 here), a FAIL naming the
    # forward; a neighbour's load can widen the interval to "not resolved", never make it a pass
    assert forward["ratio"] > 1.5 and forward["outcome"] in ("fail", "not resolved"), forward
    if forward["outcome"] == "fail":
        assert done.returncode == 1 and "forward" in verdict["line"], done.stdout[-3000:]
    # a program against hwprof's own pipeline is no pair: one line, exit 2
    builtin = shutil.copytree(Path(__file__).parent / "fixtures" / "rundir_small", tmp_path / "builtin")  # a real one
    mixed = subprocess.run(
        [*command[:4], str(old), str(builtin), "--fail-above", "20%", "--paired", "5"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert mixed.returncode == 2 and "--paired measures two of a kind" in mixed.stdout + mixed.stderr
