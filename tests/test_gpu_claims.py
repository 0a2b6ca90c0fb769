"""The GPU report claims only what a counter shows (issue 25): tensor-core use only from ncu's tensor-core
math counters (HMMA/IMMA/GMMA), one cache state per roofline point, and "too small to fill the GPU" only
with launch-size and occupancy figures. On the H100 recordings (tests/fixtures/gpu) and, where a column is
missing there, on a SYNTHETIC copy with that column added (it tests the parser and the logic; its values
are made up and no figure of the report comes from them)."""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import pytest
from gpu_rundir import gpu_run
from hwprof.collectors.gpu.ncu.csv_report import parse_ncu_csv
from hwprof.collectors.gpu.ncu.per_layer import kernel_layers, layer_tables

from hwprof.analysis.gpu.kernels import tensor_core_by_counter
from hwprof.analysis.gpu.roofline import GpuRoof, roofline_rows
from hwprof.schema.gpu_files import NcuKernel

FIX = Path(__file__).parent / "fixtures" / "gpu"
NCU = FIX / "ncu_yolov8n_640_fp32.csv.gz"
NCU_RANGE = FIX / "ncu_app-range_yolov8n_640_fp32.csv.gz"
HMMA = "sm__inst_executed_pipe_tensor_op_hmma.sum"
TENSOR_MATH = (HMMA, "sm__inst_executed_pipe_tensor_op_imma.sum", "sm__inst_executed_pipe_tensor_op_gmma.sum")
"""The names ncu lists on sm_90 (collectors/gpu/ncu/per_layer.py TENSOR_MATH, checked against it below)."""


def _synthetic_tensor_math(layers: set[int], hmma: dict[int, int]) -> str:
    """SYNTHETIC: the recorded kernel-replay CSV cut to the kernels of `layers`, with the TENSOR_MATH
    columns added: `hmma` gives HMMA instructions by the kernel's ID, every other value is 0."""
    with gzip.open(NCU, "rt") as handle:
        lines = handle.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    header, units, *rows = list(csv.reader(lines[start:]))
    nvtx = next(i for i, h in enumerate(header) if h.startswith("thread Domain"))
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL)
    writer.writerow([*header, *TENSOR_MATH])
    writer.writerow([*units, *(["inst"] * len(TENSOR_MATH))])
    for row in rows:
        if any(f":layer {i} " in row[nvtx] for i in layers):
            writer.writerow([*row, f"{hmma.get(int(row[0]), 0):,}", "0", "0"])
    return out.getvalue()


def test_tensor_pipe_counter_gives_no_tensor_core_figure():
    """The recording has only sm__inst_executed_pipe_tensor, which counts in layout transposes (25,600)
    and elementwise kernels (51,200): it drove "600.6 us with / 0.0 without" and the `*` marks. Now
    tensor-core use is unavailable, with the ncu option that records it."""
    with gzip.open(NCU, "rt") as handle:
        tables, kernels = layer_tables(parse_ncu_csv(handle.read()), None)
    rows = [k for ks in kernels.values() for k in ks]
    transposes = [k for k in rows if "nchwToNhwc" in k["name"]]
    assert transposes and all(k["tensor_pipe_inst"] > 0 for k in transposes)  # why that counter is not used
    assert all(k["tensor_math_inst"] is None for k in rows)
    assert not any("tensor_math_inst" in layer for layer in tables.layers.values())
    counted = tensor_core_by_counter([NcuKernel.from_json(k, "ncu.csv") for k in rows], "FIX")
    assert counted.to_dict() == {
        "unavailable": "the ncu CSV has no tensor-core math counter for 64 of 64 conv/GEMM kernels",
        "fix": "FIX",
    }
    roof = GpuRoof(51.6, 3015.4)
    assert all(r.lower_bound is None for r in roofline_rows(tables.layers, roof))


def test_tensor_core_math_columns_are_read_when_present():
    """SYNTHETIC columns (see _synthetic_tensor_math) on layers 0 (Conv: 3 kernels) and 11 (Concat)."""
    from hwprof.analysis.gpu.roofline import MEMORY, MEMORY_LOWER_BOUND

    report = parse_ncu_csv(_synthetic_tensor_math({0, 11}, {0: 1_600}))
    layers = kernel_layers(report)
    assert set(layers) == {"model.0", "model.11"}
    assert layers["model.0"].figures["tensor_math_inst"] == 1_600
    assert layers["model.11"].figures["tensor_math_inst"] == 0
    by_id = {k["name"]: k for k in layers["model.0"].kernel_rows}
    first = report.rows[0]
    assert by_id[first.name]["tensor_math_inst"] == 1_600
    counted = tensor_core_by_counter([NcuKernel.from_json(k, "ncu.csv") for k in layers["model.0"].kernel_rows], "FIX")
    assert counted.tensor_ns == first.metrics["gpu__time_duration.sum"]
    tables, _ = layer_tables(report, None)
    rows = {r.layer: r for r in roofline_rows(tables.layers, GpuRoof(51.6, 3015.4))}
    assert rows["model.0"].lower_bound is True and rows["model.11"].lower_bound is False
    assert rows["model.11"].cold is not None and rows["model.11"].cold.bound == MEMORY
    conv = rows["model.0"].cold
    assert conv is not None and conv.bound in (MEMORY_LOWER_BOUND, "compute")


def test_live_kernel_pass_asks_for_tensor_core_math_the_device_lists():
    """SYNTHETIC `ncu --query-metrics` text: GMMA (Hopper only) is dropped where the device lacks it, since
    one unknown metric makes ncu refuse the whole run; every optional metric is kept where the list is unknown."""
    from hwprof.collectors.gpu.ncu import per_layer as layers
    from hwprof.collectors.gpu.ncu.collector import NcuKernelCollector
    from hwprof.collectors.gpu.ncu.live import metrics_for, parse_query_metrics

    assert getattr(layers, "TENSOR_MATH", None) == TENSOR_MATH

    listing = (
        "Device NVIDIA A100 (GA100)\n----\nMetric Name   Metric Description\n"
        "dram__bytes   # of bytes accessed in DRAM\n"
        "sm__inst_executed_pipe_tensor_op_hmma   # of warp instructions executed by tensor pipe (HMMA ops)\n"
        "sm__inst_executed_pipe_tensor_op_imma   # of warp instructions executed by tensor pipe (IMMA ops)\n"
    )
    listed = parse_query_metrics(listing)
    assert listed is not None and "dram__bytes" in listed and "Metric" not in listed
    base = NcuKernelCollector.metrics
    chosen = metrics_for(base, NcuKernelCollector.optional_metrics, listed)
    assert chosen[: len(base)] == list(base)
    assert chosen[len(base) :] == [HMMA, "sm__inst_executed_pipe_tensor_op_imma.sum"]
    assert metrics_for(base, TENSOR_MATH, None)[len(base) :] == list(TENSOR_MATH)
    assert parse_query_metrics("==ERROR== no device\n") is None
    assert {"launch__grid_size", "launch__waves_per_multiprocessor", "launch__sm_count"} <= set(base)


@pytest.fixture(scope="module")
def gpu_view(tmp_path_factory):
    from hwprof.analysis.gpu.view import load_gpu_view
    from hwprof.rundir.reader import RunData

    run_dir, _ = gpu_run(tmp_path_factory.mktemp("claims"))
    view = load_gpu_view(RunData.load(run_dir))
    assert view is not None
    return view


def test_findings_state_only_what_a_counter_shows(gpu_view):
    from hwprof.analysis.gpu.view import gpu_findings

    titles = {f.title: f for f in gpu_findings(gpu_view)}
    assert not any("tensor cores" in t or "by kernel name" in t for t in titles)  # no counter, no claim
    roof = next(f for t, f in titles.items() if t.startswith("no layer reaches half of a roof"))
    assert roof.title.endswith("launches too small to fill the GPU")
    assert "94% is in launches of under one wave and 55% in grids of fewer blocks than the 132 SMs" in roof.evidence
    assert "achieved occupancy 19% of the warps an SM holds, against 65% theoretical" in roof.evidence
    assert "best model.14: 49% of its roof" in roof.evidence and "warm caches" in roof.evidence


def test_no_cause_without_launch_figures(gpu_view):
    """A run whose kernel rows lack the launch size (an older ncu.kernels.json) gets the roof finding
    without a cause."""
    import copy

    from hwprof.analysis.gpu.view import gpu_findings

    view = copy.deepcopy(gpu_view)
    for rows in view.ncu_kernels.values():
        for k in rows:
            k.waves = None
    roof = next(f for f in gpu_findings(view) if f.title.startswith("no layer reaches half"))
    assert roof.title == "no layer reaches half of a roof" and "no cause is given" in roof.evidence


def test_roofline_points_pair_one_cache_state(gpu_view):
    """Each point pairs bytes and time of one cache state; Detect's warm time is the real forward's."""
    detect = next(r for r in gpu_view.roofline if r.layer == "model.22")
    assert detect.warm is not None and detect.cold is not None
    assert detect.warm.ns == pytest.approx(gpu_view.layers["model.22"]["gpu_us"] * 1e3)
    assert 280_000 < detect.warm.ns < 310_000 and detect.cold.ns == 458_816
    assert detect.warm.achieved_gbps == pytest.approx(detect.warm.bytes / detect.warm.ns)


def test_gpu_import_prints_unavailable_with_the_fix(capsys):
    from hwprof.cli.main import main

    args = ["gpu-import", "--ncu", str(NCU), "--ncu-app-range", str(NCU_RANGE)]
    assert main([*args, "--peaks", str(FIX / "gpu_results.subset.json")]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "tensor-core use per kernel and layer: unavailable: the ncu CSV has no tensor-core math counter" in text
    assert "--metrics " + ",".join(TENSOR_MATH) in text.replace(", ", ",").replace(". ", ".")
    assert "tensor-pipe instructions (ncu)" not in text and "600.6" not in text
    assert "94.5% in launches of under one wave" in text
