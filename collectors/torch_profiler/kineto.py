"""Kineto's chrome trace (written by export_chrome_trace) read: its complete op and range events; and why
its export made whole-or-nothing (`export_trace`), and why it wrote none (`export_failure`).

Kineto writes `baseTimeNanoseconds + ts_us * 1000` on the wall clock (its TSC clock converted to
Unix time); the events are kept on that clock in ns (see clock.py for the conversion).
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from hwprof.core import jsonfast
from hwprof.core.atomic import NEARLY_FULL, DiskFullError, atomic_path, free_bytes, size_limit_cut

KinetoArgs = TypedDict(
    "KinetoArgs",
    {"External id": int, "Input Dims": list[list[int]], "Module Hierarchy": str},
    total=False,
)
"""The args of an event that hwprof reads (its others, e.g. "Sequence number", are kept as they are): the op's
id shared with its FunctionEvent (flops), its inputs' shapes (record_shapes) and the module hierarchy
(with_modules)."""


@dataclass(slots=True)
class KEvent:
    """One complete ("X") Kineto event, on Kineto's wall clock in ns (slots: ~90,000 of them a trace pass at
    yolov7 640)."""

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


def load_kineto(path: Path) -> KinetoTrace:
    """The complete events of a chrome trace written by export_chrome_trace (plain or .gz)."""
    data = jsonfast.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
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


def export_trace(prof: Any, path: Path, what: str = "Kineto's trace") -> None:
    """Write `prof`'s chrome trace to `path`, whole or not at all. Kineto writes <given>.tmp and renames it: given
    atomic_path's temporary (which names the writer's pid), its own .tmp names the pid too, so a worker killed
    mid-export (a second stop signal) leaves a file that remove_orphaned_temporaries removes. Before, the plain
    `<trace>.tmp` named no writer and stayed in the run. A failed export raises `export_failure`'s exception."""
    with atomic_path(path) as staging:
        prof.export_chrome_trace(str(staging))
        if not staging.is_file():  # Kineto logs a failed write and returns normally
            raise export_failure(staging, path, what)


def export_failure(written: Path, path: Path, what: str = "Kineto's trace") -> Exception:
    """Why export_chrome_trace left no `written` (the staging name of `path`), as the exception to raise. A
    failed write leaves Kineto's partial <written>.tmp and only a log line. The partial is removed here; one the
    file-size limit cut says so (RuntimeError naming the limit), a disk left (nearly) full by it is a
    DiskFullError, anything else a RuntimeError pointing at the worker log."""
    partial = written.with_name(written.name + ".tmp")
    cut = size_limit_cut(partial, what)
    free = free_bytes(path.parent)
    had_partial = partial.exists()
    partial.unlink(missing_ok=True)
    if cut:
        return RuntimeError(cut)
    if had_partial and free is not None and free < NEARLY_FULL:
        return DiskFullError(path)
    return RuntimeError(f"Kineto did not write {path} (see the worker log)")
