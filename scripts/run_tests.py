"""tox's test command: the suite in two pytest processes at once, the Ray modules beside the rest.

Why two processes and not pytest-xdist: the tests that start local Ray clusters (about a fifth of the suite's
time, 310 of 1,517 s serially) spend part of it waiting on their nodes, while the rest are CPU-bound collects
with two torch threads on a 2-CPU host. xdist's two workers ran two such collects at once, OpenMP's spinning
threads doubled the CPU time, and the suite took longer (30.8 min against 25.3 serially, on one host). The Ray
modules share the side process (they may not run beside one another: a node's ports and processes are the
machine's); the main process runs its tests that compare timings (paired verdicts, neighbours named, sampled
shares) last, once the Ray modules are likely done. Measured on fresh clones (`CI=true bash .ci/run`, 2 vCPUs):
this split 1,466 s against 1,552-1,608 s serially; the Ray modules took 453 s beside the rest, which lost about
190 s to them. Also tried: more modules in the side process at nice 19 (it starved, and ended after the main
one: slower than this).

With arguments (a test file, -k, -x ...), it is plain `pytest -m "not benchmark" ARGS`: the tests you name.
Exit status: the first non-zero of the two processes, else 0. Run from tests/ (tox's changedir).
"""

from __future__ import annotations

import os
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
SIDE_NICE = 10
"""The Ray modules' priority: at equal priority they cost the main process about 200 s of its 1,302 (their 436 s
beside it, fresh clone of d2340d9); at nice 10 they take what the main one leaves (it uses 1.1 CPUs of 2 on
average), and at 10 rather than 19 their nodes still answer Ray's health checks when the main one takes both."""


def main(args: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest", *BASE]
    if args:
        return subprocess.call([*pytest, *args])
    tests = Path.cwd()
    modules = sorted(p.name for p in tests.glob("test_*.py"))
    missing = [m for m in (*RAY_MODULES, *LAST) if m not in modules]
    if missing:
        sys.exit(f"run_tests.py: {', '.join(missing)} not in {tests} (keep RAY_MODULES and LAST up to date)")
    main_order = [m for m in modules if m not in RAY_MODULES and m not in LAST] + list(LAST)
    with tempfile.TemporaryDirectory(prefix="hwprof-ray-tests-") as scratch:
        log_path = Path(scratch) / "ray.log"
        with log_path.open("w") as log:
            ray = subprocess.Popen(
                [*pytest, "--basetemp", str(Path(scratch) / "tmp"), *RAY_MODULES],
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=lambda: os.nice(SIDE_NICE),
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
