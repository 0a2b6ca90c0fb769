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
    cache = cache_problem()
    if cache is not None:
        raise EnvVarError(cache)
    normalise_cache_home()


def normalise_cache_home() -> None:
    """$XDG_CACHE_HOME as every library of this process and its children reads it: normalised (matplotlib,
    torch and others make their cache folder with the raw path, so `missing/..` made `missing`), and unset
    where relative (invalid by the XDG spec: they would write into the working directory)."""
    global _CACHE_NOTE
    base = os.environ.get(XDG_CACHE_HOME, "")
    if not base:
        return
    _CACHE_NOTE = cache_note()
    if os.path.isabs(base):
        os.environ[XDG_CACHE_HOME] = os.path.normpath(base)
    else:
        del os.environ[XDG_CACHE_HOME]


XDG_CACHE_HOME = "XDG_CACHE_HOME"
NAME_MAX = 255
"""The longest name of one path component on Linux's file systems (and PATH_MAX, 4096, for the whole)."""


def cache_problem() -> str | None:
    """Why $XDG_CACHE_HOME cannot hold hwprof's cache, naming it (one line with the fix); None when it can, or is
    unset, empty or relative (ignored, as the XDG spec says: cache_note says so)."""
    base = os.environ.get(XDG_CACHE_HOME, "")
    if not os.path.isabs(base):
        return None
    why = None
    if "\n" in base or "\r" in base or any(not c.isprintable() for c in base):
        why = "holds a control character"
    elif len(os.fsencode(base)) > 4000 or any(len(os.fsencode(p)) > NAME_MAX for p in base.split("/")):
        why = "is too long for a path"
    elif os.path.exists(os.path.normpath(base)) and not os.path.isdir(os.path.normpath(base)):
        why = "is not a directory"
    if why is None:
        return None
    return f"{XDG_CACHE_HOME}={shown(base)} {why}; fix: unset {XDG_CACHE_HOME} or point it at a directory (~/.cache)"


_CACHE_NOTE: str | None = None
"""cache_note before normalise_cache_home changed the variable."""


def cache_note() -> str | None:
    """Why $XDG_CACHE_HOME was not used as it stands: ignored (relative) or normalised (a `..` in it)."""
    if _CACHE_NOTE is not None:
        return _CACHE_NOTE
    base = os.environ.get(XDG_CACHE_HOME, "")
    if base and not os.path.isabs(base):
        return f"{XDG_CACHE_HOME}={shown(base)} ignored: the XDG Base Directory spec says a relative path is invalid"
    if base and os.path.normpath(base) != base.rstrip("/"):
        return f"{XDG_CACHE_HOME}={shown(base)} read as {os.path.normpath(base)}"
    return None


def environment_warning(collecting: bool) -> str | None:
    """Before a command: the variables it reads checked (EnvVarError, one line, for the first unusable one; the
    HWPROF_* overrides where it probes or runs collectors, XDG_CACHE_HOME for every command), and the warning
    to print where $XDG_CACHE_HOME is ignored (None where there is none). The command line and the library
    (hwprof.collect, hwprof.advise) call it alike."""
    check_environment(COLLECTING if collecting else ())
    note = cache_note()
    return f"warning: {note}" if note is not None and "ignored" in note else None


def cache_home() -> Path:
    """$XDG_CACHE_HOME, or ~/.cache when it is unset, empty or relative: the XDG Base Directory spec says
    a relative path is invalid and must be ignored (it would put a cache folder in the working directory).
    The path is normalised before anything is made in it: `a/missing/../..` is `a`'s parent, and no folder is
    created along a `..` (mkdir -p of the raw path made `missing` to resolve it). EnvVarError (one line naming
    the variable) where it cannot hold a cache."""
    problem = cache_problem()
    if problem is not None:
        raise EnvVarError(problem)
    base = os.environ.get(XDG_CACHE_HOME, "")
    return Path(os.path.normpath(base)) if os.path.isabs(base) else Path.home() / ".cache"


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
