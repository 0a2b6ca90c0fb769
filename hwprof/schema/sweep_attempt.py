"""One attempt of a sweep point on a Ray cluster, as sweep.json keeps it under rows.<i>.attempts
(hwprof.sweep.ray_record.Attempt as written). Read as a record (codec.py) by the sweep table's notes: a
damaged field gives one line naming sweep.json and the field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hwprof.schema.codec import Record


@dataclass(kw_only=True)
class SweepAttempt(Record):
    """Where and when the point ran, and how the attempt ended."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("start",)
    node_id: str | None = None
    host: str | None = None
    start: float = 0.0
    """time.time() on the node when the task started."""
    end: float | None = None
    """When it returned (the node's clock), or when the driver saw it end; None while it runs."""
    outcome: str | None = None
