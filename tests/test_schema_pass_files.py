"""The pass folder's documents and run.json's host and peaks as records (hwprof.schema.pass_files, .host):
every fixture's model.json, result.json and run.json host/peaks round-trip byte for byte with every key known,
a damaged field gives one line naming the file and the field, and the layer table's typed rows keep the
column order the trace's layer slices show."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from hwprof.analysis.layers.rows import layer_rows
from hwprof.rundir.reader import RunData, RunDirError
from hwprof.schema.host import HostDoc, PeaksDoc
from hwprof.schema.pass_files import ModelInfo, PassResult, RuntimeFile

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
MODEL_FILES = sorted(FIXTURES.rglob("passes/*/model.json"))
RESULT_FILES = sorted(FIXTURES.rglob("passes/*/result.json"))
RUN_FILES = sorted(FIXTURES.rglob("run.json"))
REPORT_RUN = FIXTURES / "rundir_report"
RUNTIME_JSON = {
    "runtime": "onnxruntime",
    "precision": "fp32",
    "version": "1.22.0",
    "executed_precision": "fp32",
    "model_file": "model/yolov8n.onnx",
    "model_bytes": 12607616,
    "output_diff": {"reference": "the fused torch model in fp32", "max_abs_head": 0.01, "detections": 3},
    "profiler": "onnxruntime's profiler",
    "clock": {"method": "anchor pairs", "error_bound_us": 12.5},
    "trace_iterations": 20,
    "nodes_executed": 233,
    "fused_across_layers": 4,
}
"""A profiled runtime's runtime.json (hwprof.rundir.pass_files.write_runtime_files; no fixture holds one)."""


def _dump(doc: Any) -> str:
    return json.dumps(doc, indent=1)


def _id(path: Path) -> str:
    return str(path.relative_to(FIXTURES))


def test_the_fixtures_hold_pass_files() -> None:
    assert len(MODEL_FILES) >= 4 and len(RESULT_FILES) >= 10


@pytest.mark.parametrize("path", MODEL_FILES, ids=_id)
def test_model_json_round_trips_byte_for_byte_with_every_key_known(path: Path) -> None:
    text = path.read_text()
    info = ModelInfo.from_json(json.loads(text), str(path))
    assert _dump(info.to_json()) == text.rstrip("\n")
    assert info.unknown_keys() == []
    assert info.layers and all(row.name and row.type for row in info.layers)


@pytest.mark.parametrize("path", RESULT_FILES, ids=_id)
def test_result_json_round_trips_byte_for_byte_with_every_key_known(path: Path) -> None:
    text = path.read_text()
    result = PassResult.read(json.loads(text), str(path))
    assert _dump(result.to_json()) == text.rstrip("\n")
    assert [k for k in result.unknown_keys() if ".summary." not in k] == []


@pytest.mark.parametrize("path", RUN_FILES, ids=_id)
def test_run_json_host_and_peaks_round_trip_with_every_key_known(path: Path) -> None:
    doc = json.loads(path.read_text())
    host = HostDoc.from_json(doc["host"], str(path), "host.")
    assert host.to_json() == doc["host"] and list(host.to_json()) == list(doc["host"])
    assert host.unknown_keys() == []
    if doc.get("peaks") is not None:
        peaks = PeaksDoc.from_json(doc["peaks"], str(path), "peaks.")
        assert list(peaks.to_json().items()) == list(doc["peaks"].items())
        assert peaks.unknown_keys() == []


def test_runtime_json_round_trips_with_every_key_known() -> None:
    info = RuntimeFile.from_json(RUNTIME_JSON, "runtime.json")
    assert _dump(info.to_json()) == _dump(RUNTIME_JSON)
    assert info.unknown_keys() == []
    assert (info.profiler, info.nodes_executed, info.executed_precision) == ("onnxruntime's profiler", 233, "fp32")


def _copy(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(REPORT_RUN, run)
    return run


def _damage(path: Path, keys: list[str | int], value: Any) -> None:
    doc = json.loads(path.read_text())
    node = doc
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    path.write_text(json.dumps(doc, indent=1))


def _one_line(err: pytest.ExceptionInfo[RunDirError], path: Path, field: str, expected: str) -> None:
    message = str(err.value)
    assert "\n" not in message
    assert re.fullmatch(re.escape(f'{path}: field "{field}" {expected}') + ".*", message), message


@pytest.mark.parametrize(
    ("keys", "value", "field", "expected"),
    [
        (["layers", 3, "depth"], "1", "layers.3.depth", "must be an integer"),
        (["layers", 0, "from"], 5, "layers.0.from", "must be a list"),
        (["params_fused"], "3.1M", "params_fused", "must be an integer"),
        (["layers"], {"model.0": {}}, "layers", "must be a list"),
    ],
)
def test_a_damaged_model_json_field_names_file_and_field(
    tmp_path: Path, keys: list[str | int], value: Any, field: str, expected: str
) -> None:
    run = _copy(tmp_path)
    path = run / "passes" / "layers" / "model.json"
    _damage(path, keys, value)
    with pytest.raises(RunDirError) as err:
        _ = RunData.load(run).model_file
    _one_line(err, path, field, expected)


def test_a_layer_row_missing_a_column_names_it(tmp_path: Path) -> None:
    run = _copy(tmp_path)
    path = run / "passes" / "layers" / "model.json"
    doc = json.loads(path.read_text())
    del doc["layers"][2]["out_bytes"]
    path.write_text(json.dumps(doc))
    with pytest.raises(RunDirError, match=re.escape('model.json: field "layers.2.out_bytes" is missing')):
        _ = RunData.load(run).model_file


@pytest.mark.parametrize(
    ("keys", "value", "field", "expected"),
    [
        (["paired"], {"extension": {"added_blocks": "one"}}, "paired.extension.added_blocks", "must be an integer"),
        (["paired"], {"switched": "flops"}, "paired.switched", "must be a list"),
        (["collectors", "timing", "status"], 0, "collectors.timing.status", "must be a string"),
        (["collectors", "timing", "summary", "stages"], [], "collectors.timing.summary.stages", "must be an object"),
        (["finished_ns"], "late", "finished_ns", "must be an integer"),
    ],
)
def test_a_damaged_result_json_field_names_file_and_field(
    tmp_path: Path, keys: list[str | int], value: Any, field: str, expected: str
) -> None:
    run = _copy(tmp_path)
    path = run / "passes" / "timing" / "result.json"
    _damage(path, keys, value)
    with pytest.raises(RunDirError) as err:
        RunData.load(run).pass_result("timing")
    _one_line(err, path, field, expected)


def test_a_damaged_runtime_json_field_names_file_and_field(tmp_path: Path) -> None:
    run = _copy(tmp_path)
    path = run / "passes" / "timing" / "runtime.json"
    path.write_text(json.dumps({**RUNTIME_JSON, "nodes_executed": "many"}))
    with pytest.raises(RunDirError) as err:
        RunData.load(run).runtime_file("timing")
    _one_line(err, path, "nodes_executed", "must be an integer")


@pytest.mark.parametrize(
    ("keys", "value", "field", "expected"),
    [
        (["host", "torch", "version"], 2, "host.torch.version", "must be a string"),
        (["host", "torch"], None, "host.torch", "must be an object"),
        (["host", "logical_cpus"], "2", "host.logical_cpus", "must be an integer"),
        (["peaks", "gflops"], "fast", "peaks.gflops", "must be a number"),
        (["peaks", "gflops_probes"], [1.0], "peaks.gflops_probes", "must be an object"),
    ],
)
def test_a_damaged_host_or_peaks_field_names_run_json_and_field(
    tmp_path: Path, keys: list[str | int], value: Any, field: str, expected: str
) -> None:
    run = _copy(tmp_path)
    _damage(run / "run.json", keys, value)
    with pytest.raises(RunDirError) as err:
        RunData.load(run)
    _one_line(err, run / "run.json", field, expected)


def test_pass_result_is_parsed_once_and_typed() -> None:
    data = RunData.load(REPORT_RUN)
    result = data.pass_result("layers")
    assert data.pass_result("layers") is result
    assert result.status == "ok" and sorted(result.collectors) == ["flops", "perf_events", "sysstat"]
    assert data.pass_result("no-such-pass").to_json() == {}


def test_layer_rows_keep_the_table_order_the_trace_shows() -> None:
    data = RunData.load(REPORT_RUN)
    rows = layer_rows(data)
    assert [r.name for r in rows] == [e.name for e in data.model_file.layers]
    first = rows[0]
    keys = [k for k, _ in first.columns()]
    base = ["index", "name", "type", "from", "params", "in_bytes", "out_bytes", "weight_bytes", "out_shape"]
    assert keys[:9] == base
    assert keys[-1] == "time_ms" and first.time_ms is not None
    assert keys[9:-1] == list(first.metrics) and "flops" in first.metrics
    assert any(k.startswith("perf_events.") for k in first.metrics)
