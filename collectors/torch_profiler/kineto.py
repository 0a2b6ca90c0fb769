"""Kineto's chrome trace (written by export_chrome_trace) read: its complete op and range events; and why
export_chrome_trace wrote none (`export_failure`).

Kineto writes `baseTimeNanoseconds + ts_us * 1000` on the wall clock (its TSC clock converted to
Unix time); the events are kept on that clock in ns (see clock.py for the conversion).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from hwprof.core.atomic import NEARLY_FULL, DiskFullError, free_bytes, size_limit_cut

KinetoArgs = TypedDict(
    "KinetoArgs",
    {"External id": int, "Input Dims": list[list[int]], "Module Hierarchy": str},
    total=False,
)
"""The args of an event that hwprof reads (its others, e.g. "Sequence number", are kept as they are): the op's
id shared with its FunctionEvent (flops), its inputs' shapes (record_shapes) and the module hierarchy
(with_modules)."""


@dataclass
class KEvent:
    """One complete ("X") Kineto event, on Kineto's wall clock in ns."""

    name: str
    cat: str
    tid: int
    ts: int
    dur: int
    args: KinetoArgs

    @property
    def end(self) -> int:
        return self.ts + self.dur


@dataclass
class KinetoTrace:
    base_ns: int
    events: list[KEvent]


def _open_text(path: Path) -> Any:
    return gzip.open(path, "rt") if path.suffix == ".gz" else open(path)


def load_kineto(path: Path) -> KinetoTrace:
    """The complete events of a chrome trace written by export_chrome_trace (plain or .gz)."""
    with _open_text(path) as handle:
        data = json.load(handle)
    if "baseTimeNanoseconds" not in data:
        raise ValueError(f"{path}: no baseTimeNanoseconds: not a Kineto chrome trace")
    base = int(data["baseTimeNanoseconds"])
    events = []
    for raw in data.get("traceEvents", []):
        if raw.get("ph") != "X" or raw.get("cat") not in ("cpu_op", "user_annotation"):
            continue
        events.append(
            KEvent(
                name=raw["name"],
                cat=raw["cat"],
                tid=int(raw["tid"]),
                ts=base + round(float(raw["ts"]) * 1000),
                dur=round(float(raw.get("dur", 0)) * 1000),
                args=raw.get("args", {}),
            )
        )
    events.sort(key=lambda e: (e.tid, e.ts, -e.dur))
    return KinetoTrace(base, events)


def export_failure(trace_path: Path, what: str = "Kineto's trace") -> Exception:
    """Why export_chrome_trace left no `trace_path`, as the exception to raise. Kineto writes <trace>.tmp and
    renames it; a failed write leaves the partial .tmp and only a log line. The partial is removed here; one
    the file-size limit cut says so (RuntimeError naming the limit), a disk left (nearly) full by it is a
    DiskFullError, anything else a RuntimeError pointing at the worker log."""
    partial = trace_path.with_name(trace_path.name + ".tmp")
    cut = size_limit_cut(partial, what)
    free = free_bytes(trace_path.parent)
    had_partial = partial.exists()
    partial.unlink(missing_ok=True)
    if cut:
        return RuntimeError(cut)
    if had_partial and free is not None and free < NEARLY_FULL:
        return DiskFullError(trace_path)
    return RuntimeError(f"Kineto did not write {trace_path} (see the worker log)")
