"""pyspy.hotspots.json, py-spy's sampled time in the measured iterations (hwprof.collectors.pyspy.attribution):
the whole window's hottest functions, and the same per stage, layer and thread. Read as records (codec.py) where
the report reads the whole window (a program without a model: hwprof.analysis.whole_program)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hwprof.schema.bounds import Count, NonNegative, Share
from hwprof.schema.codec import JsonObject, Record

HOTSPOTS_FILE = "pyspy.hotspots.json"


@dataclass(kw_only=True)
class HotspotRow(Record):
    """One function (by leaf frame): its sampled time per iteration and its share of the bucket's."""

    function: str = ""
    ms_per_iter: NonNegative | None = None
    share: Share | None = None


@dataclass(kw_only=True)
class HotspotBucket(Record):
    """Sampled time of one window, stage, layer or thread, its states' shares and its hottest functions."""

    sampled_ms_per_iter: NonNegative | None = None
    shares: JsonObject | None = None
    python: list[HotspotRow] = field(default_factory=list)
    native: list[HotspotRow] = field(default_factory=list)


@dataclass(kw_only=True)
class HotspotsFile(Record):
    iterations: Count | None = None
    rate_hz: NonNegative | None = None
    measured: HotspotBucket = field(default_factory=HotspotBucket)
