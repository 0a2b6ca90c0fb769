"""What a number in a run directory can be, declared once per field and checked where the file is read.

A field's type says what JSON type its value has; a bound says which values of that type a run could hold.
Every number, bounded or not, must be finite (json reads `NaN`, `Infinity` and `1e400` as floats that are
not) and within what a 64-bit counter or clock can hold (`10**30` reads as a Python int of any size). A
field typed `NonNegative` or `Count` holds a duration, a size or a count, never below 0; a `Share` a
fraction of a whole, within 0-1. Fields that are differences (clock offsets, residuals, a change of RSS, a
return code that names a signal) stay plain `float`/`int`: a real run holds small negative values there.

codec.Record reads the bound of each field from its annotation (`p50_ms: NonNegative`), and the metric
tables and JSONL records use `number_fault` the same way, so the message has one form: the file, the
field, what it must be and the value found.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any

LARGEST = 2**64
"""No count, size or time (ns) of a run reaches this: a perf counter and CLOCK_MONOTONIC are 64-bit."""

SHARE_SLACK = 1e-9
"""A share computed as a ratio of floats may exceed 1 by rounding."""


@dataclass(frozen=True)
class Bound:
    """The values a number field can hold beyond being finite: at least `low`, at most `high`."""

    low: float | None = None
    high: float | None = None
    words: str = ""
    """What the field must be, for the error ("a number >= 0 (a duration, size or count)")."""


NON_NEGATIVE = Bound(0.0, None, "a number >= 0 (a duration, size or count)")
SHARE = Bound(0.0, 1.0, "a share within 0-1")

NonNegative = Annotated[float, NON_NEGATIVE]
"""A duration, size, energy or rate: a float (or an int) never below 0."""
Count = Annotated[int, NON_NEGATIVE]
"""A count (samples, iterations, bytes, threads): an int never below 0."""
Share = Annotated[float, SHARE]
"""A fraction of a whole, within 0-1."""


def number_fault(value: Any, bound: Bound | None = None) -> str | None:
    """What `value` must be, in words, when it is a JSON number this field cannot hold; None when it can
    (or when it is not a number at all: the type check names that)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return "a finite number"
    if abs(value) >= LARGEST:
        return "a number below 2**64 (no count, size or time of a run is larger)"
    if bound is None:
        return None
    if bound.low is not None and value < bound.low:
        return bound.words
    if bound.high is not None and value > bound.high + (SHARE_SLACK if isinstance(value, float) else 0):
        return bound.words
    return None
