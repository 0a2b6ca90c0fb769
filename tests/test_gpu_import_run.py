"""`hwprof gpu-import --out`: a run directory from the H100 recordings (the shipped fixture
tests/fixtures/gpu_run_yolov8n), read by report, trace and compare like any run; the GPU tables readable at
80 and 100 columns (every layer row named by its untruncated index and type)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from gpu_trace_checks import check_kernels_and_launches
from json_same import assert_same_json
from rich.console import Console

from hwprof.analysis.run_analysis import analyse
from hwprof.cli.main import main
from hwprof.render.gpu.sections import gpu_forward_spec, gpu_layers_spec, gpu_roofline_spec
from hwprof.render.report import header_lines
from hwprof.render.tables import spec_renderables
from hwprof.rundir.reader import RunData

FIX = Path(__file__).parent / "fixtures"
RUN = FIX / "gpu_run_yolov8n"
GPU = FIX / "gpu"
YOLOV8N_TYPES = {0: "Conv", 2: "C2f", 9: "SPPF", 10: "Upsample", 11: "Concat", 22: "Detect"}


def _copy(tmp_path: Path) -> Path:
    run = tmp_path / "gpu_run"
    shutil.copytree(RUN, run)
    return run


def test_fixture_is_what_the_script_makes(tmp_path: Path) -> None:
    sys.path.insert(0, str(FIX.parent.parent / "scripts"))
    from make_gpu_run_fixture import make

    here = os.getcwd()
    os.chdir(FIX.parent.parent)
    try:
        assert make(tmp_path / "made") == 0
    finally:
        os.chdir(here)
    for rel in ("passes/gpu/gpu_kineto.metrics.json", "passes/ncu/ncu.metrics.json", "passes/gpu/markers.jsonl"):
        _assert_same_json(tmp_path / "made" / rel, RUN / rel)
    made, shipped = (json.loads((d / "run.json").read_text()) for d in (tmp_path / "made", RUN))
    for doc in (made, shipped):
        for key in ("created", "run_id", "command"):
            doc.pop(key)
    assert_same_json(made, shipped, "run.json", key_order=True)
    for rel in ("passes/gpu/model.json", "passes/gpu/gpu_peaks.json"):
        _assert_same_json(tmp_path / "made" / rel, RUN / rel)


def _assert_same_json(made: Path, shipped: Path) -> None:
    """The same JSON (or JSON lines) as the shipped file: keys in the same order, floats to 1e-9 (another numpy
    sums in another order: an H100 host's numpy 2.5 differed from the shipped file in the 12th digit)."""
    rel = str(shipped.relative_to(RUN))
    if shipped.suffix == ".jsonl":
        lines = [p.read_text().splitlines() for p in (made, shipped)]
        assert len(lines[0]) == len(lines[1]), rel
        for n, (a, b) in enumerate(zip(*lines, strict=True), 1):
            assert_same_json(json.loads(a), json.loads(b), f"{rel}:{n}", key_order=True)
        return
    assert_same_json(json.loads(made.read_text()), json.loads(shipped.read_text()), rel, key_order=True)


def test_imported_run_reads_like_a_run() -> None:
    data = RunData.load(RUN)  # run.json passes runschema's checks
    run = data.doc.to_json()
    assert run["imported"]["device"] == "NVIDIA H100 80GB HBM3"
    assert set(data.pass_names) == {"gpu", "ncu", "ncu_range"}
    a = analyse(data)
    assert a.gpu is not None and a.gpu.kineto.forwards == 2 and a.gpu.kineto.kernels_per_forward == 297
    assert len(a.gpu.roofline) == 23
    assert {r.name: r.type for r in a.layers.layers}["model.22"] == "Detect"
    launch = next(f for f in a.findings if f.title.startswith("launch-bound"))
    assert "not measured in this run: a CUDA graph" in launch.evidence  # no cuda_graph pass in a recording
    hot = [f for f in a.findings if f.kind == "hotspot" and "forward" in f.title]
    assert hot and all("of the forward's host (launch) time" in f.title for f in hot)  # the hooks time launching
    header = dict(header_lines(a))
    assert header["source"].startswith("imported from ") and "kineto_yolov8n_640_fp32.2fwd.json.gz" in header["source"]
    assert header["device"].startswith("NVIDIA H100 80GB HBM3")
    assert "host" not in header and header["recording host"].startswith("Intel(R) Xeon(R) Processor, 16 logical")
    nvml = run["collectors"]["nvml"]["summary"]
    assert nvml["j_per_iteration"] is None and "no pair of readings" in nvml["energy_unavailable"]
    assert not (RUN / "passes" / "gpu" / "nvml.records.jsonl").exists()  # not aligned: not on the trace


def test_report_trace_compare_on_the_imported_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hwprof.trace.processor import TraceSession, availability

    run = _copy(tmp_path)
    assert main(["report", str(run)]) == 0
    out = capsys.readouterr().out
    assert "imported from" in out and "GPU roofline per layer" in out
    assert main(["trace", str(run)]) == 0
    other = tmp_path / "cpu_run"
    shutil.copytree(FIX / "rundir_small", other)
    assert main(["compare", str(run), str(other)]) == 0
    compared = capsys.readouterr().out
    assert "yolov8n" in compared and "- / - / -" in compared  # imgsz, batch, threads: not in a Kineto trace
    flat = " ".join(compared.split())
    assert "16 CPUs, ISA not recorded" in flat and "16 CPUs, no avx2" not in flat  # the recording host's flags
    if not availability().available:
        pytest.skip(f"Perfetto's trace processor cannot run here: {availability().reason}")
    with TraceSession(run / "trace.pftrace") as tp:
        check_kernels_and_launches(tp, "GPU 0 stream 7", 2 * 297)
        layers = tp.query("select count(*) as n from slice where category = 'layer'")[0]["n"]
        assert layers == 2 * 23  # the recorded 'layer <i> <Type>' ranges, as slices
        assert tp.query("select count(*) as n from counter_track where name glob 'GPU power*'")[0]["n"] == 0


def test_out_refuses_a_used_folder_and_two_traces(tmp_path: Path) -> None:
    k = str(GPU / "kineto_yolov8n_640_fp32.2fwd.json.gz")
    used = tmp_path / "used"
    used.mkdir()
    (used / "x").write_text("")
    assert main(["gpu-import", "--kineto", k, "--out", str(used)]) == 2
    assert main(["gpu-import", "--kineto", k, "--kineto", k, "--out", str(tmp_path / "new")]) == 2
    assert not (tmp_path / "new").exists()


# ----------------------------------------------------------------------------- 80 and 100 columns

ROW = re.compile(r"^[│|]\s*(\d+)\s*[│|]\s*(\S+)\s*[│|]\s*(\S*)")
CACHES = ("warm", "cold")
"""A roofline row's third cell: one row per layer and cache state."""


def _layer_rows(text: str) -> list[tuple[int, str]]:
    return [(int(m.group(1)), m.group(2)) for line in text.splitlines() if (m := ROW.match(line))]


def _row_keys(text: str) -> list[tuple[int, str]]:
    """(index, cache) of a roofline row, (index, "") of any other layer row."""
    return [
        (int(m.group(1)), m.group(3) if m.group(3) in CACHES else "")
        for line in text.splitlines()
        if (m := ROW.match(line))
    ]


def _check_rows(text: str, types: dict[int, str], expected: int) -> None:
    rows = _layer_rows(text)
    assert len(rows) == expected, text
    assert len(set(_row_keys(text))) == len(rows), text  # unique
    for index, type_name in rows:
        assert "…" not in type_name and type_name == types.get(index, type_name), (index, type_name)


@pytest.mark.parametrize("width", [80, 100])
def test_report_gpu_sections_at_width(width: int) -> None:
    a = analyse(RunData.load(RUN))
    types = {r.index: r.type for r in a.layers.layers}
    assert all(types[i] == t for i, t in YOLOV8N_TYPES.items())
    for spec, expected, columns in (
        (gpu_layers_spec(a, 15), 15, ("#", "type", "GPU us", "kernels", "launch us")),
        (gpu_roofline_spec(a), 2 * 23, ("#", "type", "cache", "us", "DRAM MB", "bound", "of roof")),
    ):
        assert spec is not None
        console = Console(record=True, width=width)
        for part in spec_renderables(spec, console):
            console.print(part)
        text = console.export_text()
        _check_rows(text, types, expected)
        header = next(line for line in text.splitlines() if line.startswith("┃"))
        for col in columns:
            assert re.search(rf"┃\s*{re.escape(col)}\s*┃", header), (col, header)
        if width == 100 and spec.title == "layers by GPU time":
            assert "largest kernels (us)" in header  # kept at 100 (dropped at 80 with a note)
    forward = gpu_forward_spec(a)
    assert forward is not None
    console = Console(record=True, width=width)
    for part in spec_renderables(forward, console):
        console.print(part)
    text = console.export_text()
    assert "forward CPU time (profiled)" in text and "GPU clock alignment" in text and "…" not in text


@pytest.mark.parametrize("width", [80, 100])
def test_gpu_import_tables_at_width(width: int) -> None:
    from hwprof.gpu.importer import import_kineto, import_ncu, peaks_from_results
    from hwprof.render.gpu.tables import print_kineto, print_ncu

    summary = import_kineto(GPU / "kineto_yolov7_640_fp32.trimmed.json.gz", ("cuda_runtime",))
    console = Console(record=True, width=width)
    print_kineto(console, summary, "yolov7", 5)
    text = console.export_text()
    _check_rows(text, {105: "Detect", 51: "SPPCSPC", 0: "Conv"}, 5)
    assert (105, "Detect") in _layer_rows(text)
    peaks = peaks_from_results(GPU / "gpu_results.subset.json")
    ncu = import_ncu(GPU / "ncu_yolov8n_640_fp32.csv.gz", GPU / "ncu_app-range_yolov8n_640_fp32.csv.gz", peaks)
    console = Console(record=True, width=width)
    print_ncu(console, ncu)
    text = console.export_text()
    rows = _layer_rows(text)
    assert len(rows) == 3 * 23 and (22, "Detect") in rows  # the per-layer table and the roofline (warm, cold)
    for col in ("replay us", "cold MB", "warm MB", "FP32 GFLOP", "cache", "bound"):
        assert col in text


def test_gpu_import_energy_table_unavailable_and_counter_rows() -> None:
    """A window NVML cannot cover is a row saying why (it raised KeyError), a window from the energy counter is
    labelled "counter" (the counter's method text starts "estimate:", so it was labelled a power integral), and
    a mean that was not sampled is "-" (it was 0)."""
    from hwprof.collectors.gpu.nvml.series import COUNTER_METHOD

    from hwprof.render.gpu.tables import print_nvml
    from hwprof.schema.gpu_import import NvmlImport

    method = COUNTER_METHOD.format(period=98)
    s = {
        "samples": 3,
        "span_s": 1.0,
        "columns": ["t_mono_ns", "power_mw", "energy_mj"],
        "windows": [
            {"model": "yolov7", "precision": "fp32", "unavailable": "the window is outside the samples"},
            {
                "model": "yolov8n",
                "precision": "fp32",
                "j_per_inference": 0.8,
                "power_w": 140.0,
                "method": method,
                "recorded_j_per_inference": None,
                "means": {"power_w": 140.0},
            },
        ],
    }
    for width in (80, 100):
        console = Console(record=True, width=width)
        print_nvml(console, NvmlImport.from_json(s, "gpu-import"))
        text = console.export_text()
        assert "unavailable:" in text and "outside" in text
        row = next(line for line in text.splitlines() if "yolov8n" in line)
        assert "counter" in row and "power" not in row and " 0 " not in row
