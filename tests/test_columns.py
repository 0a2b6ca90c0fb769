"""Report tables built from one column description (hwprof.render.columns): a column's condition decides its
header and its cells together, and every table of a recorded run has as many cells per row as headers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hwprof.analysis.availability import Missing
from hwprof.analysis.run_analysis import analyse
from hwprof.render.columns import Column, build, with_cum
from hwprof.render.gpu.sections import gpu_main_layers_spec
from hwprof.render.kernel_tables import native_kernels_spec, native_model_spec
from hwprof.render.report_sections import layers_spec, stages_spec, types_spec
from hwprof.render.tables import Col, TableSpec
from hwprof.rundir.reader import RunData

FIXTURES = Path(__file__).parent / "fixtures"


def test_a_column_not_present_leaves_out_its_header_and_its_cells() -> None:
    columns: list[Column[bool, int]] = [
        Column(Col("n"), str),
        Column(Col("double"), lambda n: str(2 * n), lambda wide: wide),
        Column(Col("square"), lambda n: str(n * n)),
    ]
    cols, rows = build(columns, True, [1, 3])
    assert [c.header for c in cols] == ["n", "double", "square"]
    assert rows == [["1", "2", "1"], ["3", "6", "9"]]
    cols, rows = build(columns, False, [1, 3])
    assert [c.header for c in cols] == ["n", "square"]
    assert rows == [["1", "1"], ["3", "9"]]


def test_with_cum_sums_the_shares_down_each_row_counting_an_unmeasured_one_as_0() -> None:
    ranked = with_cum(["a", "b", "c"], {"a": 0.5, "b": None, "c": 0.25}.get)
    assert [(r.item, r.cum) for r in ranked] == [("a", 0.5), ("b", 0.5), ("c", 0.75)]


def _shapes(spec: TableSpec | None) -> None:
    assert spec is not None
    assert all(len(row) == len(spec.cols) for row in spec.rows), spec


def test_every_table_of_the_recorded_runs_has_a_cell_per_header() -> None:
    for name in ("rundir_report", "gpu_run_yolov8n"):
        a = analyse(RunData.load(FIXTURES / name))
        for spec in (stages_spec(a), layers_spec(a, 15), types_spec(a)):
            _shapes(spec)
        for maybe in (native_kernels_spec(a), native_model_spec(a), gpu_main_layers_spec(a, 15)):
            if maybe is not None:
                _shapes(maybe)


def test_the_layer_table_without_times_ranks_by_flops_with_no_time_column() -> None:
    a = analyse(RunData.load(FIXTURES / "rundir_report"))
    a.layers.layers = [dataclasses.replace(r, time_ms=None, share=None, gflops_s=None) for r in a.layers.layers]
    a.layers.missing["time"] = Missing("no layers pass")
    spec = layers_spec(a, 5)
    assert spec is not None and spec.title.startswith("top 5 layers by FLOPs")
    headers = [c.header for c in spec.cols]
    assert not {"ms", "share", "cum", "GFLOP/s", "% peak"} & set(headers)
    assert headers[:3] == ["#", "type", "GFLOPs"]
    assert all(len(row) == len(headers) for row in spec.rows)
    assert "per-layer time: unavailable: no layers pass" in spec.notes
