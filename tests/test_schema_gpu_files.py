"""The GPU collectors' per-layer kernel tables as records (hwprof.schema.gpu_files): every fixture's
gpu_kineto.kernels.json and ncu.kernels.json round-trips byte for byte with every key known, RunData reads
each once and typed, and a damaged field gives one line naming the file and the field. gpu-import's
summaries (hwprof.schema.gpu_import) likewise."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_schema_pass_files import _damage

from hwprof.analysis.gpu.kernels import launch_fill, tensor_core_by_counter
from hwprof.rundir.reader import RunData, RunDirError
from hwprof.schema.codec import Record
from hwprof.schema.gpu_files import KinetoKernel, NcuKernel, layer_kernels_json, read_layer_kernels
from hwprof.schema.gpu_import import GpuRecording, KinetoImport, NcuImport, NvmlImport
from hwprof.schema.run import RunDoc

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
GPU_RUN = FIXTURES / "gpu_run_yolov8n"
KINETO_FILES = sorted(FIXTURES.rglob("gpu_kineto.kernels.json"))
NCU_FILES = sorted(FIXTURES.rglob("ncu.kernels.json"))


def test_the_fixtures_hold_kernel_tables() -> None:
    assert KINETO_FILES and NCU_FILES


@pytest.mark.parametrize(
    ("path", "row"),
    [(p, KinetoKernel) for p in KINETO_FILES] + [(p, NcuKernel) for p in NCU_FILES],
    ids=lambda v: str(v.relative_to(FIXTURES)) if isinstance(v, Path) else v.__name__,
)
def test_kernel_tables_round_trip_byte_for_byte_with_every_key_known(path: Path, row: Any) -> None:
    text = path.read_text()
    layers = read_layer_kernels(json.loads(text), row, str(path))
    assert json.dumps(layer_kernels_json(layers), indent=1) == text.rstrip("\n")
    assert layers and all(r.unknown_keys() == [] and r.name for rows in layers.values() for r in rows)


def test_run_data_reads_the_kernel_tables_once_and_typed() -> None:
    data = RunData.load(GPU_RUN)
    assert data.gpu_kernels is data.gpu_kernels and data.ncu_kernels is data.ncu_kernels
    first = data.gpu_kernels["model.0"][0]
    assert isinstance(first, KinetoKernel) and first.name.startswith("void implicit_convolve_sgemm")
    assert first.gpu_us == pytest.approx(16.8165) and first.calls == 1.0
    rows = [k for ks in data.ncu_kernels.values() for k in ks]
    assert all(isinstance(k, NcuKernel) and k.launch_known for k in rows)
    assert tensor_core_by_counter(rows, "FIX").to_dict() == {
        "unavailable": "the ncu CSV has no tensor-core math counter for 64 of 64 conv/GEMM kernels",
        "fix": "FIX",
    }
    fill = launch_fill(rows)
    assert fill is not None and fill.kernels == len(rows) and fill.sm_count == 132.0


def test_a_run_without_kernel_tables_reads_none(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(GPU_RUN, run)
    (run / "passes" / "ncu" / "ncu.kernels.json").unlink()
    assert RunData.load(run).ncu_kernels == {}


KINETO = "gpu/gpu_kineto.kernels.json"
NCU = "ncu/ncu.kernels.json"


@pytest.mark.parametrize(
    ("file", "keys", "value", "expected"),
    [
        (KINETO, ["layers", "model.3", 0, "gpu_us"], "12", "must be a number"),
        (KINETO, ["layers", "model.3"], {}, "must be a list"),
        (KINETO, ["layers"], [], "must be an object"),
        (NCU, ["layers", "model.0", 1, "waves"], "1.5", "must be a number"),
        (NCU, ["layers", "model.0", 0, "tensor_math_inst"], True, "must be a number"),
    ],
)
def test_a_damaged_kernel_table_names_file_and_field(
    tmp_path: Path, file: str, keys: list[Any], value: Any, expected: str
) -> None:
    run = tmp_path / "run"
    shutil.copytree(GPU_RUN, run)
    path = run / "passes" / file
    _damage(path, keys, value)
    data = RunData.load(run)
    with pytest.raises(RunDirError) as err:
        _ = data.gpu_kernels if file == KINETO else data.ncu_kernels
    message = str(err.value)
    field = ".".join(str(k) for k in keys)
    assert "\n" not in message
    assert re.fullmatch(re.escape(f'{path}: field "{field}" {expected}') + ".*", message), message


def test_a_kernel_row_missing_its_time_names_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(GPU_RUN, run)
    path = run / "passes" / "ncu" / "ncu.kernels.json"
    doc = json.loads(path.read_text())
    del doc["layers"]["model.0"][0]["ns"]
    path.write_text(json.dumps(doc, indent=1))
    with pytest.raises(RunDirError, match=re.escape('field "layers.model.0.0.ns" is missing')):
        _ = RunData.load(run).ncu_kernels


def _imports() -> list[tuple[type[Record], dict[str, Any]]]:
    from hwprof.gpu.importer import import_kineto, import_ncu, import_nvml, peaks_from_results

    recorded = FIXTURES / "gpu"
    kineto = import_kineto(recorded / "kineto_yolov8n_640_fp32.2fwd.json.gz")
    peaks = peaks_from_results(recorded / "gpu_results.subset.json")
    csvs = (recorded / "ncu_yolov8n_640_fp32.csv.gz", recorded / "ncu_app-range_yolov8n_640_fp32.csv.gz")
    ncu = import_ncu(*csvs, peaks, [kineto])
    nvml = import_nvml(recorded / "nvml_samples.json.gz", recorded / "gpu_results.subset.json")
    return [(KinetoImport, kineto.to_json()), (NcuImport, ncu.to_json()), (NvmlImport, nvml.to_json())]


def test_gpu_import_summaries_round_trip_with_every_key_known() -> None:
    """gpu-import's tables read its summaries as records: each is read back key for key (its JSON unchanged)."""
    for kind, doc in _imports():
        record = kind.from_json(doc, "gpu-import")
        assert json.dumps(record.to_json(), indent=1, default=str) == json.dumps(doc, indent=1, default=str)
        assert record.unknown_keys() == [], kind
    ncu = NcuImport.from_json(_imports()[1][1], "gpu-import")
    assert ncu.tensor_cores.unavailable and ncu.launch_fill is not None and ncu.launch_fill.sm_count == 132.0


def test_a_damaged_gpu_import_summary_names_the_field() -> None:
    kineto = _imports()[0][1]
    kineto["layers"][2]["gpu_us"] = "slow"
    with pytest.raises(RunDirError, match=re.escape('gpu-import: field "layers.2.gpu_us" must be a number')):
        KinetoImport.from_json(kineto, "gpu-import")


@pytest.mark.parametrize("path", [FIXTURES / "gpu" / "gpu_results.subset.json", GPU_RUN / "passes/gpu/gpu_peaks.json"])
def test_gpu_recording_round_trips_byte_for_byte(path: Path) -> None:
    """gpu_results.json (a recording) and gpu_peaks.json (an imported run's) read as GpuRecording, written back
    key for key; the peaks and the device's compute capability typed."""
    doc = json.loads(path.read_text())
    recording = GpuRecording.load(path)
    assert json.dumps(recording.to_json(), indent=1) == json.dumps(doc, indent=1)
    assert recording.device.cc == "9.0" and recording.peak_table()["matmul_fp32_tflops"] == 51.6


def test_gpu_peaks_cache_without_a_peaks_key_is_its_own_table(tmp_path: Path) -> None:
    path = tmp_path / "peaks.json"
    path.write_text(json.dumps({"matmul_fp32_tflops": 51.6, "d2d_copy_gbps_read_plus_write": 3015.4}))
    assert GpuRecording.load(path).peak_table() == {"matmul_fp32_tflops": 51.6, "d2d_copy_gbps_read_plus_write": 3015.4}


@pytest.mark.parametrize(
    ("keys", "value", "expected"),
    [
        (["bench", 0, "window_ns"], "soon", 'field "bench.0.window_ns" must be a list, found a string'),
        (["bench", 1, "model"], None, 'field "bench.1.model" must be a string, found null'),
        (["device", "cc"], 9.0, 'field "device.cc" must be a string, found a number'),
    ],
)
def test_a_damaged_gpu_recording_names_the_file_and_field(
    tmp_path: Path, keys: list[Any], value: Any, expected: str
) -> None:
    doc = json.loads((FIXTURES / "gpu" / "gpu_results.subset.json").read_text())
    target = doc
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    path = tmp_path / "gpu_results.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(RunDirError, match=re.escape(f"{path}: {expected}")) as err:
        GpuRecording.load(path)
    assert "\n" not in str(err.value)


def test_imported_section_is_typed_and_a_damaged_field_names_it() -> None:
    doc = json.loads((GPU_RUN / "run.json").read_text())
    run = RunDoc.read(doc, "run.json")
    assert run.imported is not None and run.imported.configuration is not None
    assert run.imported.configuration.batch == 1 and run.imported.device == "NVIDIA H100 80GB HBM3"
    assert not [key for key in run.unknown_keys() if key.startswith("imported.")]
    doc["imported"]["configuration"]["batch"] = "one"
    expected = 'run.json: field "imported.configuration.batch" must be an integer'
    with pytest.raises(RunDirError, match=re.escape(expected)):
        RunDoc.read(doc, "run.json")
