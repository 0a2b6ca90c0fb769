"""A markers.jsonl whose begins and ends do not nest, named by file and line.

The bus writes the markers of one thread in the order they happened: an iteration holds stages, the forward
holds layers, a layer its children, each end after its begin and no marker earlier than the one before it. A
file that breaks that (an end line moved before its begin, a layer that ends outside its forward, an end with
no begin) would pair a begin with some later end and make a slice of seconds out of nothing; it is damage,
and the reader says where. Begins still open at the end of the file are not: a pass stopped mid-forward (a
second stop signal halts the bus) leaves them, and the spans and the trace mark them unclosed.

Markers replayed from a runtime's own profiler (ONNX Runtime, OpenVINO) or from torch.profiler's module hierarchy
(a TorchScript model) are written after the iterations they belong to, in their own order: they are checked the
same way among themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class Marker(Protocol):
    """What the check reads of a marker (hwprof.core.markers.Marker, which reads its file through this module)."""

    @property
    def kind(self) -> str: ...
    @property
    def phase(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def t_ns(self) -> int: ...
    @property
    def iteration(self) -> int: ...
    @property
    def replayed(self) -> bool: ...


@dataclass(frozen=True)
class Open:
    """A begin not yet closed: its marker and its line in the file."""

    marker: Marker
    line: int


def _label(m: Marker) -> str:
    return f"{m.phase} {m.name}" + (f" (iteration {m.iteration})" if m.kind != "iteration" else f" {m.iteration}")


def marker_order_fault(path: Path | str, rows: Sequence[tuple[int, Marker]]) -> str | None:
    """The first place where the markers (with their line numbers, in file order) do not nest or go back in
    time, as one line ("<path>:<line>: E model.0 (iteration 0) comes before its B (line 14)"); None when
    they do."""
    for replayed in (False, True):
        fault = _fault(str(path), [(n, m) for n, m in rows if m.replayed == replayed], in_time_order=not replayed)
        if fault is not None:
            return fault
    return None


def _fault(path: str, rows: list[tuple[int, Marker]], in_time_order: bool) -> str | None:
    stack: list[Open] = []
    last: tuple[int, Marker] | None = None
    for index, (line, m) in enumerate(rows):
        if in_time_order and last is not None and m.t_ns < last[1].t_ns:
            return f"{path}:{line}: {_label(m)} is earlier than line {last[0]} ({_label(last[1])}): out of time order"
        last = (line, m)
        if m.phase == "B":
            same = next((o for o in stack if (o.marker.kind, o.marker.name) == (m.kind, m.name)), None)
            if same is not None or (m.kind == "iteration" and stack):
                unclosed = same or stack[-1]
                return f"{path}:{unclosed.line}: {_label(unclosed.marker)} is never closed (line {line}: {_label(m)})"
            stack.append(Open(m, line))
            continue
        depth = next((i for i in range(len(stack) - 1, -1, -1) if _closes(stack[i].marker, m)), None)
        if depth is None:
            later = next((n for n, b in rows[index + 1 :] if b.phase == "B" and _closes(b, m)), None)
            where = f"comes before its B (line {later})" if later is not None else "has no B"
            return f"{path}:{line}: {_label(m)} {where}"
        if depth != len(stack) - 1:
            inner = stack[-1]
            return (
                f"{path}:{line}: {_label(m)} ends while {inner.marker.name} (B at line {inner.line}) is open: "
                f"{inner.marker.name} would end outside its {m.name}"
            )
        begin = stack.pop()
        if m.t_ns < begin.marker.t_ns:
            return f"{path}:{line}: {_label(m)} is earlier than its B (line {begin.line})"
    return None


def _closes(begin: Marker, end: Marker) -> bool:
    return (begin.kind, begin.name, begin.iteration) == (end.kind, end.name, end.iteration)
