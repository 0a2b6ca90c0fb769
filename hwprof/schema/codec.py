"""Typed records read from and written back to JSON, key for key: the mechanism under the run schema.

A record is a dataclass whose fields are the JSON object's keys (a field's `key` metadata names the key
when it is not a Python name, e.g. "pass"). Reading checks each key the record knows against its field's
type and raises RunDirError naming the file and the field ("collectors.rapl.summary.domains"); a record
kept as a field (or a map of records) is read the same way, with the path of keys growing.

Writing gives back exactly the object that was read: the same keys in the same order, with the values the
fields hold now, and every key the record does not know (a run written by an older or newer hwprof) kept
as it was in `json_extra`. A field set on a record that did not hold its key (a collector filling one in)
is written after the keys that were read, in the order the fields are declared. So `to_json(from_json(d))`
dumps to the same bytes as `d`, which is what keeps run.json, the report and the trace identical.

Every field may be absent (then it holds its default: None, or an empty object for run.json's sections),
unless the record lists it in REQUIRED: runs differ in which keys they hold (a collector that failed early
writes fewer), and a reader handles None, as it did with `.get()`. A field whose type does not admit None
rejects a null in the file.

Why not pydantic or msgspec (issue 49 asked): pydantic 2 (installed) keeps unknown keys with extra="allow" but
writes them after the declared fields (a run.json read and written back changes its bytes: measured,
{"z", "b", "new", "a"} -> {"a", "b", "z", "new"}), and its error is four lines ("1 validation error for M / a /
Input should be a valid integer ... / For further information visit ..."), where hwprof's contract is one line
naming the file and the field's path. msgspec drops or refuses unknown keys; it cannot keep them. The mechanism
here is what both would need around them (order, kept keys, the path in the message) plus a type check per
field; the records themselves are plain dataclasses either way.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from hwprof.schema.bounds import Bound, number_fault
from hwprof.schema.check import RunDirError, found

R = TypeVar("R", bound="Record")
T = TypeVar("T")

JsonObject = dict[str, Any]
"""A JSON object the schema keeps whole, uninterpreted (readers that look inside get a record instead)."""


def json_value(value: Any) -> Any:
    """`value` as a file holds it once written with json.dumps(default=str): tuples become lists, what is not
    JSON its text. A writer reads what it gathered from Python objects through this into its records, so
    the document it keeps is the one a reader of the file gets."""
    return json.loads(json.dumps(value, default=str))


@dataclass(frozen=True)
class Spec:
    """How one field is read: its JSON key, the JSON types it accepts, and a record type to read into."""

    attr: str
    key: str
    types: tuple[type, ...] | None
    """None: any JSON value."""
    expected: str
    record: type[Record] | None = None
    record_map: bool = False
    """The value is an object of records (name -> record), e.g. run.json's passes."""
    record_list: bool = False
    """The value is a list of records, e.g. model.json's layer table."""
    nullable: bool = True
    """The field's type admits None: a null in the file is read as None (else RunDirError)."""
    bound: Bound | None = None
    """The values a number field can hold (its annotation: bounds.NonNegative, Count, Share); every number
    must be finite and within 64 bits whatever its bound."""
    each: Spec | None = None
    """A map of numbers (`dict[str, float]`): how each of its values is read."""


WORDS: dict[type, tuple[tuple[type, ...], str]] = {
    str: ((str,), "a string"),
    int: ((int,), "an integer"),
    float: ((int, float), "a number"),
    bool: ((bool,), "a boolean"),
    dict: ((dict,), "an object"),
    list: ((list,), "a list"),
}


def _bound(hint: Any) -> tuple[Any, Bound | None]:
    """A type without its Annotated bound (bounds.NonNegative -> float, NON_NEGATIVE)."""
    if typing.get_origin(hint) is not typing.Annotated:
        return hint, None
    base, *extras = typing.get_args(hint)
    return base, next((e for e in extras if isinstance(e, Bound)), None)


def _spec(attr: str, key: str, hint: Any) -> Spec:
    args = [a for a in typing.get_args(hint) if a is not type(None)] if _is_union(hint) else [hint]
    nullable = _is_union(hint) and type(None) in typing.get_args(hint)
    if len(args) == 1:
        base, bound = _bound(args[0])
        if bound is not None:
            return dataclasses.replace(_spec(attr, key, base | None if nullable else base), bound=bound)
    if any(a is Any for a in args):
        return Spec(attr, key, None, "any value")
    if len(args) > 1:
        return _union_spec(attr, key, args, nullable)
    kind = args[0]
    origin = typing.get_origin(kind) or kind
    if isinstance(origin, type) and issubclass(origin, Record):
        return Spec(attr, key, (dict,), "an object", origin, nullable=nullable)
    if origin is dict:
        value = typing.get_args(kind)[1] if typing.get_args(kind) else Any
        if isinstance(value, type) and issubclass(value, Record):
            return Spec(attr, key, (dict,), "an object", value, record_map=True, nullable=nullable)
        if _bound(value)[0] in (int, float):
            return Spec(attr, key, (dict,), "an object", nullable=nullable, each=_spec(attr, key, value))
    if origin is list:
        item = typing.get_args(kind)[0] if typing.get_args(kind) else Any
        if isinstance(item, type) and issubclass(item, Record):
            return Spec(attr, key, (list,), "a list", item, record_list=True, nullable=nullable)
    accepted, expected = WORDS[origin]
    return Spec(attr, key, accepted, expected, nullable=nullable)


def _union_spec(attr: str, key: str, members: list[Any], nullable: bool) -> Spec:
    """A field of several plain JSON types (e.g. `str | JsonObject | None`): the value must be one of them.
    A record among the members is kept whole as an object (no record type is read into)."""
    accepted: list[type] = []
    words: list[str] = []
    for member in members:
        member = _bound(member)[0]
        origin = typing.get_origin(member) or member
        if isinstance(origin, type) and issubclass(origin, Record):
            origin = dict
        kinds, word = WORDS[origin]
        accepted += [k for k in kinds if k not in accepted]
        words.append(word)
    expected = ", ".join(words[:-1]) + f" or {words[-1]}"
    return Spec(attr, key, tuple(accepted), expected, nullable=nullable)


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


_SPECS: dict[type, dict[str, Spec]] = {}
_DEFAULTS: dict[type, dict[str, Any]] = {}


def specs(cls: type[Record]) -> dict[str, Spec]:
    """JSON key -> how to read it, for every field of `cls` (from its type hints; worked out once)."""
    if cls in _SPECS:
        return _SPECS[cls]
    hints = typing.get_type_hints(cls, include_extras=True)
    out = _SPECS[cls] = {}
    for f in dataclasses.fields(cls):
        if f.name in ("json_extra", "json_order"):
            continue
        key = f.metadata.get("key", f.name)
        out[key] = _spec(f.name, key, hints[f.name])
    return out


def _check(value: Any, spec: Spec, where: str, name: str) -> None:
    if spec.types is None or (value is None and spec.nullable):
        return
    is_bool = isinstance(value, bool)
    if not isinstance(value, spec.types) or (is_bool and bool not in spec.types):
        raise RunDirError(f'{where}: field "{name}" must be {spec.expected}, found {found(value)}')
    fault = number_fault(value, spec.bound)
    if fault is not None:
        raise RunDirError(f'{where}: field "{name}" must be {fault}, found {found(value)}')
    if spec.each is not None and isinstance(value, dict):
        for inner_key, inner in value.items():
            _check(inner, spec.each, where, f"{name}.{inner_key}")


@dataclass(kw_only=True)
class Record:
    """Base of every typed JSON object in a run directory (see the module's docstring)."""

    REQUIRED: ClassVar[tuple[str, ...]] = ()
    """Keys that must be present (RunDirError naming the field when one is missing)."""

    json_extra: JsonObject = field(default_factory=dict, repr=False, compare=False)
    """Keys this hwprof does not know, kept to be written back unchanged."""
    json_order: tuple[str, ...] = field(default=(), repr=False, compare=False)
    """The keys in the order they were read."""

    @classmethod
    def of(cls: type[R], /, **values: Any) -> R:
        """A record made by its writer (a collector): the keys given are written in the order given, a None
        among them as null; fields set afterwards follow in the order they are declared."""
        key_of = {spec.attr: key for key, spec in specs(cls).items()}
        return cls(**values, json_order=tuple(key_of[attr] for attr in values))

    def update(self, **values: Any) -> None:
        """Fields set by the record's writer after it was made, written in the order given after the keys
        already held, a None among them as null (a field merely assigned is written only when not None)."""
        key_of = {spec.attr: key for key, spec in specs(type(self)).items()}
        for attr, value in values.items():
            setattr(self, attr, value)
        self.json_order += tuple(key_of[attr] for attr in values if key_of[attr] not in self.json_order)

    @classmethod
    def from_json(cls: type[R], doc: Any, where: str, prefix: str = "") -> R:
        """Read and check `doc` (the object at `prefix` in the file `where`); RunDirError (one line) if damaged."""
        if not isinstance(doc, dict):
            raise RunDirError(f'{where}: field "{prefix.rstrip(".") or "(top)"}" must be an object, found {found(doc)}')
        known = specs(cls)
        for key in cls.REQUIRED:
            if key not in doc:
                raise RunDirError(f'{where}: field "{prefix}{key}" is missing (expected {known[key].expected})')
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in doc.items():
            spec = known.get(key)
            if spec is None:
                extra[key] = value
                continue
            _check(value, spec, where, prefix + key)
            values[spec.attr] = cls._read_value(value, spec, where, f"{prefix}{key}.")
        return cls(**values, json_extra=extra, json_order=tuple(doc))

    @staticmethod
    def _read_value(value: Any, spec: Spec, where: str, prefix: str) -> Any:
        if value is None or spec.record is None:
            return value
        if spec.record_list:
            return [spec.record.from_json(v, where, f"{prefix}{i}.") for i, v in enumerate(value)]
        if not spec.record_map:
            return spec.record.from_json(value, where, prefix)
        return {k: spec.record.from_json(v, where, f"{prefix}{k}.") for k, v in value.items()}

    def __bool__(self) -> bool:
        """False for an empty record (read from {}, or made with nothing set), as for the JSON object it stands for."""
        return bool(self.to_json())

    def to_json(self) -> dict[str, Any]:
        """The JSON object: the keys read, in their order, then fields set since (see the module's docstring)."""
        known = specs(type(self))
        order = list(self.json_order)
        seen = set(order)
        defaults = _defaults(type(self))
        order += [k for k, s in known.items() if k not in seen and getattr(self, s.attr) != defaults[s.attr]]
        order += [k for k in self.json_extra if k not in seen and k not in known]
        out: dict[str, Any] = {}
        for key in order:
            spec = known.get(key)
            if spec is None:
                out[key] = self.json_extra[key]
            else:
                out[key] = _write_value(getattr(self, spec.attr), spec)
        return out

    def unknown_keys(self, prefix: str = "") -> list[str]:
        """Every key below this record that no field describes (the schema test keeps this empty)."""
        out = [prefix + k for k in self.json_extra]
        for key, spec in specs(type(self)).items():
            value = getattr(self, spec.attr)
            if isinstance(value, Record):
                out += value.unknown_keys(f"{prefix}{key}.")
            elif spec.record_map and value:
                for name, rec in value.items():
                    out += rec.unknown_keys(f"{prefix}{key}.{name}.")
            elif spec.record_list and value:
                for i, rec in enumerate(value):
                    out += rec.unknown_keys(f"{prefix}{key}.{i}.")
        return out


def _defaults(cls: type[Record]) -> dict[str, Any]:
    """Field -> its default value: a field still at its default was not set, and is not written."""
    if cls in _DEFAULTS:
        return _DEFAULTS[cls]
    out: dict[str, Any] = {}
    _DEFAULTS[cls] = out
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def _write_value(value: Any, spec: Spec) -> Any:
    if isinstance(value, Record):
        return value.to_json()
    if spec.record_map and isinstance(value, dict):
        return {k: v.to_json() if isinstance(v, Record) else v for k, v in value.items()}
    if spec.record_list and isinstance(value, list):
        return [v.to_json() if isinstance(v, Record) else v for v in value]
    return value


def need(value: T | None) -> T:
    """A figure a collector always writes together with the one a reader tested for (e.g. gpu_kineto's
    gpu_busy_us with its gpu_idle_share): its absence is a damaged file, as a KeyError was before."""
    if value is None:
        raise RunDirError("run.json: a summary figure written with the others of its group is missing")
    return value
