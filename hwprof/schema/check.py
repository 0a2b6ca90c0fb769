"""What the readers of a run directory rely on in its files, checked when a file is read.

A damaged or half-written file (a run.json of `[]`, a `"passes": null`, a markers.jsonl cut mid-line by a
killed pass) must give the user one line naming the file, the field or line, and what was expected, never a
traceback deep in the analysis and never a figure of zero. The checks live here, at the bottom layer, so
that every reader (run directory, sweep, trace, the collectors reading their own pass's markers) uses the
same ones.

run.json's shape is described once, as typed fields (RUN_FIELDS, PASS_FIELDS, COLLECTOR_FIELDS) and read
into RunHeader: the seed of a typed run schema. Readers still reach the rest of run.json as a dict, but
only after the parts they index into have been checked to have the type they assume.

JSONL streams (markers.jsonl, <collector>.records.jsonl) are read up to their last whole line: a pass killed
while writing leaves a torn last line, which is dropped with a warning naming the file and line; a line
that does not parse in the middle of a file is corruption and an error naming file:line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


OBJECT = (dict,)
STRING = (str,)
INTEGER = (int,)
NUMBER = (int, float)

RUN_FIELDS: tuple[Field, ...] = (
    Field("schema_version", INTEGER, "an integer", required=True),
    Field("status", STRING, "a string", required=True),
    Field("run_id", STRING, "a string"),
    Field("config", OBJECT, "an object"),
    Field("host", OBJECT, "an object"),
    Field("model", OBJECT, "an object"),
    Field("passes", OBJECT, "an object"),
    Field("collectors", OBJECT, "an object"),
    Field("stages", OBJECT, "an object"),
    Field("peaks", OBJECT, "an object", nullable=True),
    Field("runtime", OBJECT, "an object", nullable=True),
    Field("fps", NUMBER, "a number", nullable=True),
)
CONFIG_FIELDS: tuple[Field, ...] = (
    Field("model", STRING, "a string"),
    Field("imgsz", INTEGER, "an integer"),
    Field("batch", INTEGER, "an integer"),
    Field("threads", INTEGER, "an integer", nullable=True),
    Field("device", STRING, "a string", nullable=True),
)
PASS_FIELDS: tuple[Field, ...] = (
    Field("status", STRING, "a string", required=True),
    Field("error", STRING, "a string", nullable=True),
    Field("collectors", (list,), "a list"),
)
COLLECTOR_FIELDS: tuple[Field, ...] = (
    Field("status", STRING, "a string", required=True),
    Field("summary", OBJECT, "an object", nullable=True),
    Field("pass", STRING, "a string", nullable=True),
)


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


def read_json(path: Path) -> Any:
    """A JSON file's value; RunDirError (one line) when it is missing, unreadable or not JSON."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise RunDirError(f"{path}: file is missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{path}: cannot be read: {exc}") from exc
    try:
        return json.loads(text)
    except ValueError as exc:
        raise RunDirError(f"{path}: not valid JSON: {exc}") from exc


def read_json_object(path: Path) -> dict[str, Any]:
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise RunDirError(f"{path}: must be a JSON object, found {found(doc)}")
    return doc


@dataclass(frozen=True)
class PassEntry:
    """One pass as run.json records it."""

    name: str
    status: str
    error: str = ""
    collectors: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        """False for a pass that was stopped (Ctrl-C, a lost session) before it finished."""
        return self.status not in UNUSABLE_PASS_STATUSES


@dataclass(frozen=True)
class RunHeader:
    """The checked, typed part of run.json: what every reader of a run directory relies on."""

    schema_version: int
    status: str
    run_id: str
    passes: dict[str, PassEntry] = field(default_factory=dict)
    collectors: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def parse(cls, doc: Any, path: Path) -> RunHeader:
        """Check run.json's value `doc` (read from `path`) and return its typed header; RunDirError if damaged."""
        if not isinstance(doc, dict):
            raise RunDirError(f"{path}: must be a JSON object, found {found(doc)}")
        check_fields(doc, RUN_FIELDS[:1], str(path))
        version = doc["schema_version"]
        if version != SCHEMA_VERSION:
            raise RunDirError(f"{path}: has schema_version {version}; this hwprof reads {SCHEMA_VERSION}")
        check_fields(doc, RUN_FIELDS, str(path))
        check_fields(doc.get("config") or {}, CONFIG_FIELDS, str(path), "config.")
        passes: dict[str, PassEntry] = {}
        for name, entry in (doc.get("passes") or {}).items():
            if not isinstance(entry, dict):
                raise RunDirError(f'{path}: field "passes.{name}" must be an object, found {found(entry)}')
            check_fields(entry, PASS_FIELDS, str(path), f"passes.{name}.")
            names = entry.get("collectors") or []
            passes[name] = PassEntry(name, entry["status"], str(entry.get("error") or ""), tuple(map(str, names)))
        collectors: dict[str, dict[str, Any]] = {}
        for name, entry in (doc.get("collectors") or {}).items():
            if not isinstance(entry, dict):
                raise RunDirError(f'{path}: field "collectors.{name}" must be an object, found {found(entry)}')
            check_fields(entry, COLLECTOR_FIELDS, str(path), f"collectors.{name}.")
            collectors[name] = entry
        for name, stage in (doc.get("stages") or {}).items():
            if not isinstance(stage, dict):
                raise RunDirError(f'{path}: field "stages.{name}" must be an object, found {found(stage)}')
        return cls(version, doc["status"], str(doc.get("run_id") or Path(path).parent.name), passes, collectors)


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


def read_jsonl(path: Path) -> JsonLines:
    """Every line's JSON value; a torn last line (no newline after it) is dropped and recorded, a line that
    does not parse anywhere else raises RunDirError naming file:line."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{path}: cannot be read: {exc}") from exc
    out = JsonLines(Path(path))
    lines = text.split("\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.rows.append((i + 1, json.loads(line)))
        except ValueError as exc:
            if i == last and not text.endswith("\n"):
                out.torn_line = i + 1
                break
            raise RunDirError(f"{path}:{i + 1}: not a JSON line ({exc})") from exc
    return out
