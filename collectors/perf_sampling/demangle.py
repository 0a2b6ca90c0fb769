"""C++ symbols demangled once each by binutils' c++filt, not by `perf script`.

Why: perf demangles every symbol of each library it loads, and libtorch_cpu holds hundreds of thousands: on the
2-vCPU Xeon, `perf script` over a kernels pass's perf.data (yolov8n at 256, 8,127 samples) took 3.8 s, 1.0 s with
`--no-demangle`, while its samples name about a thousand symbols, which c++filt demangles in milliseconds.
`c++filt -p` (no parameter types) writes what perf writes; where perf.data has several symbols at one address
(lambdas folded into one body) perf may name another of them. Without c++filt, perf demangles as before.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable

MANGLED_PREFIX = "_Z"


def cxxfilt() -> str | None:
    return shutil.which("c++filt")


def script_flags() -> list[str]:
    """perf script's flag that leaves the symbols mangled, where c++filt can demangle them after."""
    return ["--no-demangle"] if cxxfilt() else []


def demangled(names: Iterable[str]) -> dict[str, str] | None:
    """Each mangled name among `names` -> its demangled name (those c++filt left alone map to themselves); None
    where c++filt is missing or failed (the caller runs perf script again, demangling)."""
    binary = cxxfilt()
    mangled = sorted({name for name in names if name.startswith(MANGLED_PREFIX)})
    if not mangled:
        return {}
    if binary is None:
        return None
    try:
        text = "\n".join(mangled) + "\n"
        done = subprocess.run([binary, "-p"], input=text, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != len(mangled):
        return None
    return dict(zip(mangled, lines, strict=True))
