"""Shipping this hwprof to every node of a Ray cluster, and telling which nodes can run it.

hwprof goes to the nodes as a Ray runtime_env `py_modules` entry: the package directory, which Ray zips, uploads
once to the cluster (keyed by a hash of its content) and unpacks once per node, first on the workers' PYTHONPATH.
PYTHONPATH is in the environment, so the point's `hwprof collect` (`python -P -m hwprof`, -P drops only the
current directory) and its pass workers, which inherit the environment (hwprof/session/pass_process.py), import the
shipped copy too. A .whl in py_modules would not do: Ray installs it with `pip install WHEEL --target=DIR`, dependencies
included (torch and the rest downloaded on every node).

The directory is assembled here from the imported package: an installed wheel holds hwprof/collectors inside
hwprof/, a checkout (editable install) keeps it in ./collectors. The copy is made once per content (cached) and
leaves out __pycache__, so that the hash, and Ray's upload, change only when the code does. Beside it goes a
dist-info holding the distribution's METADATA, a second py_modules entry: without it importlib.metadata on a
node without hwprof says "not installed", and the run records that instead of the version.

hwprof's own dependencies (torch, ultralytics, ...) are not shipped: each node is asked (by the probe task,
hwprof.sweep.ray_point.describe_node) which of them it has, at the driver's versions (importlib.metadata).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from importlib import metadata
from pathlib import Path

from hwprof.core.envvars import hwprof_cache, package_dir
from hwprof.schema.codec import JsonObject

DIST = "hwprof"
SKIP_DIRS = {"__pycache__"}
SKIP_SUFFIXES = {".pyc", ".pyo"}
KEEP_S = 86400.0
JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"
"""Set by Ray's job supervisor for a submitted job's entrypoint: the job's runtime_env, among others."""
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def cache_root() -> Path:
    return hwprof_cache() / "ray_env"


def _package_files() -> dict[str, bytes]:
    """Path -> content of every file to ship: the hwprof package as imported here (collectors included) under
    hwprof/, and its distribution's METADATA under hwprof-VERSION.dist-info/, so that importlib.metadata on the
    node gives this version (the run's recorded versions read it)."""
    import hwprof.collectors

    root = package_dir()
    collectors = Path(hwprof.collectors.__file__).resolve().parent
    trees = [(DIST, root)] if collectors.parent == root else [(DIST, root), (f"{DIST}/collectors", collectors)]
    files: dict[str, bytes] = {}
    for prefix, tree in trees:
        for dirpath, dirnames, filenames in os.walk(tree):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in filenames:
                if Path(name).suffix not in SKIP_SUFFIXES:
                    path = Path(dirpath, name)
                    files[f"{prefix}/{path.relative_to(tree)}"] = path.read_bytes()
    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:  # hwprof imported from a path, not installed: no version to give
        return files
    files[f"{DIST}-{dist.version}.dist-info/METADATA"] = (dist.read_text("METADATA") or "").encode()
    return files


def shipped_dirs() -> list[Path]:
    """The directories that hold this hwprof as installed from a wheel (the package, and its dist-info), made
    once per content in cache_root(); a tree unused for KEEP_S is removed (not at once: another sweep, from
    another checkout, may be shipping its own)."""
    files = _package_files()
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0" + files[rel] + b"\0")
    key = digest.hexdigest()[:16]
    root = cache_root()
    if not (root / key).is_dir():
        root.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        for rel, content in files.items():
            (partial / rel).parent.mkdir(parents=True, exist_ok=True)
            (partial / rel).write_bytes(content)
        try:
            partial.rename(root / key)
        except OSError:  # another sweep made the same tree meanwhile
            shutil.rmtree(partial, ignore_errors=True)
    os.utime(root / key)
    for old in root.iterdir():
        if old.name != key and time.time() - old.stat().st_mtime > KEEP_S:
            shutil.rmtree(old, ignore_errors=True)
    return sorted(root / key / top for top in {rel.partition("/")[0] for rel in files})


def hwprof_runtime_env() -> JsonObject:
    """The Ray runtime_env that makes this exact hwprof importable on every node of the cluster (for ray.init,
    whose tasks inherit it, and for a Ray Job's submission)."""
    return {"py_modules": [str(d) for d in shipped_dirs()]}


def driver_runtime_env() -> JsonObject | None:
    """The runtime_env for the sweep's ray.init: hwprof_runtime_env(), except in the driver of a submitted Ray
    Job whose runtime_env already has py_modules (hwprof_runtime_env() given at submission): its tasks inherit
    the job's, and Ray refuses to merge a second py_modules into it."""
    job = os.environ.get(JOB_CONFIG_ENV)
    if job and (json.loads(job).get("runtime_env") or {}).get("py_modules"):
        return None
    return hwprof_runtime_env()


def _public(version: str) -> str:
    """2.6.0+cpu -> 2.6.0: a CUDA build of the same torch on a GPU node measures the same hwprof."""
    return version.partition("+")[0]


def requirements() -> dict[str, str]:
    """hwprof's own dependencies (its extras left out) and the versions installed here, for the node probe."""
    wanted: dict[str, str] = {}
    for req in metadata.requires(DIST) or []:
        match = _NAME.match(req)
        if match is None or "extra ==" in req.partition(";")[2]:
            continue
        name = match.group(1)
        try:
            wanted[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # not installed on the driver either: not a reason to exclude a node
    return wanted


def missing_here(wanted: dict[str, str]) -> list[str]:
    """On a node: each dependency it lacks, or has at another version than the driver's, as
    "torch (not installed; the driver has 2.6.0)"."""
    found = []
    for name, want in sorted(wanted.items()):
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            found.append(f"{name} (not installed; the driver has {want})")
            continue
        if _public(have) != _public(want):
            found.append(f"{name} (version {have}; the driver has {want})")
    return found


def install_fix(missing: list[str], wanted: dict[str, str]) -> str:
    """The one command that gives the node what it lacks: `pip install 'torch==2.6.0' ...`."""
    names = [m.partition(" ")[0] for m in missing]
    return "pip install " + " ".join(f"'{n}=={_public(wanted[n])}'" for n in names if n in wanted)


def one_line(text: str) -> str:
    """Ray's error text for a console line: ANSI escapes out, the first non-empty line."""
    lines = [line.strip() for line in ANSI.sub("", text).splitlines() if line.strip()]
    return lines[0] if lines else ""


def _module_fix(module: str, wanted: dict[str, str]) -> str:
    """`pip install 'psutil==7.0.0'` for a module of one of hwprof's dependencies, else a plain install."""
    dists = dict.fromkeys(metadata.packages_distributions().get(module, []))
    pins = [f"'{d}=={_public(wanted[d])}'" for d in dists if d in wanted]
    return "pip install " + (" ".join(pins) if pins else module)


def probe_failure(exc: BaseException, wanted: dict[str, str]) -> str:
    """Why a node's probe task failed, and the fix, as one line: the module a node could not import named,
    Ray's failure to set up the runtime_env said so, and never Ray's ANSI-coloured traceback header."""
    text = ANSI.sub("", str(exc))
    missing = re.search(r"No module named '([^']+)'", text)
    if missing:
        module = missing.group(1).partition(".")[0]
        return f"it cannot import {module} (ModuleNotFoundError); fix: on that node, `{_module_fix(module, wanted)}`"
    cause = getattr(exc, "cause", None)
    if type(exc).__name__ == "RuntimeEnvSetupError" or "runtime_env" in type(cause).__name__.lower():
        return f"Ray could not set up hwprof's runtime_env there: {_last_line(text)}"
    if isinstance(cause, BaseException):
        return f"its probe failed: {type(cause).__name__}: {one_line(str(cause))}"
    return f"its probe failed: {type(exc).__name__}: {_last_line(text)}"


def _last_line(text: str) -> str:
    """The last non-empty line of a traceback: the exception and its message."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
