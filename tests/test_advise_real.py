"""`collect --advise` and `hwprof advise` for real on a small yolov8n: every candidate run as a variant, paired,
with its output checked and a layers collect of its own; bad inputs and a stop keep what was done."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from fault_harness import hwprof_command, start

from hwprof.analysis.advice.interrupt import cut
from hwprof.analysis.advice.table import CHANGED_OUTPUT, MEASURED, NOT_RUN, load_advice

pytestmark = pytest.mark.slow
SMALL = ["--model", "yolov8n", "--imgsz", "64", "--warmup", "1", "--iters", "4", "--only", "timing,flops"]
ONLY = "channels_last,onnxruntime,openvino,int8"
"""One candidate of each kind but the compiler (a layout, each runtime, a reduced precision), each with its layers
collect: all ten that this run's findings point to took 406 s; the combinations and the other precisions are
the same code on other settings (tests/test_advice_combos.py, tests/test_runtimes.py). torch.compile's cold
Inductor compile of yolov8n took 74 s of this fixture's 253 s on 2 CPUs: it runs for real in
test_compile_is_measured_with_its_setup_time (`tox -e bench`); its row, ranking and rendering are tested on
recorded rows (tests/test_advice_render.py, tests/test_advice_guards.py)."""
IN_PROCESS = ("channels_last", "onnxruntime", "openvino")


@pytest.fixture(scope="module")
def advised(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("advise") / "run"
    proc = subprocess.run(
        hwprof_command("collect", *SMALL, "--advise", "--advise-blocks", "2", "--advise-only", ONLY, "--out", str(out)),
        capture_output=True,
        text=True,
        timeout=1500,
        env={"COLUMNS": "100", **__import__("os").environ},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc.stdout


def test_every_runnable_candidate_is_measured_paired_with_its_output_checked(advised: tuple[Path, str]) -> None:
    run, _ = advised
    advice, error = load_advice(run)
    assert advice is not None and not error
    rows = {r.key: r for r in advice.rows}
    for key in IN_PROCESS:
        row = rows[key]
        assert row.status in (MEASURED, CHANGED_OUTPUT), (key, row.reason)
        assert row.forward is not None and row.forward.before_ms and row.forward.after_ms
        assert row.forward.method in ("paired", "pass-level estimate")
        assert row.output is not None and row.output.head_range > 0
        assert row.finding  # each tied to the finding that suggests it
    # the same model in another layout: fp32 rounding, carried through a seeded init that keeps the signal (at
    # these tiny maps some channels are near constant and their unit-variance scale amplifies it), is a pass:
    # far below what another input changes, and the check could see (not blind)
    assert rows["channels_last"].output.verdict == "pass"  # type: ignore[union-attr]
    assert rows["onnxruntime"].setup_s and "export" in rows["onnxruntime"].setup_what
    # These run only where a finding of this run points to them (and the host has the units): whether one
    # does depends on the run's figures (a loaded host's slower forward sits further below the roof), so
    # each is either not run with its reason, or measured with its output checked like the others.
    for row in (r for r in advice.rows if r.key in ("bf16", "int8", "omp-passive")):
        if row.status == NOT_RUN:
            assert row.reason, row.key
        else:
            assert row.status in (MEASURED, CHANGED_OUTPUT), (row.key, row.status, row.reason)
            assert row.forward is not None and row.forward.before_ms and row.forward.after_ms, row.key
            assert row.finding, row.key


def test_paired_blocks_are_recorded_for_the_trace(advised: tuple[Path, str]) -> None:
    run, _ = advised
    advice, _ = load_advice(run)
    assert advice is not None
    paired = [r.key for r in advice.rows if r.forward and r.forward.method == "paired"]
    # Every in-process candidate ran paired: its figure is kept (and its blocks recorded), or a side moved
    # beside the other (a loaded host: CI's often is) and the row was measured as processes, which say why
    # and record no block.
    for key in IN_PROCESS:
        row = next(r for r in advice.rows if r.key == key)
        assert key in paired or ("paired figure not used" in row.pairing_note and row.forward), (key, row.reason)
    assert {b.key for b in advice.blocks} == set(paired)
    for key in paired:
        mine = [b for b in advice.blocks if b.key == key]
        assert {b.side for b in mine} == {"baseline", "variant"} and len(mine) == 2 * 2 * 2  # 2 blocks, 2 per side
        assert all(b.start_ns <= b.forward_start_ns < b.forward_end_ns <= b.end_ns for b in mine)
        assert advice.started_ns <= min(b.start_ns for b in mine) and max(b.end_ns for b in mine) <= advice.ended_ns


def test_the_trace_shows_each_paired_variants_blocks(advised: tuple[Path, str]) -> None:
    from test_perfetto_trace import BAD_STATS

    from hwprof.trace.processor import TraceSession, availability

    run, _ = advised
    advice, _ = load_advice(run)
    assert advice is not None and (run / "trace.pftrace").exists()
    if not availability().available:
        pytest.skip("Perfetto's trace processor is not available here")
    with TraceSession(run / "trace.pftrace") as tp:
        assert tp.query(BAD_STATS) == []
        rows = tp.query(
            "select t.name as track, s.depth, count(*) as n from slice s join track t on s.track_id = t.id "
            "where t.name glob 'advise: *' group by t.name, s.depth"
        )
    got = {(r["track"], r["depth"]): r["n"] for r in rows}
    assert {track for track, _ in got} == {f"advise: {b.key}" for b in advice.blocks}
    for key in {b.key for b in advice.blocks}:
        mine = [b for b in advice.blocks if b.key == key]
        assert got[(f"advise: {key}", 0)] == len({b.block for b in mine})
        assert got[(f"advise: {key}", 1)] == got[(f"advise: {key}", 2)] == len(mine)


def test_layers_that_moved_come_from_a_layers_collect_of_the_contenders_variants(advised: tuple[Path, str]) -> None:
    """The contenders (the fastest rows measured with their output checked) each have a layers collect of their
    variant; every other measured row says why it has none."""
    from hwprof.advisor.contender_layers import CONTENDERS, NOT_CONTENDER
    from hwprof.analysis.advice.table import contenders

    run, _ = advised
    advice, _ = load_advice(run)
    assert advice is not None
    chosen = contenders(advice.rows, CONTENDERS)
    for row in (r for r in advice.rows if r.status in (MEASURED, CHANGED_OUTPUT)):
        if row.key not in chosen:
            assert row.layers_note == NOT_CONTENDER and not row.layers, (row.key, row.layers_note)
            continue
        assert len(row.layers) == 3 and row.variant_run, (row.key, row.layers_note)
        variant = json.loads((run / row.variant_run / "run.json").read_text())
        assert variant["config"]["model"] == "yolov8n"
        if row.key == "channels_last":
            assert variant["config"]["channels_last"] is True
        # first the layers the candidate's finding names (at most 2), then the top movers, largest |delta| first
        assert len({d.index for d in row.layers}) == 3
        moved = [abs(d.delta_ms) for d in row.layers][-1:]
        assert moved and moved[0] >= 0


def test_the_report_leads_with_the_advice(advised: tuple[Path, str]) -> None:
    _, stdout = advised
    assert "advis" in stdout.lower()
    head, _, _ = stdout.partition("findings")
    assert "channels_last" in head


def test_advise_refuses_bad_inputs_in_one_line(tmp_path: Path) -> None:
    for args, words in (
        ([str(tmp_path / "none")], "is not a run directory"),
        ([str(tmp_path), "--blocks", "0"], "--blocks must be at least 1"),
    ):
        proc = subprocess.run(hwprof_command("advise", *args), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and words in proc.stderr, proc.stdout + proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


def test_a_stop_keeps_the_rows_done_and_says_so(advised: tuple[Path, str], tmp_path: Path) -> None:
    run = tmp_path / "copy"
    shutil.copytree(advised[0], run)
    (run / "advice.json").unlink()
    # four candidates whatever the run's findings (--only runs each): the stop lands after the first row and
    # before the last (without --only, a run whose findings pointed to one candidate ended its rows before the
    # stop came: no interrupted row, and its exit status the stop's). The first row to wait for is any finished
    # one: waiting for a measured row let the stop land after the last on a run whose earlier rows changed the
    # output (fresh clone of 9e12fd1: no interrupted note to find)
    proc = start(["advise", str(run), "--blocks", "2", "--no-layers", "--only", ONLY], tmp_path)
    end = time.monotonic() + 600
    while time.monotonic() < end and not _finished(run):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    advice, _ = load_advice(run)
    assert advice is not None and _finished(run), advice
    notes = [n for n in advice.notes if n.startswith("interrupted by SIGINT: ")]
    rows = [(r.key, r.status, r.reason) for r in advice.rows]
    assert len(notes) == 1 and "candidates finished" in notes[0], (rows, out)


def _finished(run: Path) -> list[str]:
    """The keys of the --only candidates whose rows advice.json holds, each measured, changed or failed by
    itself (neither cut by the stop nor left unstarted)."""
    advice, _ = load_advice(run)
    keys = set(ONLY.split(","))
    rows = [] if advice is None else [r for r in advice.rows if r.key in keys and r.status != NOT_RUN]
    return [r.key for r in rows if not cut(r)]


@pytest.mark.benchmark
def test_compile_is_measured_with_its_setup_time(tmp_path: Path) -> None:
    """torch.compile for real: a cold Inductor compile (its own empty cache), its setup time, a note for layers."""
    out = tmp_path / "run"
    command = hwprof_command("collect", *SMALL, "--advise", "--advise-blocks", "2", "--advise-only", "compile")
    proc = subprocess.run([*command, "--out", str(out)], capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    advice, error = load_advice(out)
    assert advice is not None and not error
    (row,) = [r for r in advice.rows if r.key == "compile"]
    assert row.status in (MEASURED, CHANGED_OUTPUT), row.reason
    assert row.forward is not None and row.forward.before_ms and row.forward.after_ms
    assert row.setup_s and row.setup_s > 0 and "Inductor" in row.layers_note
    print(f"compile: setup {row.setup_s:.1f} s, forward {row.forward.before_ms:.2f} -> {row.forward.after_ms:.2f} ms")
