"""The report's memory section (issue 59) over a recorded run given torch_memory's figures in its layers pass: the top
layers by bytes allocated, the forward's peak and the layer that reaches it, the layers' sum against the
forward's, the faults per forward and the process's RSS; nothing where no allocator figure was measured."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hwprof.collectors.torch_profiler.memory import memory_units

from hwprof.analysis.run_analysis import analyse
from hwprof.render.memory_section import memory_spec
from hwprof.rundir.reader import RunData
from hwprof.schema.records import MetricTables

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_report"
METRICS = Path("passes") / "layers" / "torch_memory.metrics.json"


def _with_memory(tmp_path: Path) -> tuple[Path, dict[str, float]]:
    """The fixture (recorded before torch_memory) with its figures written for each of the run's layers."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    layers = json.loads((run / "passes" / "trace" / "torch_profiler.metrics.json").read_text())["layers"]
    allocated = {name: 1e6 * (i + 1) for i, name in enumerate(layers)}
    rows = {
        name: {
            "mem_alloc_bytes": allocated[name],
            "mem_freed_bytes": 0.9 * allocated[name],
            "mem_allocs": 3.0,
            "mem_peak_bytes": 2e6 + (1e6 if name == "model.9" else 0),
            "mem_growth_bytes": 1e6,
        }
        for name in layers
    }
    forward = {"mem_alloc_bytes": sum(allocated.values()) / 0.98, "mem_peak_bytes": 3.5e6}
    MetricTables(layers=rows, stages={"forward": forward}, units=memory_units()).save(run / METRICS)
    run_doc = json.loads((run / "run.json").read_text())
    run_doc["collectors"]["torch_memory"] = {
        "status": "ok",
        "summary": {"events": 100, "sessions": 1, "iterations": 2, "memory_peak_layer": "model.22"},
        "artifacts": [str(METRICS)],
        "pass": "layers",
    }
    (run / "run.json").write_text(json.dumps(run_doc))
    return run, allocated


def test_the_section_ranks_layers_by_bytes_allocated_and_says_where_the_peak_is(tmp_path: Path) -> None:
    run, allocated = _with_memory(tmp_path)
    a = analyse(RunData.load(run))
    spec = memory_spec(a)
    assert spec is not None
    top = sorted(allocated, key=lambda n: -allocated[n])[:10]
    assert [row[0] for row in spec.rows] == top
    assert spec.rows[0][2] == f"{allocated[top[0]] / 1e6:.2f}"
    notes = "\n".join(spec.notes)
    assert (
        "peak 3.50 MB above what was live at its start, reached in model.22; the most working memory of its own: "
        "model.9" in notes
    )
    assert "add up to 0.980x the forward's" in notes
    assert "page faults per forward: 138" in notes  # the fixture's perf_events forward
    assert "resident memory (RSS) at its peak in the forward: 401.61 MB; 398.11 MB beyond" in notes
    assert "the weights, live throughout, are not in it" in "\n".join(spec.methods)  # markdown's, not the terminal's


def test_no_allocator_figures_no_section_and_the_view_says_why() -> None:
    a = analyse(RunData.load(FIXTURE))  # recorded before torch_memory
    assert memory_spec(a) is None
    assert a.memory.unavailable is not None and "torch_memory" in a.memory.unavailable
    assert a.memory.forward_faults == pytest.approx(137.67, abs=0.01)


def test_compare_puts_each_layers_bytes_allocated_side_by_side(tmp_path: Path) -> None:
    from hwprof.analysis.compare import compare_runs
    from hwprof.render.compare.views import specs

    a, allocated = _with_memory(tmp_path / "a")
    b, _ = _with_memory(tmp_path / "b")
    doc = json.loads((b / METRICS).read_text())
    doc["layers"]["model.22"]["mem_alloc_bytes"] *= 2
    (b / METRICS).write_text(json.dumps(doc))
    c = compare_runs([a, b])
    assert c.memory is not None
    row = next(r for r in c.memory if r.key.startswith("22 "))
    assert row.values == [allocated["model.22"], 2 * allocated["model.22"]] and row.ratios[1] == 2.0
    (spec,) = [s for s in specs(c) if s.title == "memory per layer"]
    assert spec.rows[0] == ["22 Detect", "23.00", "46.00", "2.00"]  # run A's largest first
    assert spec.rows[1][1:] == ["22.00", "22.00", "1.00"]
    plain = compare_runs([FIXTURE, FIXTURE])  # no allocator figures: no table
    assert plain.memory is None and not [s for s in specs(plain) if s.title == "memory per layer"]


def test_the_layer_table_gets_an_alloc_column_only_where_it_was_measured(tmp_path: Path) -> None:
    from hwprof.render.report_sections import layers_spec

    run, allocated = _with_memory(tmp_path)
    spec = layers_spec(analyse(RunData.load(run)), 15)
    assert spec is not None
    headers = [c.header for c in spec.cols]
    column = headers.index("alloc MB")
    row = next(r for r in spec.rows if r[0] == "22")
    assert row[column] == f"{allocated['model.22'] / 1e6:.3g}"
    plain = layers_spec(analyse(RunData.load(FIXTURE)), 15)
    assert plain is not None and "alloc MB" not in [c.header for c in plain.cols]
