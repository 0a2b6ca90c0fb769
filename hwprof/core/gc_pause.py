"""Python's cyclic garbage collector held off while hwprof reads or writes a pass's records: each collection walks
every tracked object, and the conversions make hundreds of thousands of them (yolov7 at 640 on the 2-vCPU EPYC,
2026-11-29: the trace pass's close 2.68 s with the collector on, 1.58 s with it held off). What they make is kept
until they return anyway; the collector is on again after, as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """The collector off for the block, then as it was before (a caller that had it off keeps it off)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
