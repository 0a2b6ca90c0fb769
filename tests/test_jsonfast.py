"""hwprof.core.jsonfast: orjson's speed with json's values, where a run's large files are read and written."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hwprof.core import jsonfast
from hwprof.schema.records import CounterSample, Span, StackSample, read_records, write_records


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1, "b": [1.5, -0.0, 1e-05, 1e16, 0.1, 1 / 3], "c": None, "d": "x"},
        {"name": "conv Ω", "tid": 7},  # beyond ASCII: json's escape
        {1: "an int key"},  # json writes it as "1"; orjson refuses it
        [2**70, float("nan"), float("inf")],  # beyond 64 bits, not finite: json's spelling
    ],
    ids=["plain", "non-ascii", "int-key", "big-and-non-finite"],
)
def test_what_is_written_reads_back_as_jsons_own_text_does(value: object) -> None:
    out = jsonfast.dumps(value)
    assert out.isascii()
    back, expected = json.loads(out), json.loads(json.dumps(value, separators=(",", ":")))
    assert json.dumps(back) == json.dumps(expected)  # NaN compares unequal to itself: compared as text


def test_what_json_reads_beyond_orjson_is_read_as_json_reads_it() -> None:
    assert math.isnan(jsonfast.loads("NaN")) and jsonfast.loads(b"Infinity") == math.inf
    assert jsonfast.loads('{"a": "\\ud800"}') == {"a": "\ud800"}  # a lone surrogate: orjson refuses it
    assert jsonfast.loads(b"1e400") == math.inf
    with pytest.raises(ValueError, match="Expecting"):  # json's own error, with json's words
        jsonfast.loads('{"a": ')


def test_records_are_written_with_their_fields_in_order_then_their_kind(tmp_path: Path) -> None:
    records = [
        Span("aten::conv2d", 10, 5, "thread:1", "aten", 1, {"self_us": 2.5, "input_dims": [[1, 3, 8, 8]]}),
        Span("oneDNN", 11, 2, "oneDNN"),  # its tid None: json's spelling of null
        CounterSample("torch CPU allocated (bytes)", 12, 1228800.0, "B"),
        StackSample(3, 13, [("forward", "model.py"), ("conv é", "libtorch.so")], 0, 1000),
    ]
    path = tmp_path / "x.records.jsonl"
    assert write_records(path, records) == 4
    lines = path.read_text().splitlines()
    assert lines[0] == (
        '{"name":"aten::conv2d","ts_ns":10,"dur_ns":5,"track":"thread:1","category":"aten","tid":1,'
        '"args":{"self_us":2.5,"input_dims":[[1,3,8,8]]},"kind":"span"}'
    )
    assert '"tid":null' in lines[1] and lines[3].isascii() and "\\u00e9" in lines[3]
    back = list(read_records(path))
    assert [type(r) for r in back] == [Span, Span, CounterSample, StackSample]
    assert back[2] == records[2] and back[0] == records[0]
    assert [tuple(f) for f in back[3].frames] == records[3].frames
    write_records(path, [CounterSample("RSS", 14, 2.0)], append=True)
    assert [r.ts_ns for r in read_records(path)] == [10, 11, 12, 13, 14]
