"""`collect --advise` on a user's program for real: tests/programs/detect_like.py on yolov8n at 64, each candidate a
run of the program (an environment change: baseline, variant, baseline) or the program's own calls alternated
between its model and a changed copy (paired), each row's output checked on the program's own calls.

torch.compile is left out (`--advise-only`): its cold compile of yolov8n takes minutes on 2 CPUs; its planning is
tested in test_program_advise.py, and it runs through the same paired path as channels_last and bf16."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from fault_harness import hwprof_command

from hwprof.advisor.program_target import PROGRAM_LAYERS_NOTE
from hwprof.analysis.advice.candidates import BF16_UNITS
from hwprof.analysis.advice.table import CHANGED_OUTPUT, MEASURED, NOT_RUN, load_advice
from hwprof.analysis.paired_cost import PAIRED, PASS_LEVEL
from hwprof.schema.runtime_checks import BLIND

pytestmark = pytest.mark.slow
PROGRAM = Path(__file__).parent / "programs" / "detect_like.py"
KEYS = "threads-1,malloc-keep,channels_last,bf16,jemalloc"


@pytest.fixture(scope="module")
def advised(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("padvise") / "run"
    collect = ["collect", "--only", "timing", "--warmup", "2", "--iters", "4", "--threads", "2", "--out", str(out)]
    advise = ["--advise", "--advise-blocks", "2", "--advise-only", KEYS]
    program = ["--", "python", str(PROGRAM), "--model", "yolov8n", "--img-size", "64", "--frames", "40"]
    proc = subprocess.run(
        hwprof_command(*collect, *advise, *program),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "threads-1" in proc.stdout and "pass-level est." in proc.stdout  # the table was printed
    return out


def bf16_units() -> bool:
    flags = Path("/proc/cpuinfo").read_text().split()
    return any(u in flags for u in BF16_UNITS)


def test_each_row_has_its_method_output_check_and_reason(advised: Path) -> None:
    advice, error = load_advice(advised)
    assert advice is not None and not error
    assert advice.baseline.startswith("--threads 2 -- python ") and "detect_like.py" in advice.baseline
    assert any(n.startswith("the program's calls of its model were counted") for n in advice.notes)
    assert any(note.startswith("a program's rows") for note in advice.notes)
    # the program's own random model: a head that does not depend on its input is said once under the table
    blind = any(r.output is not None and r.output.verdict == BLIND for r in advice.rows)
    assert blind == any("output checks are blind" in note for note in advice.notes)
    rows = {r.key: r for r in advice.rows}
    assert set(rows) == set(KEYS.split(","))
    # environment changes: each a run of the program of its own, the same numerics
    for key in ("threads-1", "malloc-keep"):
        row = rows[key]
        assert row.status == MEASURED, (key, row.reason)
        assert row.forward is not None and row.forward.method == PASS_LEVEL
        assert row.output is not None and row.output.within_tolerance, (key, row.output)
        assert row.output.detections == row.output.detections_reference == row.output.matched
        assert row.layers_note == PROGRAM_LAYERS_NOTE
    assert rows["malloc-keep"].output.head_max_abs == 0.0  # type: ignore[union-attr]
    variant = json.loads((advised / "advise" / "threads-1" / "variant.json").read_text())
    assert variant["sides"]["variant"]["threads"] == 1  # the program's calls ran on the variant's thread count
    # made at the model's call: paired over the program's calls, or measured as processes where pairing moved a side
    in_process = ["channels_last", *(["bf16"] if bf16_units() else [])]
    for key in in_process:
        row = rows[key]
        assert row.status in (MEASURED, CHANGED_OUTPUT), (key, row.reason)
        assert row.forward is not None
        assert row.forward.method == PAIRED or (row.forward.method == PASS_LEVEL and row.pairing_note), key
        assert row.output is not None and row.output.head_range > 0
        # the rule of the built-in rows: changed output when, and only when, the check is out of tolerance
        assert (row.status == CHANGED_OUTPUT) == (not row.output.within_tolerance), key
        if row.status == CHANGED_OUTPUT:
            assert "tolerance" in row.reason
    if not bf16_units():
        assert rows["bf16"].status == NOT_RUN and "no bf16 units" in rows["bf16"].reason
    jemalloc = rows["jemalloc"]
    assert jemalloc.status == MEASURED or (jemalloc.status == NOT_RUN and "not installed" in jemalloc.reason)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """detect_like.py on 10 frames, left to run to its end: 11 calls of its model (ultralytics' stride probe and
    one per frame), fewer than a paired candidate's schedule needs."""
    out = tmp_path_factory.mktemp("pshort") / "run"
    collect = ["collect", "--only", "timing", "--warmup", "1", "--iters", "3", "--program-end", "run"]
    program = ["--", "python", str(PROGRAM), "--model", "yolov8n", "--img-size", "64", "--frames", "10"]
    command = hwprof_command(*collect, "--no-report", "--out", str(out), *program)
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def _advise(run: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        hwprof_command("advise", str(run), *args),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "100"},
    )


def test_a_program_with_too_few_calls_is_refused_at_once_in_one_line(short_run: Path) -> None:
    proc = _advise(short_run, "--only", "channels_last")
    print(proc.stdout)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("hwprof: error:")]
    assert line.startswith("hwprof: error: the program makes 11 calls of its model (the run's timing pass saw the")
    assert "advise needs 45 for channels_last" in line and "more images or frames" in line
    assert "counting" not in proc.stdout  # the run saw the program end: nothing to count
    assert not (short_run / "advise").exists() and not (short_run / "advice.json").exists()


def test_a_program_the_run_stopped_is_counted_before_any_candidate_and_refused(short_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "stopped"
    shutil.copytree(short_run, run)  # as if the pass had stopped it: 11 calls is then a lower bound
    doc = json.loads((run / "run.json").read_text())
    doc["passes"]["timing"]["program"]["ended"] = "stopped after the measured calls"
    (run / "run.json").write_text(json.dumps(doc))
    proc = _advise(run, "--only", "channels_last")
    print(proc.stdout)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "counting them first (one run of the program, stopped at 45)" in " ".join(proc.stdout.split())
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("hwprof: error:")]
    assert "the program makes 11 calls of its model (advise's count saw the program end after 11)" in line
    assert not (run / "advice.json").exists() and not (run / "advise" / "channels_last").exists()
