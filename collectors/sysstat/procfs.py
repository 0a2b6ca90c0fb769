"""What /proc and sysfs say about the process and the CPUs: RSS, per-thread CPU time, core frequencies."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_CPU_SYSFS_ROOT = Path("/sys/devices/system/cpu")


def _cpu_number(path: Path) -> int:
    return int(path.name.removeprefix("cpu"))


@dataclass
class FreqSource:
    """Per-core scaling_cur_freq files, or why there are none."""

    fds: dict[int, int] = field(default_factory=dict)
    reason: str = ""
    fix: str = ""

    @classmethod
    def open(cls, root: Path) -> FreqSource:
        files = sorted(
            (p for p in root.glob("cpu[0-9]*/cpufreq/scaling_cur_freq")),
            key=lambda p: _cpu_number(p.parent.parent),
        )
        if not files:
            return cls(
                reason=f"no cpufreq driver: {root}/cpu*/cpufreq/scaling_cur_freq does not exist",
                fix="load a cpufreq driver (sudo modprobe acpi_cpufreq, or boot with amd_pstate or "
                "intel_pstate); VMs usually have none, so run on bare metal",
            )
        fds: dict[int, int] = {}
        errors = []
        for path in files:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                int(os.pread(fd, 32, 0))
            except (OSError, ValueError) as exc:
                errors.append(f"{path}: {exc}")
                continue
            fds[_cpu_number(path.parent.parent)] = fd
        if not fds:
            return cls(reason="scaling_cur_freq not readable: " + "; ".join(errors), fix="run hwprof as root")
        return cls(fds)

    def read_khz(self) -> dict[int, int]:
        return {cpu: int(os.pread(fd, 32, 0)) for cpu, fd in self.fds.items()}

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}


def cpuinfo_mhz_json() -> dict[str, Any]:
    """/proc/cpuinfo's "cpu MHz", quoted (not sampled) when there is no cpufreq driver: run.json's
    sysstat.summary.cpu_freq.cpuinfo."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError as exc:
        return {"unreadable": str(exc)}
    live = re.search(r"^flags\s*:.*\baperfmperf\b", text, re.M) is not None
    return {
        "mhz": [float(v) for v in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", text, re.M)],
        "note": "from APERF/MPERF, a recent average"
        if live
        else "the CPU flags lack aperfmperf (as in most VMs): this is the fixed nominal clock, not a reading",
    }


class ProcReader:
    """This process's /proc files, kept open and re-read with pread.

    Why not psutil (installed, used for other processes' figures): the sampler reads RSS every few milliseconds
    beside the measured forward, and psutil opens, reads and closes /proc/self/statm per call: 11.7-13.2 us against
    1.6-2.3 us for a pread of the open file (5.7-7.1x, measured in one run on the 2-vCPU EPYC VM). psutil has no
    VmHWM (the stage peak) and no write to clear_refs (its reset per stage)."""

    def __init__(self) -> None:
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.statm = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        self.status = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
        self.clear_refs: int | None = None

    def rss_bytes(self) -> int:
        return int(os.pread(self.statm, 128, 0).split()[1]) * self.page

    def hwm_bytes(self) -> int:
        text = os.pread(self.status, 8192, 0)
        m = re.search(rb"^VmHWM:\s*(\d+) kB", text, re.M)
        if m is None:
            raise OSError("VmHWM missing from /proc/self/status")
        return int(m.group(1)) * 1024

    def enable_hwm_reset(self) -> str:
        """Open clear_refs and reset once; '' on success, else why it cannot be used."""
        try:
            if self.clear_refs is None:
                self.clear_refs = os.open("/proc/self/clear_refs", os.O_WRONLY | os.O_CLOEXEC)
            os.write(self.clear_refs, b"5")
        except OSError as exc:
            if self.clear_refs is not None:
                os.close(self.clear_refs)
            self.clear_refs = None
            return f"/proc/self/clear_refs not writable ({exc.strerror})"
        return ""

    def reset_hwm(self) -> None:
        if self.clear_refs is not None:
            os.write(self.clear_refs, b"5")

    @staticmethod
    def tids() -> list[int]:
        return sorted(int(t) for t in os.listdir("/proc/self/task"))

    def close(self) -> None:
        for fd in (self.statm, self.status, self.clear_refs):
            if fd is not None:
                os.close(fd)
        self.clear_refs = None
