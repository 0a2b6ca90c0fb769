"""tox's test command: the suite in two pytest processes at once, the Ray modules and a few others beside the rest.

Why two processes and not pytest-xdist: the tests that start local Ray clusters (about a fifth of the suite's
time) spend much of it waiting on their nodes' processes, while the rest are CPU-bound collects with two torch
threads on a 2-CPU host. xdist's two workers ran two such collects at once, OpenMP's spinning threads doubled
the CPU time, and the suite took longer (30.8 min against 25.3 serially, measured on one host). The Ray modules
run first in the side process, one after another (a node's ports and processes are the machine's); then that
process takes modules whose checks do not rest on timings (signals, program ends, full disks, callgrind's exact
counts). The side process runs at the lowest priority (nice 19): it takes the CPU time the main one leaves (a
process starting, a file written, a pass waiting on its children: the serial suite used 1.1 of 2 CPUs), and
the main one's collects keep both CPUs when they compute (at equal priorities the main process took about
190 s longer over the 453 s the Ray modules ran beside it: its OpenMP threads waited on a thread the side
process held). The main process runs its tests that compare timings (paired verdicts, neighbours named,
sampled shares) last.

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
SIDE = (
    *RAY_MODULES, "test_fault_signals.py", "test_programs.py", "test_disk_full.py", "test_program_ends.py",
    "test_callgrind.py", "test_env_overrides.py", "test_program_faults.py", "test_early_signals.py",
)  # fmt: skip
"""The side process's modules, in order: the Ray modules first (they mostly wait), then checks of exact values."""
LAST = (
    "test_advise_real.py", "test_allocator_advise_real.py", "test_program_advise_real.py", "test_gate_real.py",
    "test_gate_programs.py", "test_paired.py", "test_neighbours.py", "test_pass_cost.py", "test_pyspy.py",
    "test_perf_sampling.py",
)  # fmt: skip
"""Modules whose verdicts rest on timings or sampled shares: run after the rest of the main process."""


def main(args: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest", *BASE]
    if args:
        return subprocess.call([*pytest, *args])
    tests = Path.cwd()
    modules = sorted(p.name for p in tests.glob("test_*.py"))
    missing = [m for m in (*SIDE, *LAST) if m not in modules]
    if missing:
        sys.exit(f"run_tests.py: {', '.join(missing)} not in {tests} (keep SIDE and LAST up to date)")
    main_order = [m for m in modules if m not in SIDE and m not in LAST] + list(LAST)
    with tempfile.TemporaryDirectory(prefix="hwprof-ray-tests-") as scratch:
        log_path = Path(scratch) / "side.log"
        with log_path.open("w") as log:
            side = subprocess.Popen(
                [*pytest, "--basetemp", str(Path(scratch) / "tmp"), *SIDE],
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=lambda: os.nice(19),
            )
            try:
                code = subprocess.call([*pytest, *main_order])
            finally:
                side_code = side.wait()
        print(f"\n{'=' * 30} the side process ({len(SIDE)} modules, run beside the others) {'=' * 30}", flush=True)
        print(log_path.read_text(), flush=True)
    return code or side_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
