"""JSON through orjson for a run's large files (records.jsonl, Kineto's trace), with exactly the values the
standard library's json gives.

Why: a pass's records are hundreds of thousands of lines (yolov7 at 320, the trace pass: 287,000 Kineto events; the
layers pass: 473,000 torch_memory samples), and json's encoder and decoder took seconds of the passes' close and of
the trace's build (2-vCPU EPYC: 1.1 s to write the 473,000 samples, 0.24 s with orjson; 1.7 s to read them as
lines, 0.2 s).

Where orjson and json differ, json decides: what orjson will not read (NaN, Infinity, a lone surrogate, a number
out of a double's range) is read by json, and what orjson would write otherwise (a non-finite float, which it
writes as null; text beyond ASCII, which json escapes; an integer beyond 64 bits, a key that is not a string, a
type it does not know) is written by json. One difference is kept: an integer of 2**64 or more is read as the
float nearest it (json: the integer). No figure of a run is that large; the damage checks (hwprof.schema.bounds)
refuse either as "a number below 2**64". Looking for such integers first (a regular expression over the text)
took as long as orjson's whole reading.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

try:
    import orjson
except ImportError:  # hwprof imported without its dependencies (a Ray node's check of the shipped tree): json's own
    _ORJSON: Any = None
else:
    _ORJSON = orjson

_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def loads(data: str | bytes) -> Any:
    """The value of one JSON document, as json.loads reads it but for an integer of 2**64 or more (a float);
    json's ValueError (a JSONDecodeError) when it is not JSON."""
    if _ORJSON is None:
        return json.loads(data)
    try:
        return _ORJSON.loads(data)
    except _ORJSON.JSONDecodeError:
        return json.loads(data)  # what json accepts beyond orjson, or json's own error


def dumps(value: Any) -> bytes:
    """Compact JSON, ASCII only, of a value or a dataclass (its fields, in order): json.dumps(value,
    separators=(",", ":")) but for the spelling of some floats (orjson's 0.00001 is json's 1e-05: the same float
    read back)."""
    out: bytes | None = None
    if _ORJSON is not None:
        with contextlib.suppress(TypeError):  # a type or an integer orjson refuses: json's encoding, or its error
            out = _ORJSON.dumps(value)
    if out is None or b"null" in out or not out.isascii():
        return _ENCODE(_plain(value)).encode("ascii")
    return out


def _plain(value: Any) -> Any:
    """A slots dataclass as the dict of its fields (json cannot encode one); anything else as it is."""
    names = getattr(type(value), "__dataclass_fields__", None)
    return {name: getattr(value, name) for name in names} if names is not None else value
