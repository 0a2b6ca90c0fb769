"""Why an event could not be opened, and the exact fix: errno -> (reason, fix)."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass

from hwprof.core.host_facts import current
from hwprof.schema.probes import UnavailablePart

NO_PMU_REASON = "the kernel exposes no PMU for this event: a VM without a virtual PMU, or an unsupported CPU"
NO_PMU_FIX = (
    "run on bare metal or enable the VM's virtual PMU (KVM/QEMU: `-cpu host,pmu=on`; libvirt: `<cpu "
    "mode='host-passthrough'>` with `<pmu state='on'/>`; VMware: 'Virtualize CPU performance counters'; cloud: a "
    "metal or vPMU-enabled instance type); `perf stat -e cycles,instructions true` then counts"
)
"""The one fix for a host without a hardware PMU: perf_event_open's counters, perf's sampling and PAPI say it so."""


@dataclass(frozen=True)
class Unavailable:
    event: str
    errno: str
    """Symbolic errno, e.g. "ENOENT"."""
    reason: str
    fix: str

    def part(self) -> UnavailablePart:
        """As a probe's details and perf_events' summary record it: errno, reason, fix."""
        return UnavailablePart.of(errno=self.errno, reason=self.reason, fix=self.fix)


def read_paranoid() -> int | None:
    """kernel.perf_event_paranoid of this host (hwprof.core.host_facts); None where unreadable."""
    text = current().perf_event_paranoid()
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def explain(err: int, paranoid: int | None = None) -> tuple[str, str]:
    """(reason, fix) for a perf_event_open errno."""
    if err in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV):
        return NO_PMU_REASON, NO_PMU_FIX
    if err in (errno.EACCES, errno.EPERM):
        level = "unknown" if paranoid is None else str(paranoid)
        return (
            f"perf_event_paranoid is {level}: this user may not count this event",
            "`sysctl -w kernel.perf_event_paranoid=1` or run with CAP_PERFMON (or as root)",
        )
    if err in (errno.EMFILE, errno.ENFILE):
        return (
            "too many open files: every event needs a file descriptor",
            "`ulimit -n 65536` (or ask for fewer events)",
        )
    if err == errno.EBUSY:
        return (
            "the counter is held by another user (another perf session, or the NMI watchdog)",
            "stop the other profiler, or `sysctl -w kernel.nmi_watchdog=0`",
        )
    if err == errno.EINVAL:
        return (
            "the kernel rejected the event's encoding or the group cannot be scheduled together",
            "check the encoding against /sys/bus/event_source/devices/<pmu>/format, or ask for fewer events",
        )
    if err == errno.E2BIG:
        return "the kernel does not know this perf_event_attr size", "use a Linux kernel of 4.1 or newer"
    if err == errno.ENOSPC:
        return "no free hardware counter for this event", "ask for fewer events at once"
    if err == errno.ENOSYS:
        return "this kernel has no perf_event_open syscall", "use a kernel built with CONFIG_PERF_EVENTS=y"
    return errno.errorcode.get(err, f"errno {err}") + f": {os.strerror(err)}", ""


def unavailable(event: str, err: int, paranoid: int | None = None) -> Unavailable:
    reason, fix = explain(err, paranoid)
    return Unavailable(event, errno.errorcode.get(err, str(err)), reason, fix)
