"""advice.json as the schema's AdviceFile (hwprof.schema.advice_file): the fixture's file and a sample advice as
hwprof writes it round-trip byte for byte with every key known, Advice.from_dict reads the typed fields back
into the same advice, and a damaged field gives one line naming advice.json and the field."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from advice_sample import sample_advice

from hwprof.analysis.advice.table import Advice, load_advice
from hwprof.rundir.reader import RunDirError
from hwprof.schema.advice_file import AdviceFile

FIXTURE = Path(__file__).parent / "fixtures" / "gpu_run_yolov8n" / "advice.json"


def _docs() -> list[Any]:
    return [json.loads(FIXTURE.read_text()), json.loads(json.dumps(sample_advice(10**9).to_dict()))]


@pytest.mark.parametrize("index", [0, 1], ids=["gpu_run_yolov8n", "sample"])
def test_advice_json_round_trips_byte_for_byte_with_every_key_known(index: int) -> None:
    doc = _docs()[index]
    advice = AdviceFile.read(doc, "advice.json")
    assert json.dumps(advice.to_json(), indent=1) == json.dumps(doc, indent=1)
    assert advice.unknown_keys() == []
    assert json.dumps(Advice.from_dict(doc).to_dict(), indent=1) == json.dumps(doc, indent=1)


@pytest.mark.parametrize(
    ("keys", "value", "expected"),
    [
        (["rows", 0, "forward", "ratio"], "fast", 'field "rows.0.forward.ratio" must be a number, found a string'),
        (["rows", 1, "layers"], {}, 'field "rows.1.layers" must be a list, found an object'),
        (["blocks", 0, "start_ns"], None, 'field "blocks.0.start_ns" must be an integer, found null'),
    ],
)
def test_a_damaged_advice_json_names_the_field(keys: list[Any], value: Any, expected: str) -> None:
    doc = _docs()[1]
    target = doc
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    with pytest.raises(RunDirError, match=re.escape(f"advice.json: {expected}")):
        Advice.from_dict(doc)


def test_another_schema_version_is_named(tmp_path: Path) -> None:
    doc = {**_docs()[1], "schema": 2}
    with pytest.raises(ValueError, match=re.escape("advice.json: schema 2, this hwprof reads 1")):
        Advice.from_dict(doc)
    (tmp_path / "advice.json").write_text(json.dumps({**_docs()[1], "rows": [{"key": "x"}]}))
    advice, error = load_advice(tmp_path)
    assert advice is None and 'field "rows.0.change" is missing' in error and "\n" not in error
