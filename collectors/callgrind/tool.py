"""Finding a usable valgrind and building the callgrind command line (no torch, no I/O beyond probing)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hwprof.core.envvars import VALGRIND, hwprof_cache
from hwprof.core.uservalue import shown

MIN_VERSION = (3, 23)
"""3.19 (Debian 12) emulates FMA about 1500x slower than native; 3.23 fixed it."""
INSTALL_FIX = (
    "bash scripts/install_valgrind.sh (Debian 13's valgrind 3.24, unpacked; or a distribution valgrind >= 3.23)"
)


def cache_dir() -> Path:
    """Where scripts/install_valgrind.sh unpacks valgrind (read at each probe: the environment of the moment)."""
    return hwprof_cache() / "valgrind"


@dataclass(frozen=True)
class Valgrind:
    binary: str
    version: tuple[int, int]
    lib: str | None
    """VALGRIND_LIB for an unpacked package (its usr/libexec/valgrind), None for an installed one."""

    def env(self) -> dict[str, str]:
        return {"VALGRIND_LIB": self.lib} if self.lib else {}


ENV_VALGRIND = VALGRIND.name
ENV_FIX = VALGRIND.fix


def candidates() -> list[str]:
    """The cached unpacked valgrind, then PATH's (HWPROF_VALGRIND, when set, is the only one: find_valgrind)."""
    out = [str(cache_dir() / "usr" / "bin" / "valgrind")]
    found = shutil.which("valgrind")
    if found:
        out.append(found)
    return list(dict.fromkeys(out))


def _lib_of(binary: str) -> str | None:
    lib = Path(binary).resolve().parent.parent / "libexec" / "valgrind"
    return str(lib) if (lib / "callgrind-amd64-linux").exists() and not lib.is_relative_to("/usr/libexec") else None


def version_of(binary: str, lib: str | None) -> tuple[int, int] | None:
    env = {**os.environ, **({"VALGRIND_LIB": lib} if lib else {})}
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, env=env).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"valgrind-(\d+)\.(\d+)", out)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _check(binary: str) -> tuple[Valgrind | None, str]:
    lib = _lib_of(binary)
    version = version_of(binary, lib)
    if version is None:
        name = shown(binary)
        return None, f"{name} does not run as valgrind (`{name} --version` does not say valgrind-X.Y)"
    if version < MIN_VERSION:
        slow = "FMA emulation about 1500x slower than native"
        return None, f"{shown(binary)} is valgrind {version[0]}.{version[1]} ({slow})"
    return Valgrind(binary, version, lib), ""


def find_valgrind() -> tuple[Valgrind | None, str]:
    """The first usable valgrind, or None and why not. HWPROF_VALGRIND, when set, is the only candidate:
    an override that does not work is reported with the variable's name, never replaced by another valgrind."""
    override = VALGRIND.value()
    if override:
        problem = VALGRIND.problem()
        if problem:
            return None, problem
        found, why = _check(override)
        return found, f"{ENV_VALGRIND}={shown(override)}: {why}" if found is None else ""
    seen = []
    for binary in candidates():
        if not Path(binary).exists():
            continue
        found, why = _check(binary)
        if found is not None:
            return found, ""
        seen.append(why)
    return None, "; ".join(seen) or "valgrind is not installed"


def _sysfs_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip().upper()
    except OSError:
        return None
    scale = 1024 if text.endswith("K") else 1024 * 1024 if text.endswith("M") else 1
    digits = text.rstrip("KM")
    return int(digits) * scale if digits.isdigit() else None


def last_level_geometry(cpu_cache: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> str:
    """--LL=size,assoc,line from sysfs (valgrind read this VM's LLC as 256 MiB direct-mapped), sets a power of two."""
    best: tuple[int, int, int] | None = None
    for index in sorted(cpu_cache.glob("index*")):
        size = _sysfs_int(index / "size")
        ways = _sysfs_int(index / "ways_of_associativity")
        line = _sysfs_int(index / "coherency_line_size")
        level = _sysfs_int(index / "level")
        if size and ways and line and level and (best is None or level >= 3):
            best = (size, ways, line)
    size, ways, line = best or (32 * 1024 * 1024, 16, 64)
    sets = max(size // (ways * line), 1)
    sets = 1 << (sets.bit_length() - 1)
    return f"{sets * ways * line},{ways},{line}"


def callgrind_command(valgrind: Valgrind, out_file: Path, command: list[str]) -> list[str]:
    """valgrind's callgrind around the worker: instrumentation off until the pass starts measuring,
    every dump in one file, simulated caches and branch predictors, address randomisation off."""
    env = shutil.which("env") or "/usr/bin/env"
    setarch = shutil.which("setarch")
    no_aslr = [setarch, os.uname().machine, "-R"] if setarch else []
    settings = [f"{k}={v}" for k, v in valgrind.env().items()]
    settings += ["OMP_WAIT_POLICY=PASSIVE", "PYTHONHASHSEED=0"]
    return [
        env,
        *settings,
        *no_aslr,
        valgrind.binary,
        "--tool=callgrind",
        "--instr-atstart=no",
        "--combine-dumps=yes",
        "--separate-threads=no",
        "--cache-sim=yes",
        "--branch-sim=yes",
        "--I1=32768,8,64",
        "--D1=32768,8,64",
        f"--LL={last_level_geometry()}",
        f"--callgrind-out-file={out_file}",
        *command,
    ]
