"""hwprof as a library (hwprof.load, Run, hwprof.compare) on the recorded run of tests/fixtures/rundir_report: the
tables are the report's figures, typed, with nulls (never zeros) where the run measured nothing and the reason
reachable; the plots are the PNGs' figures; `import hwprof` stays light."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import subprocess
import sys
import types
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

import hwprof
from hwprof.analysis.run_analysis import analyse
from hwprof.render.export import layers_csv_text
from hwprof.render.figures import png_bytes
from hwprof.render.plots import render_plots
from hwprof.render.report import render_markdown
from hwprof.rundir.reader import RunData

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_report"


@pytest.fixture(scope="module")
def run() -> hwprof.Run:
    return hwprof.load(FIXTURE)


def test_import_hwprof_loads_nothing_heavy() -> None:
    code = (
        "import sys, hwprof; "
        "print(hwprof.__version__, sorted(m for m in ('polars', 'rich', 'torch', 'matplotlib', 'hwprof.api') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == [hwprof.__version__, "[]"]


def test_public_names_load_on_first_use() -> None:
    """Each is the API's, never a subpackage of the same name: importing hwprof.<name> would set the package's
    attribute to the module (hwprof.advise was the advise runner's package before it became hwprof.advisor)."""
    import importlib
    import importlib.util

    for name in hwprof.__all__:
        assert importlib.util.find_spec(f"hwprof.{name}") is None, name
    importlib.import_module("hwprof.advisor.runner")

    assert callable(hwprof.advise) and hwprof.advise.__module__ == "hwprof.api.commands"
    assert hwprof.load.__module__ == "hwprof.api.run"
    assert issubclass(hwprof.RunError, Exception)
    with pytest.raises(AttributeError, match="no attribute 'RunData'"):
        hwprof.RunData  # noqa: B018 (internal names stay internal)
    assert set(dir(hwprof)) == set(hwprof.__all__)


def test_header_is_run_json_typed(run: hwprof.Run) -> None:
    doc = json.loads((FIXTURE / "run.json").read_text())
    assert (run.run_id, run.status) == (doc["run_id"], "complete")
    assert run.model.name == "yolov8n" and run.model.params_fused == doc["model"]["params_fused"]
    assert run.config.imgsz == doc["config"]["imgsz"] and run.host.cpu_model == doc["host"]["cpu_model"]
    assert run.peaks is not None and run.peaks.ridge == pytest.approx(run.peaks.peak_gflops / run.peaks.peak_gbps)
    rapl = next(n for n in run.unavailable if n.collector == "rapl")
    assert rapl.status == "unavailable" and "powercap" in rapl.reason and rapl.fix


def _csv_rows(text: str) -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    rows = list(reader)
    return list(reader.fieldnames or []), rows


def test_layers_is_layers_csv_with_types(run: hwprof.Run) -> None:
    """Every column of layers.csv in its order, every cell equal (the CSV rounds to 6 digits), empty <-> null."""
    columns, rows = _csv_rows(layers_csv_text(analyse(RunData.load(FIXTURE))))
    assert run.layers.columns == columns and run.layers.height == len(rows) == 23
    for cells, row in zip(rows, run.layers.iter_rows(named=True), strict=True):
        for column, cell in cells.items():
            value = row[column]
            if cell == "":
                assert value is None, (column, value)
            elif isinstance(value, float):
                assert value == pytest.approx(float(cell), rel=1e-5), column
            else:
                assert str(value) == cell, column
    assert run.layers.schema["time_ms"] == pl.Float64 and run.layers.schema["index"] == pl.Int64
    assert run.layers.schema["bound"] == pl.String


def test_a_figure_not_measured_is_null_with_its_reason(run: hwprof.Run) -> None:
    """No RAPL and no PMU on the fixture's host: energy and CPI are null columns of the declared type (a table of
    another run stacks on it), never 0, and why() gives the collector's reason and fix."""
    for column, words in (("energy_j", "rapl"), ("cpi", "cycles"), ("llc_mpki", "could not be counted")):
        assert run.layers[column].null_count() == run.layers.height, column
        assert run.layers.schema[column] == pl.Float64
        reason = run.why(column)
        assert reason is not None and words in reason and "fix:" in reason, (column, reason)
    assert run.why("time_ms") is None and run.layers["time_ms"].null_count() == 0
    assert run.why("energy_j", table="stages") is not None and run.stages["energy_j"].null_count() == run.stages.height
    assert run.advice is None and "hwprof.advise(run)" in str(run.why("advice"))
    with pytest.raises(ValueError, match="advice: unavailable: the run was not advised"):
        run.table("advice")
    with pytest.raises(ValueError, match="no table 'layer'"):
        run.table("layer")
    stacked = pl.concat([run.layers, run.layers])
    assert stacked.height == 46


def test_tables_hold_the_reports_figures(run: hwprof.Run) -> None:
    a = analyse(RunData.load(FIXTURE))
    assert run.stages["name"].to_list() == [r.name for r in a.stages.rows]
    assert run.stages.filter(pl.col("name") == "forward")["p50_ms"].item() == a.stages.get("forward").p50_ms  # type: ignore[union-attr]
    forward = run.roofline.filter(pl.col("scope") == "forward").row(0, named=True)
    assert a.roofline is not None and forward["intensity"] == pytest.approx(a.roofline.intensity)
    assert forward["bound"] == a.roofline.bound and forward["pct_peak"] == pytest.approx(a.roofline.pct_peak)
    assert run.roofline.filter(pl.col("scope") == "layer").height == len(a.layers.top_level)
    view = a.layers.native
    assert view is not None and run.model_kernels.height == len(view.kernels)
    assert run.model_kernels.row(0, named=True)["kernel"] == view.kernels[0].name
    per_layer = sum(len(r.native.kernels) for r in a.layers.layers if r.native is not None)
    assert run.kernels.height == per_layer and set(run.kernels["layer"]) <= set(run.layers["name"])
    assert run.aten_kernels.height == sum(len(r.kernels) for r in a.layers.layers)
    assert run.findings["title"].to_list() == [f.title for f in a.findings]
    assert run.pass_costs["pass"].to_list() == list(a.doc.passes)
    assert run.types["type"].to_list() == [t.type for t in a.types]


def test_units() -> None:
    assert [hwprof.Run.unit(c) for c in ("time_ms", "intensity", "share", "pct_peak", "energy_j", "flops")] == [
        "ms",
        "FLOP/B",
        "fraction",
        "%",
        "J",
        "FLOP",
    ]
    assert hwprof.Run.unit("sysstat.rss_peak_bytes") == "B" and hwprof.Run.unit("name") == ""


def test_plots_are_the_figures_the_pngs_are_saved_from(run: hwprof.Run) -> None:
    pngs = render_plots(analyse(RunData.load(FIXTURE)))
    figures = {
        "roofline.png": run.plot_roofline(),
        "layer_times.png": run.plot_layers(),
        "stages.png": run.plot_stages(),
        "kernels.png": run.plot_kernels(),
        "memory.png": run.plot_memory(),
    }
    assert figures.pop("memory.png") is None  # the fixture keeps no records: no RSS or allocator series
    assert set(pngs) == set(figures)
    for name, fig in figures.items():
        assert fig is not None and png_bytes(fig) == pngs[name], name


def test_the_bars_are_the_layers_times_and_their_kinds(run: hwprof.Run) -> None:
    """Each layer's bar in layer_times.png reaches its scaled time; in kernels.png its stacked kinds reach its time
    times the share of its samples they cover (each bar drawn from matplotlib's collections, not a patch each)."""
    from collections import defaultdict

    from matplotlib.collections import PolyCollection

    a = analyse(RunData.load(FIXTURE))
    rows = sorted((r for r in a.layers.top_level if r.time_ms is not None), key=lambda r: r.index)
    fig = run.plot_layers()
    assert fig is not None
    (bars,) = [c for c in fig.axes[0].collections if isinstance(c, PolyCollection)]
    assert [p.vertices[:, 1].max() for p in bars.get_paths()] == pytest.approx([r.time_ms for r in rows])
    assert min(p.vertices[:, 1].min() for p in bars.get_paths()) == 0 and fig.axes[0].get_ylim()[0] == 0
    kernels = run.plot_kernels()
    assert kernels is not None
    stacked: dict[float, float] = defaultdict(float)
    for part in (c for c in kernels.axes[0].collections if isinstance(c, PolyCollection)):
        for path in part.get_paths():
            ys = path.vertices[:, 1]
            xs = path.vertices[:, 0]
            stacked[round((xs.min() + xs.max()) / 2, 6)] += ys.max() - ys.min()
    drawn = [r for r in rows if r.native is not None]
    assert len(stacked) == len(drawn) > 1
    for x, r in enumerate(drawn):
        native = r.native
        assert native is not None and r.time_ms is not None
        assert stacked[float(x)] == pytest.approx(r.time_ms * sum(native.kinds.values()), rel=1e-6), r.name


def test_report_prints_what_hwprof_report_prints(run: hwprof.Run) -> None:
    buf = io.StringIO()
    run.report(format="markdown", console=Console(file=buf))
    assert buf.getvalue() == render_markdown(analyse(RunData.load(FIXTURE)))
    rich = io.StringIO()
    run.report(console=Console(file=rich, width=100, color_system=None))
    assert "top 15 layers by time" in rich.getvalue() and "findings" in rich.getvalue()


def test_to_pandas(run: hwprof.Run) -> None:
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install pandas pyarrow"):
            run.to_pandas("layers")
        return
    frame = run.to_pandas("layers")
    assert frame.shape == run.layers.shape


def test_compare_is_the_compare_table(tmp_path: Path, run: hwprof.Run) -> None:
    same = hwprof.compare(run, FIXTURE)
    stages = same.filter(pl.col("section") == "stage")
    assert stages["key"].to_list() == run.stages["name"].to_list()
    assert stages["b_ratio"].to_list() == [1.0] * stages.height and same["b_speedup"].drop_nulls().min() == 1.0
    layers = same.filter(pl.col("section") == "layer")
    assert layers.height == run.layers.height and layers["a_ms"].to_list() == run.layers["time_ms"].to_list()
    other = tmp_path / "other"
    shutil.copytree(FIXTURE, other)
    doc = json.loads((other / "run.json").read_text())
    doc["model"]["name"] = "yolov5nu"
    (other / "run.json").write_text(json.dumps(doc))
    with pytest.warns(UserWarning, match="runs are of different models"):
        refused = hwprof.compare(FIXTURE, other)
    assert set(refused["section"]) == {"stage"} and "c_ms" not in refused.columns


class _Formatter:
    def __init__(self) -> None:
        self.types: dict[type, object] = {}

    def lookup_by_type(self, typ: type) -> object:
        return self.types[typ]

    def for_type(self, typ: type, func: object) -> None:
        self.types[typ] = func


def test_a_figure_shows_inline_in_ipython(monkeypatch: pytest.MonkeyPatch, run: hwprof.Run) -> None:
    """Inside IPython the PNG formatter is registered for figures made without pyplot, once, and an existing one
    (the user's %config) is kept."""
    from matplotlib.figure import Figure

    png = _Formatter()
    shell = types.SimpleNamespace(display_formatter=types.SimpleNamespace(formatters={"image/png": png}))
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    fig = run.plot_stages()
    assert fig is not None and png_bytes(fig) == png.types[Figure](fig)  # type: ignore[operator]
    mine = object()
    png.types[Figure] = mine
    run.plot_layers()
    assert png.types[Figure] is mine


def test_numbers_are_finite_or_null(run: hwprof.Run) -> None:
    for name in ("stages", "layers", "roofline", "pass_costs"):
        frame = run.table(name)
        for column, dtype in frame.schema.items():
            if dtype == pl.Float64:
                assert all(math.isfinite(v) for v in frame[column].drop_nulls()), (name, column)
