"""hwprof: hardware-counter profiling of YOLO inference on CPUs.

As a library (docs/python-api.md): `hwprof.load(path)` reads a run directory into a `hwprof.Run` (its header,
the report's tables as polars DataFrames, its plots and report); `hwprof.collect(model=..., imgsz=..., ...)` and
`hwprof.advise(run)` run `hwprof collect` and `hwprof advise` from Python and return the run;
`hwprof.compare(a, b)` is `hwprof compare` as a table, and `hwprof.gate(base, new, fail_above="5%")` its
performance gate's verdict; `hwprof.run_sweep(models=[...], ...)` runs `hwprof sweep` (the name `hwprof.sweep`
is the package that runs it). A run directory that is missing, damaged or still being collected is
`hwprof.RunError`; a bad option is ValueError, each with the command line's one line.

Nothing heavy is imported by `import hwprof`: each name loads hwprof.api when it is first used.
"""

from __future__ import annotations

from hwprof.stage_api import stage as stage  # the public `hwprof.stage`: a module that imports nothing

# Neither importlib nor typing at import time: the `hwprof` console script imports this package before its
# entry point can handle Ctrl-C (hwprof.cli.entry), and typing alone took 6 ms of that window. Type checkers read
# a module-level TYPE_CHECKING as typing's.
TYPE_CHECKING = False

__version__ = "0.1.0"
__all__ = [
    "NotMeasured", "Run", "RunError", "__version__",
    "advise", "collect", "compare", "gate", "load", "run_sweep", "stage",
]  # fmt: skip

if TYPE_CHECKING:
    from typing import Any

    from hwprof.api.commands import advise, collect, compare, gate, run_sweep
    from hwprof.api.errors import RunError
    from hwprof.api.run import NotMeasured, Run, load

_WHERE = {
    "load": "hwprof.api.run",
    "Run": "hwprof.api.run",
    "NotMeasured": "hwprof.api.run",
    "RunError": "hwprof.api.errors",
    "collect": "hwprof.api.commands",
    "advise": "hwprof.api.commands",
    "compare": "hwprof.api.commands",
    "gate": "hwprof.api.commands",
    "run_sweep": "hwprof.api.commands",
}


def __getattr__(name: str) -> Any:
    """A public name, imported on first use (PEP 562) and then kept in the module."""
    if name not in _WHERE:
        raise AttributeError(f"module 'hwprof' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
