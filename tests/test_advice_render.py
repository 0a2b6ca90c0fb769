"""The advice table (advice.json) wherever a run is shown: the Rich report at 80 and 100 columns (before the
findings), Markdown, summary.json, advice.csv, a damaged advice.json, and the ABBA blocks in the trace as
checked by Perfetto's own trace processor.

The Advice is built by hand (advice_sample.py) and written into a copy of the fixture run directory.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from advice_sample import BLOCKS_PER_KEY, PAIRED_KEYS, sample_advice
from rich.console import Console
from test_perfetto_trace import BAD_STATS, FIXTURE, say_unavailable

from hwprof.analysis.advice.table import ADVICE_FILE, Advice
from hwprof.render.advice.table import CHANGED_MARK, advice_spec, heading
from hwprof.render.tables import TableSpec
from hwprof.rundir.reader import RunData
from hwprof.session.finish import report_run
from hwprof.trace.perfetto import build_trace
from hwprof.trace.processor import TraceSession, availability


def _run_end(run_dir: Path) -> int:
    run = RunData.load(run_dir)
    return max(m.t_ns for name in run.pass_names for m in run.markers(name))


@pytest.fixture
def advised(tmp_path: Path) -> tuple[Path, Advice]:
    """A copy of the fixture run with advice.json whose blocks start a second after its last marker."""
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    advice = sample_advice(_run_end(run_dir) + 1_000_000_000)
    (run_dir / ADVICE_FILE).write_text(json.dumps(advice.to_dict()))
    return run_dir, advice


def _report(run_dir: Path, width: int = 100, format: str = "rich", write: bool = False) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False)
    report_run(run_dir, format=format, console=console, write=write, plots=False)
    return buf.getvalue()


# ----------------------------------------------------------------------------- the report


@pytest.mark.parametrize("width", [80, 100])
def test_the_report_leads_with_the_advice_and_keeps_its_figures_whole(advised: tuple[Path, Advice], width: int) -> None:
    run_dir, advice = advised
    text = _report(run_dir, width)
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= width
    lead = text.index("what to do: compile (model = torch.compile(model)): forward 1.45x faster")
    assert lead < text.index("\nfindings") and lead < text.index("pipeline stages")
    words = " ".join(text.split())
    for row in advice.rows:
        if row.forward is not None and row.resolved:  # every measured speed-up and its spread, whole, in its cell
            assert f"fwd {row.forward.ratio:.2f}x" in text, row.key
            assert row.forward.spread_text() in text, row.key
        elif row.forward is not None:  # a not-resolved figure is no speed-up: the measured ratio in the row's note
            assert f"measured ratio (not resolved) fwd {row.forward.ratio:.2f}x" in words, row.key
    assert "pass-level est." in text and "paired" in text
    assert CHANGED_MARK in text and "not run:" in text and "failed:" in text
    start = next(i for i, x in enumerate(lines) if x.startswith("advice: 2 of 6 candidate changes"))
    table = lines[start : next(i for i, x in enumerate(lines) if i > start and x.startswith("└"))]
    marked = [(x.split("│")[1].strip(), x.split("│")[2].strip()) for x in table if x.startswith("│ ") and x[2] != " "]
    keys = [(rank, cell.split(" [")[0]) for rank, cell in marked]  # the key, then its note's number
    assert keys == [("1", "compile"), ("2", "channels_last"), ("x", "openvino-bf16")]
    words = " ".join(text.split())  # the notes under the table wrap at the console's width
    assert "paired: baseline and variant interleaved in ABBA blocks" in words
    assert "the compile cache was cold" in words and "advice took 312.4 s" in words


def test_the_table_rows_say_rank_setup_output_layers_and_why_not(advised: tuple[Path, Advice]) -> None:
    _, advice = advised
    spec = advice_spec(advice)
    by_key = {
        row[1].split("\n")[0].split(" [")[0]: dict(zip((c.header for c in spec.cols), row, strict=True))
        for row in spec.rows
    }
    rows = {r.key: r for r in advice.rows}
    assert [row[0] for row in spec.rows] == ["1", "2", "x", "", "", ""]
    # the change cell is the key and its note's number; the note under the table says how (the command), the
    # times, the method, the setup, the output check whole, every layer, the finding
    assert spec.rows[0][1].split("\n")[0] == "compile [1]"
    notes = {n.split("]")[0].lstrip("["): n for n in spec.notes if n.startswith("[")}
    assert notes["1"].startswith(f"[1] compile: {rows['compile'].how}; ")
    assert all(r.how not in cells[1] for r, cells in zip(advice.ordered(), spec.rows, strict=True) if r.how)
    assert all(len(cell.split("\n")) <= 2 for row in spec.rows for cell in row)  # two lines at most, every cell
    compiled = by_key["compile"]
    pays = math.ceil(rows["compile"].breakeven_inferences or 0)
    assert compiled["speed-up"] == "fwd 1.45x 1.40-1.52\ne2e 1.33x 1.29-1.37"
    assert f"fwd 61.24->42.20 ms, paired; setup compile 41.3 s, pays after {pays:,}" in notes["1"]
    assert "setup export + convert 6.2 s, pays after 193" in _note(spec, "openvino-bf16")
    assert compiled["layers moved (ms)"] == "Inductor fuses…" and rows["compile"].layers_note in notes["1"]
    cl = by_key["channels_last"]
    assert cl["layers moved (ms)"].split("\n") == ["2 C2f 5.10->3.20", "7 Conv 4.00->3.10"]
    assert "layers: 2 C2f 5.10->3.20, 7 Conv 4.00->3.10, 9 SPPF 2.00->2.40" in _note(spec, "channels_last")
    assert cl["output check"] == "-\nhead 0.022% rng"  # no input sensitivity in this sample: no verdict
    assert "det. 12->12, 12 matched" in _note(spec, "channels_last") and "0.022% of range" in _note(
        spec, "channels_last"
    )
    assert "61.24->48.31 ms" in _note(spec, "channels_last") and cl["speed-up"].endswith("e2e 1.20x 1.15-1.24")
    finding = rows["channels_last"].finding
    assert cl["answers"] == finding if len(finding) <= 18 else f"answers {finding}" in _note(spec, "channels_last")
    changed = by_key["openvino-bf16"]
    assert changed["output check"] == f"{CHANGED_MARK}\nhead 6.1% rng"
    assert "det. 12->9, 8 matched" in _note(spec, "openvino-bf16")
    assert by_key["omp-passive"]["change"].split("\n")[1] == "not advice"
    assert "not advice: spread 0.98-1.09 includes 1.00" in _note(spec, "omp-passive")
    assert "pass-level est." in by_key["omp-passive"]["speed-up"] + _note(spec, "omp-passive")
    rows["channels_last"].per_image = True  # a batch change: times per image, said in its note
    assert "61.24->48.31 ms per image" in _note(advice_spec(advice), "channels_last")
    for key in ("amx-int8", "onnxruntime"):  # a long why-not: its label in the cell, the whole in the row's note
        assert by_key[key]["change"].split("\n")[1] in ("not run", "failed") and by_key[key]["speed-up"] == "-"
        note = _note(spec, key)
        assert rows[key].reason in note and rows[key].how in note


def _note(spec: TableSpec, key: str) -> str:
    (note,) = [n for n in spec.notes if re.match(rf"\[\d+\] {re.escape(key)}: ", n)]
    return note


def test_the_heading_says_so_when_nothing_measured_faster(advised: tuple[Path, Advice]) -> None:
    _, advice = advised
    advice.rows = [r for r in advice.rows if not r.ranked]
    assert heading(advice) == "what to do: no change measured faster (1 resolved of 2 measured, 4 candidates)"
    assert all(row[0] in ("", "x") for row in advice_spec(advice).rows)


def test_markdown_carries_the_table_before_the_findings(advised: tuple[Path, Advice]) -> None:
    run_dir, _ = advised
    md = _report(run_dir, format="markdown")
    table = md.index("### advice: 2 of 6 candidate changes measured faster")
    assert md.index("**what to do: compile") < table < md.index("### pipeline stages") < md.index("### findings")
    row = next(x for x in md.splitlines() if x.startswith("| 1 | compile [1]"))
    assert "| fwd 1.45x 1.40-1.52; e2e 1.33x 1.29-1.37 |" in row
    assert "[1] compile: model = torch.compile(model); fwd 61.24->42.20 ms, paired; setup compile 41.3 s," in md


# ----------------------------------------------------------------------------- summary.json, advice.csv


def test_summary_json_and_advice_csv_carry_every_row(advised: tuple[Path, Advice]) -> None:
    run_dir, advice = advised
    _report(run_dir, write=True)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["advice"] == json.loads(json.dumps(advice.to_dict()))
    rows = list(csv.DictReader((run_dir / "advice.csv").open()))
    assert [r["key"] for r in rows] == [r.key for r in advice.ordered()]
    assert [r["rank"] for r in rows] == ["1", "2", "", "", "", ""]
    by_key = {r["key"]: r for r in rows}
    cl, src = by_key["channels_last"], {r.key: r for r in advice.rows}["channels_last"]
    assert cl["forward_method"] == "paired" and float(cl["forward_ratio"]) == pytest.approx(src.forward.ratio)  # type: ignore[union-attr]
    assert float(cl["forward_q1"]) == pytest.approx(1.2111) and float(cl["end_to_end_q3"]) == pytest.approx(1.2377)
    assert (cl["layer_1_index"], cl["layer_1_type"], cl["layer_3_after_ms"]) == ("2", "C2f", "2.4")
    assert cl["output_matched"] == "12" and cl["output_within_tolerance"] == "True" and cl["ranked"] == "True"
    assert float(by_key["compile"]["breakeven_inferences"]) == pytest.approx(41.3e3 / (61.24 - 42.2), rel=1e-5)
    assert by_key["openvino-bf16"]["status"] == "changed output" and by_key["openvino-bf16"]["ranked"] == "False"
    assert (
        by_key["omp-passive"]["forward_method"] == "pass-level estimate" and by_key["omp-passive"]["forward_q1"] == ""
    )
    not_run = by_key["amx-int8"]
    assert not_run["status"] == "not run" and "no AMX" in not_run["reason"] and not_run["forward_ratio"] == ""


def test_a_run_without_advice_says_null_and_writes_no_advice_csv(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir)
    text = _report(run_dir, write=True)
    assert "what to do" not in text
    assert json.loads((run_dir / "summary.json").read_text())["advice"] is None
    assert not (run_dir / "advice.csv").exists()


def test_a_damaged_advice_json_is_one_warning_and_the_rest_renders(advised: tuple[Path, Advice]) -> None:
    run_dir, _ = advised
    (run_dir / ADVICE_FILE).write_text('{"schema": 1, "rows": [')
    text = _report(run_dir, width=200, write=True)
    warned = [x for x in text.splitlines() if "advice.json could not be read" in x]
    assert len(warned) == 1 and warned[0].lstrip().startswith("warning") and "hwprof advise" in warned[0]
    assert "what to do" not in text and "pipeline stages" in text and "\nfindings" in text
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["advice"] is None and any("advice.json could not be read" in w for w in summary["warnings"])


# ----------------------------------------------------------------------------- the trace


def test_the_trace_holds_each_block_its_iterations_and_forwards(advised: tuple[Path, Advice]) -> None:
    run_dir, advice = advised
    stats = build_trace(run_dir)
    n_blocks = len(PAIRED_KEYS) * BLOCKS_PER_KEY
    assert len(advice.blocks) == 4 * n_blocks
    assert stats.slices_by_category.get("advise") == n_blocks + 2 * len(advice.blocks)
    if not availability().available:
        say_unavailable("the advise slices")
        return
    with TraceSession(stats.path) as tp:
        assert tp.query(BAD_STATS) == []
        rows = tp.query(
            """
            select s.name, s.ts, s.dur, s.depth, t.name as track, p.name as parent, p.ts as parent_ts,
                   (select display_value from args a where a.arg_set_id = s.arg_set_id and a.key = 'debug.key') as key
            from slice s join track t on s.track_id = t.id left join slice p on s.parent_id = p.id
            where t.name glob 'advise: *' order by s.ts, s.depth
            """
        )
        procs = {r["name"] for r in tp.query("select name from process where name glob 'advise*'")}
    assert procs == {"advise: 2 paired variants in ABBA blocks (advice.json)"}
    assert len(rows) == n_blocks + 2 * len(advice.blocks)
    assert {r["track"] for r in rows} == {f"advise: {k}" for k in PAIRED_KEYS}
    blocks: dict[tuple[str, int], list] = defaultdict(list)
    for b in advice.blocks:
        blocks[(b.key, b.block)].append(b)
    tops = [r for r in rows if r["depth"] == 0]
    assert [(r["name"], r["ts"], r["dur"]) for r in tops] == [
        (f"{k} block {n}", min(b.start_ns for b in bs), max(b.end_ns for b in bs) - min(b.start_ns for b in bs))
        for (k, n), bs in blocks.items()
    ]
    its = {(r["key"], r["name"], r["ts"]): r for r in rows if r["depth"] == 1}
    forwards = {(r["key"], r["ts"]): r for r in rows if r["depth"] == 2}
    for b in advice.blocks:
        it = its[(b.key, f"{b.side} iteration {b.iteration}", b.start_ns)]
        assert it["dur"] == b.end_ns - b.start_ns and it["parent"] == f"{b.key} block {b.block}"
        fwd = forwards[(b.key, b.forward_start_ns)]
        assert fwd["name"] == "forward" and fwd["dur"] == b.forward_end_ns - b.forward_start_ns
        assert fwd["parent"] == f"{b.side} iteration {b.iteration}" and fwd["parent_ts"] == b.start_ns
