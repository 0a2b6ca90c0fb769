"""The input shapes a pass's forwards were given (result.json's and run.json's `passes.<pass>.inputs`): each shape
with its forwards by kind, and, where more than one shape occurred, the shape of each measured and clean iteration
by its index (hwprof.core.input_shapes)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hwprof.schema.bounds import Count
from hwprof.schema.codec import Record


@dataclass(kw_only=True)
class ShapeCalls(Record):
    warmup: Count = 0
    measured: Count = 0
    clean: Count = 0

    @property
    def total(self) -> int:
        return self.warmup + self.measured + self.clean


@dataclass(kw_only=True)
class InputsDoc(Record):
    shapes: dict[str, ShapeCalls] = field(default_factory=dict)
    """shape ("1x3x320x256") -> its forwards, in the order first seen."""
    measured: dict[str, str] | None = None
    """Measured iteration index -> its shape (only where more than one shape occurred)."""
    clean: dict[str, str] | None = None
    """Clean iteration index -> its shape (a paired pass, more than one shape)."""

    @property
    def mixed(self) -> bool:
        return len(self.shapes) > 1

    def text(self) -> str:
        """ "1x3x320x256 (3 warm-up, 10 measured) · 1x3x192x320 (9 measured)"."""
        return " · ".join(f"{shape} ({calls_text(c)})" for shape, c in self.shapes.items())

    def by_iteration(self) -> tuple[dict[int, str], dict[int, str]]:
        """(measured, clean) iteration index -> shape; empty where one shape occurred."""
        return _ints(self.measured), _ints(self.clean)


def inputs_doc(calls: dict[str, dict[str, int]], measured: dict[int, str], clean: dict[int, str]) -> InputsDoc | None:
    """The record of a pass's tally (hwprof.core.input_shapes.InputTally's fields); None: no forward ended."""
    if not calls:
        return None
    doc = InputsDoc.of(shapes={shape: ShapeCalls.of(**counts) for shape, counts in calls.items()})
    if len(calls) > 1:
        doc.update(measured={str(i): s for i, s in sorted(measured.items())})
        if clean:
            doc.update(clean={str(i): s for i, s in sorted(clean.items())})
    return doc


def calls_text(calls: ShapeCalls) -> str:
    parts = [(calls.warmup, "warm-up"), (calls.measured, "measured"), (calls.clean, "clean")]
    return ", ".join(f"{n} {what}" for n, what in parts if n)


def _ints(doc: dict[str, str] | None) -> dict[int, str]:
    return {int(k): v for k, v in (doc or {}).items()}
