"""What perf may sample on this host: the perf binary, kernel.perf_event_paranoid, a PMU for cycles, and the
events to ask for with the fix for each refusal.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.collectors.base import Capability

from hwprof.core.host_facts import current
from hwprof.perf.open_errors import NO_PMU_FIX, read_paranoid
from hwprof.schema.probes import PerfSamplingProbe, UnavailablePart

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig


PMU_GROUP = ("cycles", "instructions", "cache-misses")
PERMISSION_WORDS = ("permission", "not permitted", "paranoid", "eacces", "eperm", "access to performance monitoring")
INSTALL_FIX = (
    "install Linux perf: Debian `sudo apt-get install linux-perf`, Ubuntu `sudo apt-get install "
    "linux-tools-common linux-tools-$(uname -r)`, Fedora `sudo dnf install perf`"
)
CPI_PART = "CPI and MPKI per kernel"
NO_PMU_REASON = "this host exposes no hardware PMU to perf (`perf stat -e cycles true` says <not supported>)"


def perf_binary(config: RunConfig) -> str | None:
    explicit = config.extra.get("perf_path")
    if explicit:
        return str(explicit) if Path(explicit).is_file() and os.access(explicit, os.X_OK) else None
    return current().perf_path()


NO_BPF_EVENTS = "--no-bpf-event"


@functools.cache
def record_flags(binary: str) -> tuple[str, ...]:
    """Options of every `perf record` hwprof starts, where this perf has them (`perf record -h` lists them):
    NO_BPF_EVENTS. Why: perf record reads every loaded BPF program's details at its start to record them (perf 6.1
    on the 2-vCPU Xeon: `perf record -- true` 1.18 s, 0.22 s without), for samples in BPF code, which a model's
    threads do not run."""
    try:
        done = subprocess.run([binary, "record", "-h"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return (NO_BPF_EVENTS,) if NO_BPF_EVENTS in done.stdout + done.stderr else ()


def user_only() -> bool:
    """Unprivileged perf at paranoid >= 2 may sample user space only."""
    level = read_paranoid()
    return not current().is_root() and level is not None and level >= 2


def permission_fix() -> str:
    return "sudo sysctl -w kernel.perf_event_paranoid=1 (or run hwprof as root, or grant CAP_PERFMON)"


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def counted_events(perf_stat: str) -> set[str]:
    """The events perf stat printed a count for: `-x ,` rows (`123,,cycles,...`) or its table (`123,456  cycles`);
    `<not supported>` and `<not counted>` are no count."""
    rows = [line.split(",") for line in perf_stat.splitlines() if line.count(",") >= 2]
    counted = {r[2].split(":")[0] for r in rows if r[0].strip().isdigit()}
    table = re.findall(r"^\s*\d[\d,.]*\s+([\w-]+)", perf_stat, re.MULTILINE)
    return counted | {e.split(":")[0] for e in table if not e[0].isdigit()}


def pmu_status(binary: str) -> tuple[bool, str]:
    """Whether `perf stat -e instructions,cycles true` counts, and perf's words when it does not."""
    try:
        printed = current().perf_stat_cycles(binary)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"perf stat could not run: {exc}"
    if {"cycles", "instructions"} <= counted_events(printed):
        return True, ""
    return False, NO_PMU_REASON


def sampling_access(binary: str) -> Capability:
    """What perf may sample here, once a test recording worked: its version, whether the PMU counts (else CPI is
    unavailable), and kernel-space samples where paranoid keeps them from this user (the probe's details)."""
    suffix = user_only()
    pmu, why = pmu_status(binary)
    details = PerfSamplingProbe.of(binary=binary, version=current().perf_version(binary), pmu=pmu, user_only=suffix)
    unavailable: dict[str, UnavailablePart] = {}
    if not pmu:
        unavailable[CPI_PART] = UnavailablePart.of(reason=why, fix=NO_PMU_FIX)
    if suffix:
        unavailable["kernel-space samples"] = UnavailablePart.of(
            reason=f"perf_event_paranoid={read_paranoid()} without root", fix=permission_fix()
        )
    if unavailable:
        details.update(unavailable=unavailable)
    return Capability.ok(details=details)


SOFTWARE_EVENTS = frozenset(
    {"task-clock", "page-faults", "minor-faults", "major-faults", "context-switches", "cpu-migrations"}
)


def probe_details(capability: Capability) -> PerfSamplingProbe:
    """What perf_sampling's probe found (an empty record for a capability without it: nothing known)."""
    details = capability.details
    return details if isinstance(details, PerfSamplingProbe) else PerfSamplingProbe()


def sampling_events(config: RunConfig, details: PerfSamplingProbe) -> list[str]:
    """The event of `perf record -e`: cycles leading a group read at each sample where the PMU
    exists (instructions, cache-misses, and the events of --events), else cpu-clock, leading a
    group of the software events of --events if any."""
    suffix = ":u" if details.user_only else ""
    pmu = bool(details.pmu)
    leader = "cycles" if pmu else "cpu-clock"
    members = list(PMU_GROUP[1:]) if pmu else []
    for event in config.events:
        usable = pmu or event in SOFTWARE_EVENTS
        if usable and event != leader and event not in members and ":" not in event and "/" not in event:
            members.append(event)
    if not members:
        return [f"{leader}{suffix}"]
    return ["{" + ",".join(f"{e}{suffix}" for e in (leader, *members)) + "}:S"]
