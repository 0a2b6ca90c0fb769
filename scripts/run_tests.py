"""tox's test command: the suite in two pytest processes at once, the Ray modules beside the rest.

Why two processes and not pytest-xdist: the tests that start local Ray clusters (about a fifth of the suite's
time, 310 of 1,517 s serially) spend part of it waiting on their nodes, while the rest are CPU-bound collects
with two torch threads on a 2-CPU host. xdist's two workers ran two such collects at once, OpenMP's spinning
threads doubled the CPU time, and the suite took longer (30.8 min against 25.3 serially, on one host). The Ray
modules share the side process (they may not run beside one another: a node's ports and processes are the
machine's). The main process runs first what loses least beside them (the modules with no slow test, then
BESIDE_RAY: processes started, stopped and failed more than computing), then the rest, and its tests that
compare timings (paired verdicts, neighbours named, sampled shares) last, once the Ray modules are done. Before
anything, hwprof's cache is filled once (warm_cache). Measured on fresh clones (`CI=true bash .ci/run`,
2 vCPUs): this split 1,466 s against 1,552-1,608 s serially; the Ray modules took 453 s beside the rest, which
lost about 190 s to them. Also tried: more modules in the side process at nice 19 (it starved, and ended after
the main one: slower than this); the Ray modules alone at nice 10 (no gain: 1,413 s against 1,374 at equal
priority, one fresh clone each; a niced process still preempts one thread of an OpenMP team).

With arguments (a test file, -k, -x ...), it is plain `pytest -m "not benchmark" ARGS`: the tests you name.
Exit status: the first non-zero of the two processes, else 0. Run from tests/ (tox's changedir).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

BASE = ["-m", "not benchmark", "--durations=15", "-p", "no:cacheprovider"]
RAY_MODULES = (
    "test_sweep_ray.py", "test_sweep_ray_env.py", "test_sweep_ray_record.py", "test_sweep_ray_sigterm.py",
    "test_sweep_job.py", "test_sweep_hosts.py",
)  # fmt: skip
LAST = (
    "test_advise_real.py", "test_allocator_advise_real.py", "test_program_advise_real.py", "test_gate_real.py",
    "test_gate_programs.py", "test_paired.py", "test_neighbours.py", "test_pass_cost.py", "test_pyspy.py",
    "test_perf_sampling.py",
)  # fmt: skip
"""Modules whose verdicts rest on timings or sampled shares: run after the rest of the main process."""
BESIDE_RAY = (
    "test_fault_signals.py", "test_program_ends.py", "test_program_faults.py", "test_early_signals.py",
    "test_env_overrides.py", "test_run_dir_faults.py", "test_child.py",
    "test_relative_paths.py", "test_image_summary.py", "test_api_errors.py", "test_user_values.py",
    "test_rlimits.py", "test_run_dir_lock.py", "test_worker_failures.py",
)  # fmt: skip
"""Run first in the main process, after the modules with no slow test, while the Ray modules run beside: their
processes start, stop and fail (imports and signals, one thread each) more than they compute. The modules whose
collects compute with two OpenMP threads lost most beside the Ray modules, whatever their priority: one thread
of the team preempted stalls the other at every barrier (fresh clone of d2340d9, beside them against alone:
test_disk_full's report test 67 s against 20.5, test_callgrind 64 against 33, the notebook 50 against 25)."""


def warm_cache() -> None:
    """hwprof's cache filled once, before anything else runs, as a user's is after a first `hwprof doctor --peaks`
    and `hwprof models`: this host's peaks for doctor's default thread count (collect's) and for one thread (the
    two the tests' collects use), and the model catalogue. Why: a collect without a cached peak measures one (8 s)
    and the cache keeps only a measurement made on a quiet host; with two pytest processes the host is rarely
    quiet, and on a fresh clone (empty cache) the collects of the first minutes each measured again (busy, not
    kept: 63 s in one run). A failure here is the tests' to find: not fatal."""
    for words in (["doctor", "--peaks"], ["doctor", "--peaks", "--threads", "1"], ["models"]):
        done = subprocess.run([sys.executable, "-P", "-m", "hwprof", *words], capture_output=True, text=True)
        lines = done.stdout.splitlines()
        said = next((line for line in lines if "GFLOP/s" in line), f"{len(lines)} lines printed")
        print(f"run_tests.py: hwprof {' '.join(words)}: exit {done.returncode}: {said.strip()}", flush=True)


def main(args: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest", *BASE]
    if args:
        return subprocess.call([*pytest, *args])
    tests = Path.cwd()
    modules = sorted(p.name for p in tests.glob("test_*.py"))
    missing = [m for m in (*RAY_MODULES, *LAST, *BESIDE_RAY) if m not in modules]
    if missing:
        sys.exit(f"run_tests.py: {', '.join(missing)} not in {tests} (keep RAY_MODULES, LAST, BESIDE_RAY up to date)")
    rest = [m for m in modules if m not in (*RAY_MODULES, *LAST, *BESIDE_RAY)]
    unit = [m for m in rest if "mark.slow" not in (tests / m).read_text()]
    main_order = unit + list(BESIDE_RAY) + [m for m in rest if m not in unit] + list(LAST)
    warm_cache()
    with tempfile.TemporaryDirectory(prefix="hwprof-ray-tests-") as scratch:
        log_path = Path(scratch) / "ray.log"
        with log_path.open("w") as log:
            ray = subprocess.Popen(
                [*pytest, "--basetemp", str(Path(scratch) / "tmp"), *RAY_MODULES],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            try:
                code = subprocess.call([*pytest, *main_order])
            finally:
                ray_code = ray.wait()
        print(f"\n{'=' * 30} the Ray modules (run beside the others) {'=' * 30}", flush=True)
        print(log_path.read_text(), flush=True)
    return code or ray_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
