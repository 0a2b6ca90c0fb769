"""Where RAPL energy is read from: powercap sysfs zones or perf's power events, behind one EnergySource."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.collectors.rapl import perf_energy

from hwprof.core.envvars import EVENT_SOURCE_ROOT, POWERCAP_ROOT
from hwprof.core.host_facts import current
from hwprof.perf.syscall import PerfOpenError

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig


ENV_POWERCAP_ROOT = POWERCAP_ROOT.name
ENV_EVENT_SOURCE_ROOT = EVENT_SOURCE_ROOT.name
_ZONE = re.compile(r"^intel-rapl(-mmio)?:(\d+)(?::(\d+))?$")


def powercap_root(config: RunConfig) -> Path:
    """The config's, else $HWPROF_POWERCAP_ROOT, else the host's (/sys/class/powercap: hwprof.core.host_facts)."""
    return Path(config.extra.get("powercap_root") or os.environ.get(ENV_POWERCAP_ROOT) or current().powercap_root())


def override_problem(config: RunConfig) -> str | None:
    """Why $HWPROF_POWERCAP_ROOT, when it is what powercap_root uses, cannot be a powercap directory (None: it can,
    or it is not set). Such an override is an error, never a silent fall-back to perf's power PMU."""
    if config.extra.get("powercap_root"):
        return None
    return POWERCAP_ROOT.problem()


ENV_FIX = POWERCAP_ROOT.fix


def event_source_root(config: RunConfig) -> Path:
    """The config's, else $HWPROF_EVENT_SOURCE_ROOT, else the host's (/sys/bus/event_source/devices)."""
    return Path(
        config.extra.get("event_source_root") or os.environ.get(ENV_EVENT_SOURCE_ROOT) or current().event_source_root()
    )


@dataclass(frozen=True)
class Domain:
    label: str
    """"package-0", "package-0/dram", "psys", "mmio:package-0"."""
    zone: str
    """Where it is read: "intel-rapl:0:1" or "perf power/energy-ram cpu 0"."""
    max_range_uj: int | None
    """Wrap modulus of the raw reading; None for perf's 64-bit counts."""
    top_level: bool


def delta_uj(before: float, after: float, max_range_uj: int | None) -> float:
    """Energy between two raw readings of one domain, across at most one wrap."""
    if after >= before or max_range_uj is None:
        return after - before
    return after + max_range_uj - before


class SourceUnavailable(Exception):
    def __init__(self, reason: str, fix: str) -> None:
        super().__init__(reason)
        self.reason, self.fix = reason, fix


@dataclass
class EnergySource:
    kind: str
    """"powercap" or "perf"."""
    where: str
    domains: list[Domain]
    read: Callable[[], list[float]]
    """Raw readings in microjoules, one per domain (sysfs values wrap, see Domain.max_range_uj)."""
    close: Callable[[], None]
    skipped: dict[str, str] = field(default_factory=dict)
    """zone -> why it is not read."""


def _read_text(path: Path) -> str:
    with open(path) as f:
        return f.read().strip()


def _zone_dirs(root: Path) -> list[Path]:
    """Every zone folder under root, once: /sys/class/powercap lists sub-zones both at the top
    (as links) and inside their parent zone."""
    seen: dict[str, Path] = {}
    for entry in sorted(root.iterdir()):
        if _ZONE.match(entry.name) and entry.is_dir():
            seen.setdefault(entry.name, entry)
            for sub in sorted(entry.iterdir()):
                if _ZONE.match(sub.name) and sub.is_dir():
                    seen.setdefault(sub.name, sub)
    return [seen[k] for k in sorted(seen, key=_zone_key)]


def _zone_key(zone: str) -> tuple[int, int, int]:
    m = _ZONE.match(zone)
    assert m is not None
    return (1 if m.group(1) else 0, int(m.group(2)), int(m.group(3)) if m.group(3) is not None else -1)


class SysfsReader:
    """Keeps every energy_uj open and re-reads it with pread at offset 0 (sysfs regenerates the
    value on each read from offset 0), which costs one syscall per domain."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.fds: list[int] = []
        try:
            for path in paths:
                self.fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            self.close()
            raise

    def read(self) -> list[float]:
        return [float(int(os.pread(fd, 32, 0))) for fd in self.fds]

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []


def open_powercap(root: Path) -> EnergySource:
    """Every readable zone under root; SourceUnavailable with the fix when there is none."""
    if not root.is_dir():
        raise SourceUnavailable(
            f"no powercap driver: {root} does not exist",
            "sudo modprobe intel_rapl_msr (loads intel_rapl_common; Intel and AMD); a VM rarely passes "
            "RAPL through, so run on bare metal",
        )
    dirs = _zone_dirs(root)
    if not dirs:
        raise SourceUnavailable(f"no intel-rapl zones in {root}", "sudo modprobe intel_rapl_msr")
    labels: dict[str, str] = {}
    domains: list[Domain] = []
    paths: list[Path] = []
    skipped: dict[str, str] = {}
    denied = False
    for zone_dir in dirs:
        zone = zone_dir.name
        m = _ZONE.match(zone)
        assert m is not None
        try:
            name = _read_text(zone_dir / "name")
            max_range = int(_read_text(zone_dir / "max_energy_range_uj"))
            energy = zone_dir / "energy_uj"
            with open(energy) as f:
                int(f.read().strip())
        except PermissionError as exc:
            denied = True
            skipped[zone] = f"not readable: {exc.strerror} ({exc.filename})"
            continue
        except (OSError, ValueError) as exc:
            skipped[zone] = f"not readable: {exc}"
            continue
        top = m.group(3) is None
        label = name if top else f"{labels.get(zone.rsplit(':', 1)[0], zone.rsplit(':', 1)[0])}/{name}"
        if m.group(1):
            label = f"mmio:{label}"
        labels[zone] = label
        domains.append(Domain(label, zone, max_range, top))
        paths.append(energy)
    if not domains:
        reason = "; ".join(f"{z} {why}" for z, why in skipped.items())
        if denied:
            raise SourceUnavailable(
                f"powercap energy_uj not readable (root-only since Linux 5.10): {reason}",
                f"sudo chmod a+r {root}/intel-rapl:*/energy_uj {root}/intel-rapl:*/intel-rapl:*/energy_uj "
                "(until reboot), or run hwprof as root",
            )
        raise SourceUnavailable(f"no readable powercap zone: {reason}", "check the intel_rapl driver (dmesg)")
    reader = SysfsReader(paths)
    return EnergySource("powercap", str(root), domains, reader.read, reader.close, skipped)


def open_perf(event_source: Path) -> EnergySource:
    pmu = event_source / "power"
    if not pmu.is_dir():
        raise SourceUnavailable(
            f"perf has no power PMU ({pmu} does not exist)",
            "sudo modprobe rapl (the perf RAPL PMU; needs RAPL in the CPU, which VMs rarely expose)",
        )
    try:
        reader = perf_energy.PerfEnergyReader(pmu)
    except PerfOpenError as exc:
        raise SourceUnavailable(
            f"perf_event_open on the power PMU failed: {exc.strerror}",
            "sudo sysctl kernel.perf_event_paranoid=0, or run hwprof as root",
        ) from exc
    except (OSError, ValueError) as exc:
        raise SourceUnavailable(f"perf power PMU unusable: {exc}", "check `perf list power/`") from exc
    domains = [
        Domain(d.label, f"perf power/{d.event.event} cpu {d.cpu}", None, "/" not in d.label) for d in reader.domains
    ]
    return EnergySource("perf", str(pmu), domains, reader.read, reader.close)


def open_source(config: RunConfig) -> EnergySource:
    """powercap sysfs, else perf's power PMU; SourceUnavailable naming both failures."""
    problem = override_problem(config)
    if problem:
        raise SourceUnavailable(problem, ENV_FIX)
    try:
        return open_powercap(powercap_root(config))
    except SourceUnavailable as sysfs:
        try:
            source = open_perf(event_source_root(config))
        except SourceUnavailable as perf:
            raise SourceUnavailable(f"{sysfs.reason}; {perf.reason}", f"{sysfs.fix}; or: {perf.fix}") from None
        source.skipped["powercap"] = sysfs.reason
        return source
