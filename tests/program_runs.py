"""Real `hwprof collect ... -- python tests/programs/X.py` runs, shared by the tests of a user's program."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

PROGRAMS = Path(__file__).resolve().parent / "programs"
SHORT = ["--iters", "3", "--warmup", "1", "--no-report"]
"""Three measured calls after one warm-up: the smallest schedule that still has a median."""


def program(name: str) -> str:
    """The path of a test program (tests/programs/NAME.py)."""
    path = PROGRAMS / f"{name}.py"
    assert path.is_file(), path
    return str(path)


def collect(
    out: Path,
    options: list[str],
    command: list[str],
    timeout: float = 300,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    columns: int = 200,
) -> subprocess.CompletedProcess[str]:
    """`hwprof collect OPTIONS --out OUT -- python COMMAND...`, from OUT's parent folder (`env`: the environment,
    os.environ by default; `columns`: the width its report is printed at)."""
    return subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", "collect", *options, "--out", str(out), "--", "python", *command],
        cwd=out.parent,
        text=True,
        capture_output=True,
        timeout=timeout,
        input=stdin,
        env={**(os.environ if env is None else env), "COLUMNS": str(columns)},
    )


def run_doc(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "run.json").read_text()))


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("hwprof: error:")]


def layer_names(out: Path) -> list[str]:
    """The layers of a run's layers.csv, in its order."""
    with (out / "layers.csv").open(newline="") as handle:
        return [row["name"] for row in csv.DictReader(handle)]


def measured_forwards(out: Path, pass_name: str) -> int:
    """Measured forward stages of a pass (its markers.jsonl)."""
    rows = [json.loads(line) for line in (out / "passes" / pass_name / "markers.jsonl").read_text().splitlines()]
    return sum(1 for r in rows if r[0] == "stage" and r[1] == "E" and r[2] == "forward" and not r[5] and len(r) < 9)
