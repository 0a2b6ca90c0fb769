"""Which replacement malloc libraries this host has, for the allocator candidates of `hwprof advise`.

A library is found in the dynamic linker's cache (`ldconfig -p`) or, where ldconfig cannot be run, at the
paths Debian and Ubuntu install it to. The advised variant loads it with LD_PRELOAD; one not found is kept as
a candidate that is not run, with the package that installs it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")


@dataclass(frozen=True)
class MallocLib:
    """A malloc that replaces glibc's through LD_PRELOAD."""

    name: str
    """jemalloc or tcmalloc."""
    sonames: tuple[str, ...]
    """The shared objects that provide it, preferred first."""
    install: str
    """The fix where none is found (Debian package names, checked with apt-cache)."""


MALLOC_LIBS = (
    MallocLib("jemalloc", ("libjemalloc.so.2",), "apt-get install libjemalloc2"),
    MallocLib(
        "tcmalloc",
        ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4"),
        "apt-get install libtcmalloc-minimal4 (or libgoogle-perftools4, the full tcmalloc)",
    ),
)

Finder = Callable[[Iterable[str]], dict[str, str]]
"""sonames -> {soname: path} of those found."""


def ldconfig_paths(sonames: Iterable[str]) -> dict[str, str]:
    """The paths `ldconfig -p` gives for these sonames, then the usual directories."""
    wanted = set(sonames)
    found: dict[str, str] = {}
    ldconfig = shutil.which("ldconfig") or ("/sbin/ldconfig" if Path("/sbin/ldconfig").exists() else None)
    if ldconfig:
        try:
            out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        entries = re.findall(r"^\s*(\S+) \(([^)]*)\) => (\S+)$", out, re.MULTILINE)
        for soname, _, path in sorted(entries, key=lambda e: "64" not in e[1]):  # a 64-bit build first
            if soname in wanted:
                found.setdefault(soname, path)
    for soname in wanted - found.keys():
        path = next((f"{d}/{soname}" for d in LIB_DIRS if Path(d, soname).is_file()), None)
        if path:
            found[soname] = path
    return found


def find_malloc_libs(finder: Finder = ldconfig_paths) -> dict[str, str]:
    """Each replacement malloc -> the path of its preferred library found, or "" where none is installed."""
    found = finder([s for lib in MALLOC_LIBS for s in lib.sonames])
    return {lib.name: next((found[s] for s in lib.sonames if s in found), "") for lib in MALLOC_LIBS}
