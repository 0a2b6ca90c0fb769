"""The runtime's output check as records (hwprof.schema.runtime_checks): run.json's runtime.output_diff and
profiled_passes round-trip key for key, a damaged field gives one line naming the file and the field, and
the report, compare and sweep read the typed fields (compare's JSON keeps output_diff as run.json holds it)."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from hwprof.analysis.run_head import RunHead
from hwprof.render.compare.runtime import diff_cells, raw_cell
from hwprof.render.runtime_tables import _clock_note, output_diff_text, runtime_line
from hwprof.rundir.reader import RunData, RunDirError
from hwprof.schema.run import RuntimeDoc
from hwprof.schema.runtime_checks import OutputDiff

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
RUNTIMES = [p for p in sorted(FIXTURES.rglob("run.json")) if "runtime" in json.loads(p.read_text())]
MEASURED = {
    "reference": "the fused torch model in fp32 on the same input (the first batch)",
    "max_abs_head": 0.0625,
    "mean_abs_head": 0.001,
    "max_abs_reference": 640.0,
    "detections": 3,
    "detections_reference": 4,
    "max_abs_raw": 0.125,
    "max_abs_raw_reference": 12.5,
    "raw_maps": 3,
}
"""What hwprof.workload.runtime_artifacts.output_difference writes for a runtime other than torch fp32."""
RUNTIME = {
    "name": "onnxruntime",
    "runtime": "onnxruntime",
    "precision": "int8",
    "version": "1.22.0",
    "provider": "CPUExecutionProvider",
    "executed_precision": "int8",
    "model_file": "model/yolov8n.int8.onnx",
    "model_sha256": "0123456789abcdef0123",
    "output_diff": MEASURED,
    "profiled_passes": {
        "layers": {
            "profiler": "onnxruntime's profiler",
            "clock": {"method": "anchor pairs", "error_bound_us": 12.5},
            "replayed_layer_markers": 40,
        }
    },
}


def test_a_fixture_holds_a_runtime() -> None:
    assert RUNTIMES


@pytest.mark.parametrize("path", RUNTIMES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_run_json_runtime_round_trips_byte_for_byte(path: Path) -> None:
    doc = json.loads(path.read_text())["runtime"]
    info = RuntimeDoc.from_json(doc, str(path), "runtime.")
    assert json.dumps(info.to_json(), indent=1) == json.dumps(doc, indent=1)
    assert isinstance(info.output_diff, OutputDiff) and info.output_diff.max_abs_head == 0.0


def test_a_measured_output_diff_round_trips_with_every_key_known() -> None:
    info = RuntimeDoc.from_json(RUNTIME, "run.json", "runtime.")
    assert json.dumps(info.to_json(), indent=1) == json.dumps(RUNTIME, indent=1)
    assert info.unknown_keys() == []
    diff = info.output_diff
    assert diff is not None and (diff.detections, diff.raw_maps, diff.max_abs_raw) == (3, 3, 0.125)


def test_the_report_reads_the_typed_runtime() -> None:
    info = RuntimeDoc.from_json(RUNTIME, "run.json", "runtime.")
    line = runtime_line(info)
    assert line == (
        "runtime",
        "onnxruntime 1.22.0 (CPUExecutionProvider), int8, model/yolov8n.int8.onnx sha256 0123456789ab; "
        "output vs torch fp32: head max |Δ| 0.0625 of values up to 640, raw maps max |Δ| 0.125 of values up to "
        "12.5, detections 3 vs 4",
    )
    assert _clock_note(info) == "layer spans placed on the run's clock: anchor pairs; error bound 12.5 µs"
    assert runtime_line(None) is None and runtime_line(RuntimeDoc()) is None
    glued = RuntimeDoc.from_json({**RUNTIME, "glue_threads": 1}, "run.json", "runtime.")
    assert glued.unknown_keys() == []
    glue_line = runtime_line(glued)
    assert glue_line is not None and glue_line[1].endswith(
        "detections 3 vs 4; torch glue (preprocess, NMS) on 1 thread(s): torch's idle OpenMP threads would spin "
        "into the forward"
    )
    reference = OutputDiff.from_json({"reference": "this run is the reference", "max_abs_head": 0.0}, "run.json")
    assert output_diff_text(reference) == "this run is the reference"
    assert output_diff_text(None) == "output vs torch fp32: not measured"


def test_compare_reads_and_writes_the_typed_output_diff() -> None:
    diff = OutputDiff.from_json(MEASURED, "run.json")
    assert diff_cells(diff, False) == ("0.0625 of 640", "3 vs 4")
    assert raw_cell(diff, False) == "0.125 of 12.5"
    assert diff_cells(OutputDiff(), False) == ("not measured", "not measured")
    head = RunHead("r", "p", "m", 640, 1, 4, "cpu", 1.0, 2.0, 3.0, 4.0, 5, 0.5, 6.0, "compute", None, output_diff=diff)
    written = head.to_dict()
    assert written["output_diff"] == MEASURED and list(written) == list(asdict(RunHead("r", *[None] * 15)))


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("detections", "3", "must be an integer, found a string"),
        ("max_abs_head", "big", "must be a number, found a string"),
        ("raw_maps", 2.5, "must be an integer, found a number"),
    ],
)
def test_a_damaged_output_diff_field_names_run_json_and_field(
    tmp_path: Path, field: str, value: Any, expected: str
) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "rundir_report", run)
    doc = json.loads((run / "run.json").read_text())
    doc["runtime"] = json.loads(json.dumps(RUNTIME))
    doc["runtime"]["output_diff"][field] = value
    (run / "run.json").write_text(json.dumps(doc, indent=1))
    with pytest.raises(RunDirError) as err:
        RunData.load(run)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f'{run / "run.json"}: field "runtime.output_diff.{field}" ')
    assert expected in message


def test_a_damaged_profiled_pass_names_its_field(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(RUNTIME))
    doc["profiled_passes"]["layers"]["replayed_layer_markers"] = "40"
    with pytest.raises(RunDirError, match=re.escape('field "runtime.profiled_passes.layers.replayed_layer_markers"')):
        RuntimeDoc.from_json(doc, "run.json", "runtime.")


ERRORS = {
    "model.0": {"max_abs": 0.5, "max_abs_reference": 8.0, "relative": 0.0625},
    "model.22": {"max_abs": 2.0, "max_abs_reference": 640.0, "relative": 0.003125},
}


def _with_layer_errors(tmp_path: Path) -> Path:
    """rundir_report with the model/layer_errors.json an onnxruntime int8 run writes (no fixture holds one)."""
    from hwprof.rundir.pass_files import write_layer_errors
    from hwprof.workload.layer_error import layer_errors_doc

    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "rundir_report", run)
    write_layer_errors(run, layer_errors_doc("onnxruntime", "int8", ERRORS))
    return run


def test_layer_errors_round_trip_byte_for_byte_and_reach_the_report(tmp_path: Path) -> None:
    from hwprof.analysis.run_analysis import analyse
    from hwprof.render.runtime_tables import layer_errors_spec

    run = _with_layer_errors(tmp_path)
    path = run / "model" / "layer_errors.json"
    errors = RunData.load(run).layer_errors()
    assert errors is not None and errors.unknown_keys() == []
    assert json.dumps(errors.to_json(), indent=1) == path.read_text()
    assert errors.layers["model.22"].max_abs_reference == 640.0
    spec = layer_errors_spec(analyse(RunData.load(run)))
    assert spec is not None and spec.title == "layer outputs vs torch fp32 (onnxruntime, int8), largest first"
    assert [row[1:] for row in spec.rows] == [["0.5", "8", "6.2%"], ["2", "640", "0.3%"]]
    assert (
        spec.notes[0].startswith("2 layers compared; each top-level layer's output") and "worst 6.2%" in spec.notes[0]
    )


@pytest.mark.parametrize(
    ("keys", "value", "field", "expected"),
    [
        (["layers", "model.0", "relative"], "high", "layers.model.0.relative", "must be a number"),
        (["layers", "model.0"], 0.5, "layers.model.0", "must be an object"),
        (["runtime"], 3, "runtime", "must be a string"),
    ],
)
def test_a_damaged_layer_errors_field_names_file_and_field(
    tmp_path: Path, keys: list[str], value: Any, field: str, expected: str
) -> None:
    from test_schema_pass_files import _damage

    run = _with_layer_errors(tmp_path)
    path = run / "model" / "layer_errors.json"
    _damage(path, list(keys), value)
    with pytest.raises(RunDirError) as err:
        RunData.load(run).layer_errors()
    message = str(err.value)
    assert "\n" not in message and message.startswith(f'{path}: field "{field}" {expected}'), message


def test_a_layer_error_missing_its_ratio_names_it(tmp_path: Path) -> None:
    run = _with_layer_errors(tmp_path)
    path = run / "model" / "layer_errors.json"
    doc = json.loads(path.read_text())
    del doc["layers"]["model.22"]["relative"]
    path.write_text(json.dumps(doc, indent=1))
    with pytest.raises(RunDirError, match=re.escape('field "layers.model.22.relative" is missing')):
        RunData.load(run).layer_errors()
