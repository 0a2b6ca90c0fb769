"""Number formats shared by the report and compare tables: a figure never measured reads MISSING."""

from __future__ import annotations

import time

from hwprof.render.tables import MISSING


def num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return MISSING
    return f"{value:,.{digits}f}"


def ms(value: float | None) -> str:
    if value is None:
        return MISSING
    return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.2f}" if abs(value) >= 1 else f"{value:.3f}"


def pct(share: float | None) -> str:
    if share is None:
        return MISSING
    return f"{100 * share:.2f}%" if 0 < abs(share) < 0.001 else f"{100 * share:.1f}%"


def sig(value: float | None, digits: int = 3) -> str:
    """Three significant digits, no exponent below 1e6: 0.00123, 12.3, 1,234."""
    if value is None:
        return MISSING
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    text = f"{value:.{digits}g}"
    return text if "e" not in text else f"{value:.{digits + 2}f}"


def si_bytes(value: float | None) -> str:
    if value is None:
        return MISSING
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value:.0f} B"


def clock(at: float) -> str:
    """A time.time() value as HH:MM:SS in local time (when a point's attempt ran, when a node left)."""
    return time.strftime("%H:%M:%S", time.localtime(at))
