"""What the readers of a run directory rely on in its files, checked when a file is read.

A damaged or half-written file (a run.json of `[]`, a `"passes": null`, a markers.jsonl cut mid-line by a
killed pass) must give the user one line naming the file, the field or line, and what was expected, never a
traceback deep in the analysis and never a figure of zero. The checks live here, at the bottom layer, so
that every reader (run directory, sweep, trace, the collectors reading their own pass's markers) uses the
same ones.

run.json itself is read as a typed document (hwprof.schema.run.RunDoc, on codec.Record); Field and
check_fields remain for the small files that are not records yet (the sweep's plan and rows, a ray job).

JSONL streams (markers.jsonl, <collector>.records.jsonl) are read up to their last whole line: a pass killed
while writing leaves a torn last line, which is dropped with a warning naming the file and line; a line
that does not parse in the middle of a file is corruption and an error naming file:line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwprof.core import jsonfast

SCHEMA_VERSION = 1
UNUSABLE_PASS_STATUSES = ("interrupted", "running")
"""A pass in one of these states stopped before it finished: its figures are not reported."""


class RunDirError(ValueError):
    """Not a readable run directory, or a damaged file in one: a one-line message for the user."""


@dataclass(frozen=True)
class Field:
    """One field a reader relies on: its name, the JSON types it may have, and whether it must be there."""

    name: str
    types: tuple[type, ...]
    expected: str
    """The types in words, for the error: "an integer", "an object"."""
    required: bool = False
    nullable: bool = False


def found(value: Any) -> str:
    """A JSON value's type in words, with the value itself when it is short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({json.dumps(value)})"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an empty list" if not value else "a list"
    text = json.dumps(value)
    text = text if len(text) <= 40 else text[:37] + "..."
    return f"{'a string' if isinstance(value, str) else 'a number'} ({text})"


def check_fields(doc: dict[str, Any], fields: Sequence[Field], where: str, prefix: str = "") -> None:
    """Raise RunDirError naming `where` and the first field of `fields` that is missing or of the wrong type."""
    for f in fields:
        name = f"{prefix}{f.name}"
        if f.name not in doc:
            if f.required:
                raise RunDirError(f'{where}: field "{name}" is missing (expected {f.expected})')
            continue
        value = doc[f.name]
        if value is None and f.nullable:
            continue
        if isinstance(value, bool) or not isinstance(value, f.types):
            raise RunDirError(f'{where}: field "{name}" must be {f.expected}, found {found(value)}')


MAX_JSON_BYTES = 256 << 20
"""The largest JSON document of a run that is read: hwprof's own are kilobytes to a few megabytes (run.json keeps a
config file of at most 1 MiB); a larger one is damage, refused before it is read into memory."""


def read_json(path: Path) -> Any:
    """A JSON file's value; RunDirError (one line) when it is missing, unreadable, not JSON, larger than
    MAX_JSON_BYTES or nested deeper than the parser goes (a RecursionError, not a traceback)."""
    try:
        with Path(path).open("rb") as file:
            data = file.read(MAX_JSON_BYTES + 1)
    except FileNotFoundError:
        raise RunDirError(f"{path}: file is missing") from None
    except OSError as exc:
        raise RunDirError(f"{path}: cannot be read: {exc}") from exc
    if len(data) > MAX_JSON_BYTES:
        raise RunDirError(f"{path}: larger than a run's JSON file can be ({MAX_JSON_BYTES >> 20} MiB at most)")
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RunDirError(f"{path}: cannot be read: {exc}") from exc
    except ValueError as exc:
        raise RunDirError(f"{path}: not valid JSON: {exc}") from exc
    except RecursionError:
        raise RunDirError(f"{path}: not valid JSON: nested deeper than a run's file can be") from None


def read_json_object(path: Path) -> dict[str, Any]:
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise RunDirError(f"{path}: must be a JSON object, found {found(doc)}")
    return doc


@dataclass
class JsonLines:
    """The values of a JSONL file, each with its line number, up to its last whole line."""

    path: Path
    rows: list[tuple[int, Any]] = field(default_factory=list)
    torn_line: int | None = None
    """The line number of a torn last line that was dropped (a pass killed while writing)."""

    def warning(self) -> str | None:
        if self.torn_line is None:
            return None
        return (
            f"{self.path}:{self.torn_line}: last line is cut short (the pass was stopped while writing it); "
            f"read up to line {self.torn_line - 1}"
        )


def read_jsonl(path: Path, containing: str | None = None, window: tuple[int, int] | None = None) -> JsonLines:
    """Every line's JSON value; a torn last line (no newline after it) is dropped and recorded, a line that
    does not parse anywhere else raises RunDirError naming file:line. `containing`: only the lines that hold this
    text are parsed (a reader after one track of a large file: the others are not even decoded); `window` (begin,
    end ns, with `containing`): of those, only the ones whose ts_ns lies inside it and the latest one before it."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{path}: cannot be read: {exc}") from exc
    out = JsonLines(Path(path))
    lines = text.split("\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    chosen = _in_window(lines, containing, *window) if window is not None and containing is not None else None
    for i, line in enumerate(lines):
        if not line.strip() or (containing is not None and containing not in line):
            continue
        if chosen is not None and i not in chosen:
            continue
        try:
            out.rows.append((i + 1, jsonfast.loads(line)))
        except ValueError as exc:
            if i == last and not text.endswith("\n"):
                out.torn_line = i + 1
                break
            raise RunDirError(f"{path}:{i + 1}: not a JSON line ({exc})") from exc
    return out


def _in_window(lines: list[str], containing: str, begin: int, end: int) -> set[int]:
    """The indexes of the lines holding `containing` whose ts_ns (read by pattern, unparsed) lies in [begin, end],
    and of the latest one before begin; a line without a ts_ns is kept (its parse then says what is wrong)."""
    keep: set[int] = set()
    before, before_ts = None, -1
    for i, line in enumerate(lines):
        if containing not in line:
            continue
        found = _TS.search(line)
        ts = int(found.group(1)) if found else None
        if ts is None or begin <= ts <= end:
            keep.add(i)
        elif before_ts < ts < begin:
            before, before_ts = i, ts
    if before is not None:
        keep.add(before)
    return keep


_TS = re.compile(r'"ts_ns":\s*(\d+)')
