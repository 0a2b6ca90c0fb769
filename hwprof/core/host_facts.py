"""The facts of the host that hwprof's decisions depend on, read in one place: from this machine (MachineFacts), or
from a host recorded by scripts/record_host.py (RecordedHost), so that a test can replay another machine.

| fact | the machine | a recording (file in its folder) |
| --- | --- | --- |
| cpuinfo | /proc/cpuinfo | cpuinfo.txt |
| perf_event_paranoid | /proc/sys/kernel/perf_event_paranoid | paranoid.txt |
| is_root | this process's effective user is root | id.txt (`id`: the user it was recorded as) |
| powercap_root | /sys/class/powercap | its copy, sys/class/powercap (powercap.txt: `ls` of it) |
| event_source_root | /sys/bus/event_source/devices | its copy, sys/bus/event_source/devices |
| perf_path, perf_version | `perf` on PATH, `perf --version` | perf_version.txt |
| perf_stat_cycles | `perf stat -x , -e cycles,instructions true` | perf_stat_cycles.txt |
| energy_counter | None: perf's power events are opened | perf_power.txt, perf_psys.txt (perf stat -a) |
| openvino_capabilities | OpenVINO's CPU OPTIMIZATION_CAPABILITIES | openvino_facts.txt |
| torch_cpu | torch.backends.cpu.get_cpu_capability(), mkldnn | torch_facts.json |
| nvidia_driver | /dev/nvidiactl exists | nvidia.txt |

hwprof reads no cgroup CPU limit (its thread default is the CPUs this process may run on, core/config.py), so none
is a fact here. A recording's paths stand for the host's: a reason that names its copy of a sysfs folder names
`<folder>/sys/...` where the host said `/sys/...`. A fact the recording lacks raises NotRecorded.

Which facts are read: current(), the machine unless a test process replays another host (replaying); a child
process (a real collect's pass) always reads the machine.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import shutil
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")
POWERCAP = Path("/sys/class/powercap")
EVENT_SOURCE = Path("/sys/bus/event_source/devices")
NVIDIA_CTL = Path("/dev/nvidiactl")
PERF_STAT_CYCLES = ("stat", "-x", ",", "-e", "cycles,instructions", "true")
"""perf's arguments for whether the PMU counts (perf_sampling's check; the recorder runs the same)."""


@dataclass(frozen=True)
class TorchCpu:
    """What torch says of this CPU."""

    capability: str
    """torch.backends.cpu.get_cpu_capability(): the kernels' instruction set ("AVX512", "AVX2", "DEFAULT")."""
    mkldnn: bool
    """torch.backends.mkldnn.is_available()."""


class NotRecorded(LookupError):
    """A recorded host has no record of this fact."""


class HostFacts(ABC):
    """The host's answers to the questions hwprof asks of it."""

    @abstractmethod
    def cpuinfo(self) -> str:
        """/proc/cpuinfo's text ("" where it cannot be read)."""

    @abstractmethod
    def perf_event_paranoid(self) -> str | None:
        """kernel.perf_event_paranoid as its file says it; None where it cannot be read."""

    @abstractmethod
    def is_root(self) -> bool:
        """Whether hwprof runs as root (perf_event_paranoid does not apply to root)."""

    @abstractmethod
    def powercap_root(self) -> Path:
        """The folder the powercap zones are listed in."""

    @abstractmethod
    def event_source_root(self) -> Path:
        """The folder perf's PMUs are listed in (one folder each: type, format/, events/)."""

    @abstractmethod
    def perf_path(self) -> str | None:
        """The perf found on PATH; None: there is none."""

    @abstractmethod
    def perf_version(self, binary: str) -> str:
        """What `perf --version` prints."""

    @abstractmethod
    def perf_stat_cycles(self, binary: str) -> str:
        """What `perf stat -x , -e cycles,instructions true` prints on standard error (OSError or
        subprocess.TimeoutExpired where it cannot run)."""

    @abstractmethod
    def energy_counter(self, event: str) -> Callable[[], float] | None:
        """A replayed perf power event (`energy-psys`): a function giving its count in joules since it was made;
        None: open the machine's own counter."""

    @abstractmethod
    def openvino_capabilities(self) -> list[str]:
        """OpenVINO's CPU OPTIMIZATION_CAPABILITIES ("FP32", "BF16", ...); what import or ask raised, where they
        cannot be had."""

    @abstractmethod
    def torch_cpu(self) -> TorchCpu:
        """torch's CPU capability and whether oneDNN is there (ImportError without torch)."""

    @abstractmethod
    def nvidia_driver(self) -> bool:
        """Whether the NVIDIA driver's control device (/dev/nvidiactl) is there."""


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


class MachineFacts(HostFacts):
    """This machine, read as each fact is asked for."""

    def cpuinfo(self) -> str:
        return _read(CPUINFO) or ""

    def perf_event_paranoid(self) -> str | None:
        return _read(PARANOID)

    def is_root(self) -> bool:
        return os.geteuid() == 0

    def powercap_root(self) -> Path:
        return POWERCAP

    def event_source_root(self) -> Path:
        return EVENT_SOURCE

    def perf_path(self) -> str | None:
        return shutil.which("perf")

    def perf_version(self, binary: str) -> str:
        return subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()

    def perf_stat_cycles(self, binary: str) -> str:
        return subprocess.run([binary, *PERF_STAT_CYCLES], capture_output=True, text=True, timeout=30).stderr

    def energy_counter(self, event: str) -> Callable[[], float] | None:
        return None

    def openvino_capabilities(self) -> list[str]:
        return list(_openvino_capabilities())

    def torch_cpu(self) -> TorchCpu:
        import torch

        return TorchCpu(torch.backends.cpu.get_cpu_capability(), torch.backends.mkldnn.is_available())

    def nvidia_driver(self) -> bool:
        return NVIDIA_CTL.exists()


@functools.cache
def _openvino_capabilities() -> tuple[str, ...]:
    """Asked once per process: a Core of its own costs a plugin load."""
    from hwprof.core.runtime_names import import_runtime

    ov = import_runtime("openvino")
    return tuple(str(c) for c in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))


PERF_JOULES = re.compile(r"^\s*([\d.,]+)\s+Joules\s+power/([\w-]+)/", re.MULTILINE)
PERF_ELAPSED = re.compile(r"^\s*([\d.]+) seconds time elapsed", re.MULTILINE)
PERF_ENERGY_FILES = ("perf_power.txt", "perf_psys.txt")


def recorded_joules_per_s(text: str) -> dict[str, float]:
    """perf stat -a outputs of power events, one after another: event -> joules per second it counted."""
    rates: dict[str, float] = {}
    blocks = re.split(r"(?=Performance counter stats for)", text)
    for block in blocks:
        elapsed = PERF_ELAPSED.search(block)
        for joules, event in PERF_JOULES.findall(block):
            if elapsed and float(elapsed.group(1)) > 0:
                rates[event] = float(joules.replace(",", "")) / float(elapsed.group(1))
    return rates


class RecordedHost(HostFacts):
    """A host as scripts/record_host.py wrote it into a folder (tests/fixtures/hosts/NAME)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __repr__(self) -> str:
        return f"RecordedHost({self.folder.name})"

    def _text(self, name: str) -> str:
        path = self.folder / name
        if not path.is_file():
            raise NotRecorded(f"{self.folder.name} has no {name}")
        return path.read_text()

    def _sysfs(self, path: Path, listing: str) -> Path:
        """The recording's copy of a sysfs folder; where there is none, the path of one that does not exist if the
        host had none either (its listing says `No such file or directory`)."""
        copy = self.folder / path.relative_to("/")
        if not copy.is_dir() and "No such file or directory" not in self._text(listing):
            raise NotRecorded(f"{self.folder.name} has no copy of {path}")
        return copy

    def cpuinfo(self) -> str:
        return self._text("cpuinfo.txt").strip()

    def perf_event_paranoid(self) -> str | None:
        return self._text("paranoid.txt").strip() or None

    def is_root(self) -> bool:
        return self._text("id.txt").startswith("uid=0(")

    def powercap_root(self) -> Path:
        return self._sysfs(POWERCAP, "powercap.txt")

    def event_source_root(self) -> Path:
        return self._sysfs(EVENT_SOURCE, "event_source_devices.txt")

    def perf_path(self) -> str | None:
        return "perf" if self._text("perf_version.txt").startswith("perf version") else None

    def perf_version(self, binary: str) -> str:
        return self._text("perf_version.txt").strip()

    def perf_stat_cycles(self, binary: str) -> str:
        return self._text("perf_stat_cycles.txt")

    def energy_counter(self, event: str) -> Callable[[], float] | None:
        text = "".join((self.folder / n).read_text() for n in PERF_ENERGY_FILES if (self.folder / n).is_file())
        rates = recorded_joules_per_s(text)
        if event not in rates:
            raise NotRecorded(f"{self.folder.name} has no count of power/{event}/ ({', '.join(PERF_ENERGY_FILES)})")
        start, rate = time.monotonic(), rates[event]
        return lambda: rate * (time.monotonic() - start)

    def openvino_capabilities(self) -> list[str]:
        facts = ast.literal_eval(self._text("openvino_facts.txt").strip())
        listed = facts["OPTIMIZATION_CAPABILITIES"]
        return [str(c) for c in (ast.literal_eval(listed) if isinstance(listed, str) else listed)]

    def torch_cpu(self) -> TorchCpu:
        facts = json.loads(self._text("torch_facts.json"))
        return TorchCpu(str(facts["cpu_capability"]), bool(facts["mkldnn"]))

    def nvidia_driver(self) -> bool:
        first = self._text("nvidia.txt").splitlines()[0]
        return first.strip() == f"{NVIDIA_CTL}: present"


MACHINE = MachineFacts()
_replayed: HostFacts | None = None


def current() -> HostFacts:
    """The facts hwprof reads now: this machine's, unless this process replays another host."""
    return _replayed or MACHINE


def use(facts: HostFacts | None) -> HostFacts | None:
    """Read `facts` from now on in this process (None: the machine again); the facts read before."""
    global _replayed
    before, _replayed = _replayed, facts
    return before


@contextmanager
def replaying(facts: HostFacts) -> Iterator[HostFacts]:
    """Read `facts` inside the block, in this process only (a child process reads its machine)."""
    before = use(facts)
    try:
        yield facts
    finally:
        use(before)
