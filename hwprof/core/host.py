"""What machine a run was collected on (run.json "host")."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

from hwprof.core.host_facts import current
from hwprof.core.torch_build import torch_build
from hwprof.schema.host import HostDoc

PACKAGES = (
    "torch",
    "ultralytics",
    "numpy",
    "pyperf",
    "perfetto",
    "py-spy",
    "scalene",
    "rich",
    "psutil",
    "python-papi",
    "opencv-python",
    "matplotlib",
    "hwprof",
)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


ISA_RECORDED = (
    "avx2",
    "avx512f",
    "avx512_bf16",
    "avx512_fp16",
    "avx512_vnni",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "fma",
)
"""The /proc/cpuinfo flags run.json's host records (isa_flags), in this order (avx512_fp16 since issue 41: a run
recorded before it names no AVX512-FP16, whatever its CPU had). core/isa_units.py names the units they give."""


def cpuinfo_text() -> str:
    """/proc/cpuinfo, the one place the CPU's model and flags are read from: through core/host_facts.py, so a test
    can replay another host's."""
    return current().cpuinfo()


def cpu_model(text: str | None = None) -> str:
    text = cpuinfo_text() if text is None else text
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else platform.processor() or "unknown"


def cpu_flags(text: str | None = None) -> set[str]:
    text = cpuinfo_text() if text is None else text
    match = re.search(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
    return set(match.group(1).split()) if match else set()


def isa_flags(text: str | None = None) -> list[str]:
    """The flags of ISA_RECORDED the CPU has, in that order (run.json's host isa_flags)."""
    flags = cpu_flags(text)
    return [f for f in ISA_RECORDED if f in flags]


@dataclass(frozen=True)
class Topology:
    """This host's CPUs: logical and physical, whether SMT is on, and the CPUs this process may run on."""

    logical_cpus: int
    physical_cores: int
    smt: bool
    affinity: list[int]


def topology() -> Topology:
    import psutil

    logical = psutil.cpu_count(logical=True) or 0
    physical = psutil.cpu_count(logical=False) or logical
    return Topology(logical, physical, logical > physical, sorted(os.sched_getaffinity(0)))


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def hwprof_cache_or_none() -> Path | None:
    """hwprof's cache folder for what is kept per torch build, None where the environment names none that can be
    used (hwprof.core.torch_build)."""
    from hwprof.core.envvars import hwprof_cache

    try:
        return hwprof_cache()
    except (OSError, ValueError):
        return None


def host_info() -> HostDoc:
    """run.json "host" of this machine."""
    cpuinfo = cpuinfo_text()
    cpus = topology()
    return HostDoc.of(
        hostname=platform.node(),
        cpu_model=cpu_model(cpuinfo),
        logical_cpus=cpus.logical_cpus,
        physical_cores=cpus.physical_cores,
        smt=cpus.smt,
        affinity=cpus.affinity,
        isa_flags=isa_flags(cpuinfo),
        governor=_read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") or "unreadable",
        kernel=platform.release(),
        os=platform.platform(),
        perf_event_paranoid=current().perf_event_paranoid(),
        python=platform.python_version(),
        torch=torch_build(hwprof_cache_or_none(), cpuinfo),
        packages=package_versions(),
    )
