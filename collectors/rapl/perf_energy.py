"""RAPL through perf's `power` PMU: the fallback when the powercap sysfs files are not readable.

The kernel's RAPL PMU (arch/x86/events/rapl.c) publishes its events under
`<event_source>/power/events/energy-{pkg,cores,ram,gpu,psys}` ("event=0x02"), each with a
`.scale` (Joules per count, e.g. 2.3283064365386962890625e-10) and a `.unit` ("Joules"). The
events are CPU-wide only: they are opened with pid=-1 on one CPU per package, listed in
`power/cpumask`, which needs `perf_event_paranoid` <= 0, CAP_PERFMON or root. The kernel keeps a
64-bit running count, so unlike sysfs's `energy_uj` these counts do not wrap.

It opens one plain counting event per domain through hwprof.perf.syscall and reads its u64; where the host is a
recorded one (hwprof.core.host_facts), each domain's count is the recording's instead.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hwprof.core.host_facts import current
from hwprof.perf import syscall

_EVENT_DOMAIN = {"energy-pkg": "", "energy-cores": "core", "energy-ram": "dram", "energy-gpu": "uncore"}
"""perf event -> powercap sub-zone name, so both sources label domains alike."""


def perf_event_open(pmu_type: int, config: dict[str, int], pid: int, cpu: int) -> int:
    """Open one counting event (enabled, plain u64 read format) and return its fd; PerfOpenError on failure."""
    attr = syscall.PerfEventAttr()
    attr.type = pmu_type
    attr.size = ctypes.sizeof(syscall.PerfEventAttr)
    attr.config = config.get("config", 0)
    attr.config1 = config.get("config1", 0)
    attr.config2 = config.get("config2", 0)
    return syscall.perf_event_open(attr, pid=pid, cpu=cpu, name=f"power/config={attr.config:#x}/")


def read_count(fd: int) -> int:
    return int(struct.unpack("=Q", os.read(fd, 8))[0])


def parse_cpu_list(text: str) -> list[int]:
    """'0,36' or '0-3,8' -> CPU numbers."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def _bits(spec: str) -> list[int]:
    """'0-7' or '0-7,32-35' or '21' -> bit positions, lowest first."""
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def encode_event(event_text: str, formats: dict[str, str]) -> dict[str, int]:
    """'event=0x02' with format {'event': 'config:0-7'} -> {'config': 2}."""
    fields: dict[str, int] = {}
    for term in event_text.strip().split(","):
        if not term:
            continue
        key, _, value = term.partition("=")
        spec = formats.get(key.strip())
        if spec is None:
            raise ValueError(f"event term {key!r} has no format in the PMU's format/ folder")
        target, _, bitspec = spec.partition(":")
        number = int(value, 0) if value else 1
        for i, bit in enumerate(_bits(bitspec)):
            if number >> i & 1:
                fields[target] = fields.get(target, 0) | (1 << bit)
    return fields


@dataclass(frozen=True)
class PerfEnergyEvent:
    event: str
    """e.g. 'energy-pkg'."""
    config: dict[str, int]
    scale_j: float
    """Joules per count (from the .scale file; the .unit file must say Joules)."""


@dataclass(frozen=True)
class PerfDomain:
    label: str
    event: PerfEnergyEvent
    cpu: int


def power_pmu_events(pmu_dir: Path) -> list[PerfEnergyEvent]:
    """The energy-* events of a power PMU folder; OSError/ValueError when the folder is incomplete."""
    formats = {f.name: f.read_text().strip() for f in sorted((pmu_dir / "format").iterdir())}
    events = []
    for path in sorted((pmu_dir / "events").glob("energy-*")):
        if "." in path.name:
            continue
        unit_file = path.with_name(path.name + ".unit")
        scale_file = path.with_name(path.name + ".scale")
        unit = unit_file.read_text().strip() if unit_file.exists() else ""
        if unit and unit != "Joules":
            raise ValueError(f"{unit_file} says {unit!r}, expected 'Joules'")
        scale = float(scale_file.read_text().strip()) if scale_file.exists() else 1.0
        events.append(PerfEnergyEvent(path.name, encode_event(path.read_text(), formats), scale))
    return events


def perf_domains(pmu_dir: Path) -> list[PerfDomain]:
    """One domain per (energy event, package CPU of cpumask); psys is platform-wide, read once."""
    cpus = parse_cpu_list((pmu_dir / "cpumask").read_text()) if (pmu_dir / "cpumask").exists() else [0]
    domains = []
    for event in power_pmu_events(pmu_dir):
        if event.event == "energy-psys":
            domains.append(PerfDomain("psys", event, cpus[0]))
            continue
        sub = _EVENT_DOMAIN.get(event.event, event.event.removeprefix("energy-"))
        for package, cpu in enumerate(cpus):
            label = f"package-{package}" + (f"/{sub}" if sub else "")
            domains.append(PerfDomain(label, event, cpu))
    return domains


class PerfEnergyReader:
    """Open every domain's event; read() returns microjoules per domain (no wrap: 64-bit counts)."""

    def __init__(self, pmu_dir: Path) -> None:
        self.pmu_dir = pmu_dir
        self.pmu_type = int((pmu_dir / "type").read_text().strip())
        self.domains = perf_domains(pmu_dir)
        if not self.domains:
            raise ValueError(f"no energy-* events in {pmu_dir / 'events'}")
        self.fds: list[int] = []
        replayed = [current().energy_counter(d.event.event) for d in self.domains]
        self.replayed: list[Callable[[], float]] = [c for c in replayed if c is not None]
        """A recorded host's counts in joules, one per domain (empty: the machine's counters are open)."""
        try:
            for domain in self.domains if not self.replayed else ():
                self.fds.append(perf_event_open(self.pmu_type, domain.event.config, -1, domain.cpu))
        except OSError:
            self.close()
            raise
        self._scales_uj = [d.event.scale_j * 1e6 for d in self.domains]

    def read(self) -> list[float]:
        if self.replayed:
            return [count() * 1e6 for count in self.replayed]
        return [read_count(fd) * s for fd, s in zip(self.fds, self._scales_uj, strict=True)]

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
