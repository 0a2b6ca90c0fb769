"""What perf may sample on this host: the perf binary, kernel.perf_event_paranoid, a PMU for cycles, and the
events to ask for with the fix for each refusal.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.collectors.base import Capability

from hwprof.schema.probes import PerfSamplingProbe

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
NO_PMU_FIX = (
    "run on bare metal, or on a VM with a virtual PMU (KVM/libvirt `<cpu mode='host-passthrough'>` with "
    "`<pmu state='on'/>`; AWS: a whole-host .metal instance); then `perf stat -e cycles,instructions true` counts"
)


def perf_binary(config: RunConfig) -> str | None:
    explicit = config.extra.get("perf_path")
    if explicit:
        return str(explicit) if Path(explicit).is_file() and os.access(explicit, os.X_OK) else None
    return shutil.which("perf")


def paranoid_level() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip())
    except (OSError, ValueError):
        return None


def user_only() -> bool:
    """Unprivileged perf at paranoid >= 2 may sample user space only."""
    level = paranoid_level()
    return os.geteuid() != 0 and level is not None and level >= 2


def permission_fix() -> str:
    return "sudo sysctl -w kernel.perf_event_paranoid=1 (or run hwprof as root, or grant CAP_PERFMON)"


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def pmu_status(binary: str) -> tuple[bool, str]:
    """Whether `perf stat -e instructions,cycles true` counts, and perf's words when it does not."""
    try:
        done = subprocess.run(
            [binary, "stat", "-x", ",", "-e", "cycles,instructions", "true"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"perf stat could not run: {exc}"
    rows = [line.split(",") for line in done.stderr.splitlines() if line.count(",") >= 2]
    counted = {r[2].split(":")[0] for r in rows if r[0].strip().isdigit()}
    if {"cycles", "instructions"} <= counted:
        return True, ""
    return False, NO_PMU_REASON


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
