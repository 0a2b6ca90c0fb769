"""The run directory's files that the session, a pass's worker, `hwprof advise` and a sweep hand each other,
read and written through hwprof.rundir: each written file reads back, and a damaged one gives one line
naming the file (and the field, where the file has fields)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hwprof.core.config import RunConfig
from hwprof.rundir.advise_files import read_advise_result, read_advise_spec, write_advise_result, write_advise_spec
from hwprof.rundir.logs import child_log, log_lines, write_log
from hwprof.rundir.pass_files import write_layer_errors
from hwprof.rundir.reader import RunData, read_layer_errors
from hwprof.rundir.sweep_files import read_transfers, write_transfers
from hwprof.rundir.worker_files import (
    read_config,
    read_image_paths,
    read_worker_pid,
    write_config,
    write_images,
    write_worker_pid,
)
from hwprof.schema.advise_result import AdviseResult, AdviseSpec
from hwprof.schema.check import RunDirError
from hwprof.schema.run import RunDoc


def _one_line(exc: pytest.ExceptionInfo[RunDirError]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_images_read_back_and_a_damaged_file_names_the_field(tmp_path: Path) -> None:
    write_images(tmp_path, {"paths": ["/a.jpg", "/b.jpg"], "skipped": [], "source": "coco"})
    assert read_image_paths(tmp_path) == [Path("/a.jpg"), Path("/b.jpg")]
    (tmp_path / "images.json").write_text(json.dumps({"paths": "/a.jpg"}))
    with pytest.raises(RunDirError) as exc:
        read_image_paths(tmp_path)
    assert (
        _one_line(exc)
        == f'{tmp_path / "images.json"}: field "paths" must be a list of strings, found a string ("/a.jpg")'
    )
    (tmp_path / "images.json").write_text("{torn")
    with pytest.raises(RunDirError) as exc:
        read_image_paths(tmp_path)
    assert _one_line(exc).startswith(f"{tmp_path / 'images.json'}: not valid JSON")


def test_config_reads_back_and_a_missing_or_damaged_one_is_named(tmp_path: Path) -> None:
    config = RunConfig(model="yolov8n", events=["task-clock"], extra={"rect": True})
    write_config(tmp_path, config)
    assert json.loads((tmp_path / "config.json").read_text()) == config.to_dict()
    assert read_config(tmp_path) == config
    with pytest.raises(RunDirError) as exc:
        read_config(tmp_path / "none")
    assert _one_line(exc) == f"{tmp_path / 'none' / 'config.json'}: file is missing"
    (tmp_path / "config.json").write_text("[]")
    with pytest.raises(RunDirError) as exc:
        read_config(tmp_path)
    assert _one_line(exc).startswith(f"{tmp_path / 'config.json'}: must be a JSON object")


def test_worker_pid_is_none_until_a_whole_one_is_written(tmp_path: Path) -> None:
    assert read_worker_pid(tmp_path) is None
    (tmp_path / "worker.pid").write_text("12")
    (tmp_path / "worker.pid").write_text("")
    assert read_worker_pid(tmp_path) is None
    write_worker_pid(tmp_path, 4321)
    assert read_worker_pid(tmp_path) == 4321


def test_a_child_log_reads_back_line_by_line(tmp_path: Path) -> None:
    path = tmp_path / "worker.log"
    assert log_lines(path) == []
    with child_log(path) as log:
        log.write("first\nhwprof-error: the last\n")
    assert log_lines(path) == ["first", "hwprof-error: the last"]
    write_log(path, b"node's log \xff\n")
    assert log_lines(path) == ["node's log \ufffd"]


def test_layer_errors_written_read_back_and_a_damaged_field_is_named(tmp_path: Path) -> None:
    assert read_layer_errors(tmp_path) is None
    doc = {
        "runtime": "onnxruntime",
        "precision": "int8",
        "layers": {"model.0": {"max_abs": 0.5, "max_abs_reference": 8.0, "relative": 0.0625}},
    }
    path = write_layer_errors(tmp_path, doc)
    errors = read_layer_errors(tmp_path)
    assert errors is not None and errors.to_json() == doc
    assert RunData(tmp_path, RunDoc()).layer_errors() == errors
    path.write_text(json.dumps({**doc, "precision": 8}))
    with pytest.raises(RunDirError) as exc:
        read_layer_errors(tmp_path)
    assert _one_line(exc).startswith(f'{path}: field "precision" must be')


def test_advise_spec_and_result_read_back_and_damaged_ones_are_named(tmp_path: Path) -> None:
    spec_path, out = tmp_path / "paired.spec.json", tmp_path / "paired.json"
    write_advise_spec(spec_path, AdviseSpec.of(key="k", out=str(out)))
    assert read_advise_spec(spec_path).out == str(out)
    assert json.loads(spec_path.read_text()) == {"key": "k", "out": str(out)}
    write_advise_spec(spec_path, AdviseSpec.of(key="k"))
    with pytest.raises(RunDirError) as exc:
        read_advise_spec(spec_path)
    assert _one_line(exc).startswith(f'{spec_path}: field "out" must be a string')
    assert read_advise_result(out).error is None  # none written: the worker's exit says why
    write_advise_result(out, AdviseResult.of(error="RuntimeError: no"))
    assert read_advise_result(out).error == "RuntimeError: no"
    out.write_text(json.dumps({"mode": "paired", "sides": {"baseline": {"forward_ms": []}}}))
    with pytest.raises(RunDirError) as exc:
        read_advise_result(out)
    assert _one_line(exc).startswith(f'{out}: field "sides.baseline.')


def test_transfers_append_across_a_resume(tmp_path: Path) -> None:
    write_transfers(tmp_path, [{"point": "a"}])
    write_transfers(tmp_path, [*read_transfers(tmp_path), {"point": "b"}])
    assert read_transfers(tmp_path) == [{"point": "a"}, {"point": "b"}]
