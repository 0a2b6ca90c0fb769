"""Environment variables hwprof reads: the cache folder, every HWPROF_* override, and the one error for an
unusable override.

An override the user set and that cannot be used is an error naming the variable (EnvVarError, a
ValueError: exit 2, one line), never a silent fall-back to the default it was set to replace. Every HWPROF_*
variable is declared here (PathVariable) and checked in one place, `check_environment`, before anything
runs: a value with a newline or a NUL, one too long for a path, or one that is not the directory or file
it must be is refused with the variable's name, the value (escaped and cut: core.uservalue.shown), what is
wrong and the fix. Whether a well-formed value then works (a valgrind that runs, a powercap tree with zones)
is the probe's business, which names the variable too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hwprof.core.uservalue import path_problem, shown


class EnvVarError(ValueError):
    """An environment variable is set to something hwprof cannot use; the message names it and the fix."""


@dataclass(frozen=True)
class PathVariable:
    """A HWPROF_* variable that names a directory or a file."""

    name: str
    directory: bool
    """It must name a directory (else a file)."""
    what: str
    """What it must name, as the message says it: "a powercap directory"."""
    example: str
    """Where one usually is, or how to get one: the fix's parenthesis."""
    executable: bool = False

    @property
    def fix(self) -> str:
        return f"unset {self.name} or point it at {self.what} ({self.example})"

    def value(self) -> str | None:
        """The variable's value; None when it is unset or empty (an empty override is no override)."""
        return os.environ.get(self.name) or None

    def problem(self) -> str | None:
        """Why the variable's value cannot be used, naming it; None when it is unset or can be."""
        value = self.value()
        if value is None:
            return None
        why = _path_problem(value, "a directory" if self.directory else "a file", self.executable)
        if why is None:
            return None
        return f"{self.name}={shown(value)} {why}, not {self.what}"


def _path_problem(value: str, wanted: str, executable: bool) -> str | None:
    """What is wrong with `value` as the path of `wanted` ("a directory", "a file"), or None."""
    if "\n" in value or "\r" in value:
        return "holds a newline"
    if any(not c.isprintable() for c in value):
        return "holds a control character"
    problem = path_problem(value, wanted)
    if problem:
        return problem
    if executable and not os.access(value, os.X_OK):
        return "is a file without execute permission"
    return None


POWERCAP_ROOT = PathVariable("HWPROF_POWERCAP_ROOT", True, "a powercap directory", "/sys/class/powercap")
EVENT_SOURCE_ROOT = PathVariable(
    "HWPROF_EVENT_SOURCE_ROOT", True, "perf's event source directory", "/sys/bus/event_source/devices"
)
VALGRIND = PathVariable(
    "HWPROF_VALGRIND",
    False,
    "valgrind >= 3.23",
    "bash scripts/install_valgrind.sh unpacks one",
    executable=True,
)
NODE = PathVariable("HWPROF_NODE", False, "Node.js 18 or later", "e.g. /usr/bin/node", executable=True)
PERFETTO_UI_DIR = PathVariable(
    "HWPROF_PERFETTO_UI_DIR", True, "a Perfetto UI build folder", "with engine_bundle.js and trace_processor.wasm"
)
COLLECTING = (POWERCAP_ROOT, EVENT_SOURCE_ROOT, VALGRIND)
"""What collect, advise, sweep and doctor read (the collectors' probes and passes)."""
TRACE_PROCESSOR = (NODE, PERFETTO_UI_DIR)
"""What the offline trace processor reads (hwprof.trace.processor: tests and scripts/)."""
EVERY = COLLECTING + TRACE_PROCESSOR


def check_environment(variables: tuple[PathVariable, ...] = EVERY) -> None:
    """EnvVarError (one line: the variable, its value shown, what is wrong, the fix) for the first variable
    that is set and unusable."""
    for variable in variables:
        problem = variable.problem()
        if problem:
            raise EnvVarError(f"{problem}; fix: {variable.fix}")


def cache_home() -> Path:
    """$XDG_CACHE_HOME, or ~/.cache when it is unset, empty or relative: the XDG Base Directory spec says
    a relative path is invalid and must be ignored (it would put a cache folder in the working directory)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    return Path(base) if os.path.isabs(base) else Path.home() / ".cache"


def hwprof_cache() -> Path:
    """Where every hwprof cache lives: CPU and GPU peaks, the model catalogue, the unpacked valgrind."""
    return cache_home() / "hwprof"


def package_dir() -> Path:
    """The folder of the hwprof package as imported here (what a sweep ships to Ray, what Scalene profiles),
    found without importing `hwprof` itself: its __init__ is the library's face, the top layer."""
    import importlib.util

    spec = importlib.util.find_spec("hwprof")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the hwprof package cannot be found")
    return Path(next(iter(spec.submodule_search_locations))).resolve()
