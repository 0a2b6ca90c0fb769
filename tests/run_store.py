"""Real runs built once per suite and shared by the tests that only read them (issue 65).

A test that reads a finished run asks for one of RECIPES by name and gets its own copy (tests write into runs:
report, trace, advise, edited run.json). The first test that asks, in any pytest process of the suite (the
phases of scripts/run_tests.py, each xdist worker), builds it with a real `hwprof collect` under a file lock;
the others wait for it and copy. Only tests whose subject is a collect's own course (signals, faults, locks, a
program's ends) still make their own.

The store's folder is $HWPROF_TEST_RUN_STORE (scripts/run_tests.py makes one per suite run, so that every phase
shares it); without it, a folder of this pytest run's temporary tree (shared by its xdist workers only).
A recipe pins its thread count: a run built on a pinned one-CPU worker reads as one built unpinned.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

STORE_ENV = "HWPROF_TEST_RUN_STORE"


@dataclass(frozen=True)
class Recipe:
    """A stored run: `hwprof collect ARGS` (no --out), and what its readers check in it."""

    args: tuple[str, ...]
    readers: str


RECIPES: dict[str, Recipe] = {
    "small": Recipe(
        (
            "--model", "yolov8n", "--imgsz", "64", "--iters", "3", "--warmup", "1", "--threads", "2",
            "--only", "timing,flops,torch_profiler,pyspy",
        ),
        "the CLI's run.json and report, the docs' shown commands, the allocator advise's baseline, the notebook's "
        "second run, the built-in run a program's layers are compared with (test_program_layers), the size of the "
        "tmpfs that a collect of the same options fills in its report (test_disk_full): a complete run "
        "of the built-in pipeline with the timing, layers and trace passes",
    ),
    "layers": Recipe(
        (
            "--model", "yolov8n", "--imgsz", "64", "--iters", "10", "--warmup", "1", "--threads", "2",
            "--only", "timing,sysstat,perf_events,perf_sampling,torch_memory", "--perf-rate", "1000",
        ),
        "the counter tracks read back from the trace (sysstat, perf_events, perf's samples with periods, the "
        "allocator's live bytes), memory per layer against torch.profiler's own figures: the layers pass with its "
        "counters and memory, and the kernels pass at a fixed rate (not the auto plan's 60 s of forwards)",
    ),
    "program_detect": Recipe(
        (
            "--only", "timing", "--iters", "3", "--warmup", "1", "--threads", "2", "--no-report",
            "--", "python", str(Path(__file__).parent / "programs" / "breaks_at_import.py"),
            "--model", "yolov8n", "--img-size", "64", "--frames", "11",
        ),
        "a user's program measured call by call (test_programs), advise's refusal of its 12 calls and the same "
        "program failing at import under advise (test_program_advise_fit_real): detect_like.py "
        "(breaks_at_import.py with BREAK_AT_IMPORT unset) stopped after its measured calls",
    ),
}  # fmt: skip


def option(name: str, flag: str) -> str:
    """The value a recipe gives `flag` (e.g. "--imgsz")."""
    args = RECIPES[name].args
    return args[args.index(flag) + 1]


@dataclass(frozen=True)
class StoredRun:
    """A copy of a stored run for one test, with how its collect ended and what it printed."""

    path: Path
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    """The collect's wall time when it was built (once per suite, whichever test asked first)."""


def store_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    named = os.environ.get(STORE_ENV)
    if named:
        folder = Path(named)
    else:
        base = tmp_path_factory.getbasetemp()
        folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "run-store"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def store_lock(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """The store's folder, held under `name`'s lock: what is built in it while held is built once per suite, by
    whichever phase or xdist worker asks first."""
    folder = store_folder(tmp_path_factory)
    with (folder / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield folder


def _build(name: str, recipe: Recipe, entry: Path) -> None:
    if entry.exists():
        shutil.rmtree(entry)  # a build that died half-way
    entry.mkdir(parents=True)
    started = time.monotonic()
    at = recipe.args.index("--") if "--" in recipe.args else len(recipe.args)  # a program's words come last
    options, program = recipe.args[:at], recipe.args[at:]
    done = subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", "collect", *options, "--out", str(entry / "run"), *program],
        cwd=entry,
        text=True,
        capture_output=True,
        timeout=900,
        env={**os.environ, "COLUMNS": "120"},
    )
    record = {
        "name": name,
        "args": list(recipe.args),
        "returncode": done.returncode,
        "stdout": done.stdout,
        "stderr": done.stderr,
        "wall_s": round(time.monotonic() - started, 2),
    }
    (entry / "built.json.tmp").write_text(json.dumps(record))
    (entry / "built.json.tmp").rename(entry / "built.json")


def stored_run(tmp_path_factory: pytest.TempPathFactory, name: str, dest: Path) -> StoredRun:
    """A copy at `dest` of the stored run `name` (built now if no test of this suite built it yet)."""
    with store_lock(tmp_path_factory, name) as folder:
        entry = folder / name
        if not (entry / "built.json").exists():
            _build(name, RECIPES[name], entry)
    record = json.loads((entry / "built.json").read_text())
    if (entry / "run").exists():
        shutil.copytree(entry / "run", dest, symlinks=True)
    return StoredRun(dest, record["returncode"], record["stdout"], record["stderr"], record["wall_s"])
