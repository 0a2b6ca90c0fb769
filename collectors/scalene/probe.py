"""Whether this environment's Scalene can run the Scalene pass: the 2.x CLI with the options the collector passes,
importable (where a dependency is missing: the command that installs it at the version Scalene requires), and its
allocator shim for memory mode; probed once and kept in hwprof's cache while its key holds."""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.collectors.base import Capability

from hwprof.schema.probes import ScaleneProbe

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig

NEEDED_OPTIONS = ("--off", "--profile-all", "--profile-only", "--profile-exclude", "--no-stacks")
"""The options of `scalene run` the collector passes (ScaleneCollector.wrap_command)."""


def scalene_command(config: RunConfig, python: str) -> list[str] | None:
    """How to start Scalene: extra["scalene_path"] (an executable), else `python -m scalene`."""
    explicit = config.extra.get("scalene_path")
    if explicit:
        found = shutil.which(str(explicit))
        return [found] if found else None
    if python == sys.executable:
        return [python, "-P", "-m", "scalene"] if importlib.util.find_spec("scalene") else None
    return [python, "-P", "-m", "scalene"]


def kept_probe(command: tuple[str, ...], memory: bool) -> Capability:
    """This environment's Scalene probed once and kept in hwprof's cache (hwprof.core.kept) while its key holds:
    Scalene's version and folder, the command, this Python and its PYTHONPATH, the memory option and whether the
    memory profiler's shim (libscalene.so) is there, and the options the pass passes (NEEDED_OPTIONS: a new one is
    probed anew). The probe starts Scalene's CLI (1.8 CPU-seconds of every
    collect that plans the Scalene pass on a 2-CPU VM); one that failed runs again."""
    from hwprof.core.host import hwprof_cache_or_none
    from hwprof.core.kept import kept, key_of

    spec = importlib.util.find_spec("scalene")
    try:
        version = metadata.version("scalene")
    except metadata.PackageNotFoundError:
        version = None
    if spec is None or not spec.origin or version is None:
        key = None
    else:
        shim = (Path(spec.origin).parent / "libscalene.so").exists()
        env = [f"{k}={os.environ.get(k, '')}" for k in ("PYTHONPATH", "PYTHONHOME")]  # what Scalene's CLI imports
        key = key_of(
            [version, spec.origin, sys.executable, *command, f"memory={memory}", f"shim={shim}", *env, *NEEDED_OPTIONS]
        )
    return kept(
        hwprof_cache_or_none(),
        "scalene-probe",
        key,
        lambda: probe_cli(command, memory),
        load=lambda data: Capability.ok(details=ScaleneProbe.from_json(data, "the cache", "probe.")),
        dump=lambda found: found.details.to_json(),
        keep=lambda found: found.available,
    )


@functools.cache
def probe_cli(command: tuple[str, ...], memory: bool) -> Capability:
    """Scalene's `run --help-advanced` must offer the options this collector uses (the 2.x CLI)."""
    try:
        done = subprocess.run([*command, "run", "--help-advanced"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Capability.unavailable(f"scalene could not run: {exc}", "pip install 'scalene>=2.4'")
    text = done.stdout + done.stderr
    last = (text.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
    if done.returncode != 0 and last.startswith(IMPORT_ERRORS):
        return Capability.unavailable(f"scalene is installed but cannot be imported: {last}", import_fix(last, command))
    missing = [opt for opt in NEEDED_OPTIONS if opt not in text]
    if done.returncode != 0 or missing:
        why = f"options {', '.join(missing)} missing" if missing else last
        return Capability.unavailable(
            f"scalene's `run` command is not the 2.x CLI ({why})", "pip install 'scalene>=2.4'"
        )
    if memory:
        spec = importlib.util.find_spec("scalene")
        origin = Path(spec.origin).parent if spec and spec.origin else None
        if origin is None or not (origin / "libscalene.so").exists():
            return Capability.unavailable(
                "Scalene's allocator shim libscalene.so is missing (memory profiling)",
                "pip install --force-reinstall 'scalene>=2.4' (x86-64/arm64 Linux), or run without memory",
            )
    return Capability.ok(details=ScaleneProbe.of(command=" ".join(command)))


IMPORT_ERRORS = ("ModuleNotFoundError: ", "ImportError: ")
REINSTALL = "pip install --force-reinstall 'scalene>=2.4'"


def import_fix(error: str, command: tuple[str, ...]) -> str:
    """The command that installs what scalene's import lacks: the missing dependency at the version
    scalene requires (from its metadata, in this interpreter), else a reinstall of scalene and its
    dependencies."""
    found = re.search(r"No module named '([\w.]+)'", error)
    if found is None:
        return REINSTALL
    module = found.group(1).split(".")[0]
    dists = {_dist_key(d) for d in metadata.packages_distributions().get(module, [module])}
    try:
        requires = metadata.requires("scalene") or []
    except metadata.PackageNotFoundError:
        requires = []
    for requirement in requires:
        name = re.match(r"[A-Za-z0-9._-]+", requirement)
        if name and _dist_key(name.group(0)) in dists and "extra ==" not in requirement:
            spec = requirement.split(";")[0].strip()
            python = command[0] if command[1:3] == ("-P", "-m") else "python"
            return f"{python} -m pip install '{spec}'"
    return REINSTALL


def _dist_key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
