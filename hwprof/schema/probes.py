"""What a collector's probe found (collectors.base.Capability.details), as run.json keeps it under
collectors.<name>.details for a collector that is unavailable: the base record, ProbeDetails, with the parts
a collector that works in part cannot run, and one record per collector whose probe reports facts (the tool
it found, its version, what it could open). A collector with nothing to report keeps an empty ProbeDetails,
written as {}.

PROBE_TYPES (collector name -> its record) is how run.json's details are read back typed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hwprof.schema.codec import Record


@dataclass(kw_only=True)
class UnavailablePart(Record):
    """A part of a collector that cannot run here (perf_events' events, perf_sampling's CPI per kernel and
    kernel-space samples): why, and the fix."""

    errno: str | None = None
    """perf_events: the symbolic errno its event's perf_event_open failed with (e.g. "ENOENT")."""
    reason: str | None = None
    fix: str | None = None

    @classmethod
    def told(cls, value: object) -> UnavailablePart:
        """An entry of a counter summary's "unavailable" map as a part: {errno, reason, fix} (each read as its
        text, a missing reason or fix as ""), or a sentence (the reason alone)."""
        if not isinstance(value, dict):
            return cls(reason=str(value), fix="")
        errno = value.get("errno")
        return cls(
            errno=str(errno) if errno is not None else None,
            reason=str(value.get("reason", "")),
            fix=str(value.get("fix", "")),
        )


@dataclass(kw_only=True)
class ProbeDetails(Record):
    """A collector's probe details (collectors.base.Capability.details, run.json collectors.<name>.details):
    the base of every collector's; NAME is the collector whose probe writes the subclass."""

    NAME: ClassVar[str] = ""
    unavailable: dict[str, UnavailablePart] | None = None
    """Part -> why it cannot run, for a collector that works in part."""

    def part(self, name: str) -> UnavailablePart | None:
        """Why part `name` cannot run (None: it can, or the probe did not say)."""
        return (self.unavailable or {}).get(name)


@dataclass(kw_only=True)
class PerfSamplingProbe(ProbeDetails):
    """perf_sampling: the perf binary a test `perf record` ran, and what it may sample."""

    NAME: ClassVar[str] = "perf_sampling"
    binary: str | None = None
    version: str | None = None
    """`perf --version`."""
    pmu: bool | None = None
    """`perf stat -e cycles,instructions` counts: samples on cycles with a CPI group (else cpu-clock)."""
    user_only: bool | None = None
    """Only user space may be sampled (`:u`: perf_event_paranoid >= 2 without root)."""


@dataclass(kw_only=True)
class PerfEventsProbe(ProbeDetails):
    """perf_events: the requested events that opened (the others are in `unavailable`, with their errno)."""

    NAME: ClassVar[str] = "perf_events"
    events: list[str] | None = None


@dataclass(kw_only=True)
class RaplProbe(ProbeDetails):
    """rapl: the energy source whose counters moved while the probe polled them."""

    NAME: ClassVar[str] = "rapl"
    source: str | None = None
    """powercap or perf."""
    where: str | None = None
    domains: list[str] | None = None
    skipped: dict[str, str] | None = None
    """Zone (or source) -> why it is not read."""


@dataclass(kw_only=True)
class PapiProbe(ProbeDetails):
    """papi: the presets added to an event set, and why the others could not be."""

    NAME: ClassVar[str] = "papi"
    events: list[str] | None = None
    failed: dict[str, str] | None = None
    """Preset -> PAPI's error."""


@dataclass(kw_only=True)
class CallgrindProbe(ProbeDetails):
    """callgrind: the Valgrind found, and its version."""

    NAME: ClassVar[str] = "callgrind"
    valgrind: str | None = None
    version: str | None = None


@dataclass(kw_only=True)
class PyspyProbe(ProbeDetails):
    """pyspy: the py-spy binary whose test `py-spy dump` worked, and its version."""

    NAME: ClassVar[str] = "pyspy"
    binary: str | None = None
    version: str | None = None


@dataclass(kw_only=True)
class TorchProfilerProbe(ProbeDetails):
    """torch_profiler: what the probe's child printed after profiling one matmul (its only JSON line)."""

    NAME: ClassVar[str] = "torch_profiler"
    torch: str | None = None
    """torch.__version__."""
    kineto: bool | None = None
    mkldnn: bool | None = None
    ok: bool | None = None
    """The profile held the probe's range and aten::mm."""


@dataclass(kw_only=True)
class SysstatProbe(ProbeDetails):
    """sysstat: whether the CPU frequency can be read ("available", or why not)."""

    NAME: ClassVar[str] = "sysstat"
    cpu_freq: str | None = None


@dataclass(kw_only=True)
class ScaleneProbe(ProbeDetails):
    """scalene: the command line the collector runs Scalene with."""

    NAME: ClassVar[str] = "scalene"
    command: str | None = None


PROBE_TYPES: dict[str, type[ProbeDetails]] = {
    cls.NAME: cls
    for cls in (
        PerfSamplingProbe, PerfEventsProbe, RaplProbe, PapiProbe, CallgrindProbe, PyspyProbe, TorchProfilerProbe,
        SysstatProbe, ScaleneProbe,
    )
}  # fmt: skip
"""Collector name -> its probe details' type (the others write an empty ProbeDetails)."""
