"""Normalized records: what collectors leave beside their raw artifacts, on the run's one clock.

Every timestamp is CLOCK_MONOTONIC nanoseconds of the collecting host. A collector that used a
foreign clock converts it before writing and records the alignment error in its summary.

Per collector, in its pass folder (`passes/<pass>/`):
- `<collector>.records.jsonl`: spans, counter samples, callstack samples and thread names, one JSON
  object a line, each with a "kind" of "span", "counter", "sample" or "thread". Renderers (the
  Perfetto trace) read these.
- `<collector>.metrics.json`: per-layer and per-stage metric tables, with units and, for any
  metric that is an estimate, its method. Analysis joins these onto the layer table.
Stage, layer and iteration spans themselves come from the pass's `markers.jsonl` (markers.py).

Versions: these files carry no version of their own; they belong to their run directory, whose run.json
`schema_version` covers every file in it (RunData refuses a run of another version at load, in one line).
Reading checks them: a damaged metrics table, record or marker line raises RunDirError naming the file and
the field (or file:line).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hwprof.core import jsonfast
from hwprof.core.atomic import atomic_write_bytes, atomic_write_text, checked_append
from hwprof.schema.bounds import LARGEST, NON_NEGATIVE, SHARE, Bound, number_fault


@dataclass(slots=True)
class Span:
    name: str
    ts_ns: int
    dur_ns: int
    track: str
    """A thread ("thread:<tid>") or a named track ("py-spy", "oneDNN")."""
    category: str = ""
    tid: int | None = None
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class CounterSample:
    track: str
    """e.g. "CPI", "RSS", "package-0 W"."""
    ts_ns: int
    value: float
    unit: str = ""


@dataclass(slots=True)
class StackSample:
    """One sampled callstack of one thread at one instant (a CPU sample): never a span, so that
    drawing it and charging it to a layer use the same instant."""

    tid: int
    ts_ns: int
    frames: list[tuple[str, str]]
    """(function, library) of each frame, root first; the last is the code the sample ran."""
    cpu: int | None = None
    period: int | None = None
    """The sampling event's count since the thread's previous sample, as perf reports it (ns for
    cpu-clock, cycles for cycles); None in records written before it was kept."""


@dataclass(slots=True)
class ThreadName:
    tid: int
    name: str


Record = Span | CounterSample | StackSample | ThreadName
_KINDS: dict[str, type[Span] | type[CounterSample] | type[StackSample] | type[ThreadName]] = {
    "span": Span,
    "counter": CounterSample,
    "sample": StackSample,
    "thread": ThreadName,
}
_KIND_OF = {cls: kind for kind, cls in _KINDS.items()}
_KIND_TAIL = {cls: f',"kind":"{kind}"}}\n'.encode() for cls, kind in _KIND_OF.items()}
"""What closes a record's line: its kind, after its fields."""


def records_path(pass_dir: Path, collector: str) -> Path:
    return pass_dir / f"{collector}.records.jsonl"


def metrics_path(pass_dir: Path, collector: str) -> Path:
    return pass_dir / f"{collector}.metrics.json"


def write_records(path: Path, records: Iterable[Record], append: bool = False) -> int:
    """Records as JSON lines: a new file atomically, or appended (a stream that grows during a pass) with
    a failed append cut back to the last whole line (hwprof.core.atomic.checked_append)."""
    # each record's fields as they are, then its kind (dataclasses.asdict's deep copy took 1.2 s of the trace
    # pass's close at yolov7 640 with 4 iterations; json's encoder of the fields' dict 1.1 s for yolov7 320's
    # 473,000 torch_memory samples, orjson 0.4 s)
    lines = [jsonfast.dumps(record)[:-1] + _KIND_TAIL[type(record)] for record in records]
    if not append:
        atomic_write_bytes(path, b"".join(lines))
        return len(lines)
    with checked_append(path), open(path, "ab") as out:
        out.write(b"".join(lines))
    return len(lines)


_RECORD_BOUNDS: dict[str, dict[str, Bound | None]] = {
    "span": {"ts_ns": NON_NEGATIVE, "dur_ns": NON_NEGATIVE, "tid": None},
    "counter": {"ts_ns": NON_NEGATIVE, "value": None},
    "sample": {"ts_ns": NON_NEGATIVE, "tid": None, "cpu": NON_NEGATIVE, "period": NON_NEGATIVE},
    "thread": {"tid": None},
}
"""Kind -> its number fields and what they can be beyond finite (a counter's value may be any finite number)."""


def record_fault(row: Any) -> str | None:
    """What is wrong with a number of one records.jsonl row (`field "dur_ns" must be ..., found ...`), None when
    each is what it can be: a span of negative duration, a NaN counter sample are damage, never drawn."""
    if not isinstance(row, dict):
        return None
    for key, bound in _RECORD_BOUNDS.get(row.get("kind", ""), {}).items():
        value = row.get(key)
        if _plainly_within(value, bound):
            continue
        fault = number_fault(value, bound)
        if fault is not None:
            from hwprof.schema.check import found

            return f'field "{key}" must be {fault}, found {found(row[key])}'
    return None


def _plainly_within(value: Any, bound: Bound | None) -> bool:
    """number_fault's verdict on the common cases, without its calls (yolov7 640's trace: 415,000 rows; 320's,
    720,000): an int or a float (not a bool), finite and below 2**64 (a NaN fails the comparison), within its bound."""
    kind = type(value)
    if kind is not int and kind is not float:
        return False
    return -LARGEST < value < LARGEST and (bound is None or (bound is NON_NEGATIVE and value >= 0))


def read_records(path: Path, containing: str | None = None, window: tuple[int, int] | None = None) -> Iterator[Record]:
    """The records of a records.jsonl up to a torn last line (a killed pass); RunDirError (file:line) for a
    corrupt line elsewhere, or a number that cannot be (record_fault). `containing`: only the lines holding this
    text (one counter track's name), `window`: only those stamped inside it and the last before it (read_jsonl)."""
    from hwprof.schema.check import RunDirError, read_jsonl

    for number, row in read_jsonl(path, containing, window).rows:
        fault = record_fault(row)
        if fault is not None:
            raise RunDirError(f"{path}:{number}: {fault}")
        cls = _KINDS.get(row.pop("kind", "")) if isinstance(row, dict) else None
        if cls is None:
            continue  # a kind this hwprof does not know (a newer writer): skipped, as the trace skips it
        try:
            yield cls(**row)
        except TypeError as exc:
            raise RunDirError(f"{path}:{number}: not a {_KIND_OF[cls]} record ({exc})") from exc


@dataclass
class MetricTables:
    """Per-layer and per-stage metrics of one collector.

    layers: qualified layer name ("model.7") -> metric -> value; stages: stage name -> metric -> value.
    units: metric -> unit. methods: metric -> how it was obtained, for anything that is not a direct
    measurement (e.g. "estimate: LLC misses x 64 B line"). A metric that was not measured is absent.
    """

    layers: dict[str, dict[str, float]] = field(default_factory=dict)
    stages: dict[str, dict[str, float]] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    methods: dict[str, str] = field(default_factory=dict)

    def stage(self, name: str) -> dict[str, float]:
        """Stage `name`'s metrics (metric -> value); none where the collector did not measure the stage."""
        return self.stages.get(name, {})

    def save(self, path: Path) -> None:
        atomic_write_text(path, json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> MetricTables:
        """A metrics.json, checked: RunDirError (one line naming the file and the field) when it is damaged."""
        from hwprof.schema.check import RunDirError, read_json_object

        doc = read_json_object(path)
        unknown = sorted(set(doc) - set(_TABLE_SECTIONS))
        if unknown:
            raise RunDirError(
                f'{path}: field "{unknown[0]}" is not a metric-table section ({", ".join(_TABLE_SECTIONS)})'
            )
        for section, (depth, kinds, expected) in _TABLE_SECTIONS.items():
            _check_map(doc.get(section, {}), depth, kinds, expected, path, section)
        return cls(**doc)


_NUMBER = (int, float)
_TABLE_SECTIONS: dict[str, tuple[int, tuple[type, ...], str]] = {
    "layers": (2, _NUMBER, "a number"),
    "stages": (2, _NUMBER, "a number"),
    "units": (1, (str,), "a string"),
    "methods": (1, (str,), "a string"),
}
"""Section -> (levels of objects above the values, the values' JSON types, their type in words)."""


def _check_map(
    value: Any, depth: int, kinds: tuple[type, ...], expected: str, path: Path, where: str, key: str = ""
) -> None:
    from hwprof.schema.check import RunDirError, found

    if depth == 0:
        if not isinstance(value, kinds) or isinstance(value, bool):
            raise RunDirError(f'{path}: field "{where}" must be {expected}, found {found(value)}')
        fault = number_fault(value, metric_bound(key))
        if fault is not None:
            raise RunDirError(f'{path}: field "{where}" must be {fault}, found {found(value)}')
        return
    if not isinstance(value, dict):
        raise RunDirError(f'{path}: field "{where}" must be an object, found {found(value)}')
    for inner_key, inner in value.items():
        _check_map(inner, depth - 1, kinds, expected, path, f"{where}.{inner_key}", inner_key)


_SHARE_SUFFIX = "_share"
_NON_NEGATIVE_SUFFIXES = (
    "_ms",
    "_us",
    "_ns",
    "_s",
    "_bytes",
    "_J",
    "flops",
    "params",
    "aten_ops",
    "kernels",
    "samples",
)
_NON_NEGATIVE_NAMES = ("task-clock", "wall-time", "page-faults", "context-switches", "cpu-migrations", "visits")
_SIGNED = ("gap.", "growth", "delta")
"""Metrics that are differences (the forward less its layers, a change of RSS): a real run holds small negative
values there."""


def metric_bound(name: str) -> Bound | None:
    """What a metric of a metrics.json can be, by its name (collectors name them by what they hold): a share within
    0-1, a duration, size or count not negative; every metric, whatever its name, finite (bounds.number_fault)."""
    if any(mark in name for mark in _SIGNED):
        return None
    if name.endswith(_SHARE_SUFFIX):
        return SHARE
    if name.endswith(_NON_NEGATIVE_SUFFIXES) or name in _NON_NEGATIVE_NAMES:
        return NON_NEGATIVE
    return None


NODES_FILE = "runtime_nodes.json"
RUNTIME_FILE = "runtime.json"


@dataclass
class NodeRow:
    """One executed runtime node, aggregated over the measured iterations of a pass."""

    name: str
    op: str
    kernel: str
    provider: str
    precision: str
    layers: list[str]
    """Top-level layers ("model.7") its original nodes belong to; empty for nodes of no layer."""
    children: list[str] = field(default_factory=list)
    """Depth-2 names ("model.7.cv1") where the node names carry them."""
    inserted: bool = False
    """Added by the runtime (layout reorders), charged to the layer that runs next."""
    median_us: float = 0.0
    calls: int = 0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NodeRow:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in known})
