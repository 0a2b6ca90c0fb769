"""tox's test command: the suite in three phases, each keeping this 2-CPU host's CPUs busy without two OpenMP
teams sharing a CPU.

1. FIRST: the modules with no slow test, BESIDE_RAY (processes started, stopped and failed more than computing)
   and the Ray modules, on pytest-xdist workers, one per CPU (at most WORKERS), unpinned; the Ray modules one
   after the other on one worker (they may not run beside one another: a node's ports and processes are the
   machine's), handed out first, then BESIDE_RAY, then the rest as workers free up (tests/xdist_order.py). The
   Ray tests spend part of their time waiting on their nodes.
2. The other slow modules on pytest-xdist workers, one per CPU, each pinned to its own (tests/xdist_pin.py), a
   module at a time. Unpinned, two workers ran slower than one process: each collect's OpenMP team lost a
   thread to the other worker at every barrier (test_runtimes.py and three program modules: 131 s side by side,
   118 s one after the other, 67 s on a CPU each; the whole suite on two unpinned xdist workers once took 30.8
   min against 25.3 serially). A pinned worker's collects default to one thread (hwprof's default: the CPUs it
   may run on), as on a one-CPU container.
3. LAST (tests that compare timings or sampled shares: paired verdicts, neighbours named) and UNPINNED, alone,
   with every CPU.

Before anything, hwprof's cache is filled once (warm_cache). Measured on fresh clones (`CI=true bash .ci/run`,
2 vCPUs): the two-process split of c24537e (Ray beside everything else in one process) 1,252-1,309 s; serially
1,552-1,608 s. Also tried: more modules in the side process after the Ray modules, unpinned (1,309 s against
1,283: both processes slowed); the Ray modules at nice 10 or 19 (no gain: a niced process still preempts one
thread of an OpenMP team). Until 2026-11-28 the first phase was two pytest processes, the Ray modules (and
three of BESIDE_RAY after them) in one, the rest in the other, balanced by hand: one idled at the end whenever
a module's time moved (fresh clone of bba9b2d: 335 s against 368 s). Tried on 2026-11-28 and left: the first two
phases as one pool of pinned workers (fresh clone of b625c80: 758 s against 358 + 367 s for the two phases of
81cc6f3; the same work, no better packed, and 8 tests of the first phase written for every CPU failed pinned).

With arguments (a test file, -k, -x ...), it is plain `pytest -m "not benchmark" ARGS`: the tests you name.
Exit status: the first non-zero of the phases' pytest runs, else 0. Run from tests/ (tox's changedir).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

BASE = ["-m", "not benchmark", "--durations=15", "-p", "no:cacheprovider"]
RAY_MODULES = (
    "test_sweep_ray.py", "test_sweep_ray_env.py", "test_sweep_ray_record.py", "test_sweep_ray_sigterm.py",
    "test_sweep_job.py", "test_sweep_hosts.py",
)  # fmt: skip
LAST = (
    "test_advise_real.py", "test_allocator_advise_real.py", "test_program_advise_real.py", "test_gate_real.py",
    "test_paired.py", "test_neighbours.py", "test_pass_cost.py", "test_pyspy.py",
    "test_perf_sampling.py", "test_attach.py", "test_layer_reads.py",
)  # fmt: skip
"""Modules whose verdicts rest on timings or sampled shares: run alone, after the rest (test_layer_reads: its
rotated and every-layer task-clock medians, pinned beside a busy CPU, lay 1.09x their allowance apart in 1 of 8
runs and 0.87-0.88x in 2 more, 0.77x at most in 6 runs alone; 3 s). test_gate_programs is not
one of them: its NEW program does 16x the FLOPs of OLD, which no load hides from ABBA blocks of whole runs, and
its programs run one thread each (alone, its 20 one-thread runs in a row kept one CPU idle for 50 s): it runs
pinned."""
BESIDE_RAY = (
    "test_fault_signals.py", "test_callgrind.py", "test_program_ends.py", "test_early_signals.py",
    "test_env_overrides.py", "test_program_faults.py", "test_run_dir_faults.py", "test_rlimits.py",
    "test_relative_paths.py", "test_child.py", "test_image_summary.py", "test_api_errors.py", "test_user_values.py",
    "test_run_dir_lock.py", "test_worker_failures.py",
)  # fmt: skip
"""Slow modules run in the first phase, handed out in this order (the longest first) after the Ray modules: their
processes start, stop and fail (imports and signals, one thread each) more than they compute. The modules whose
collects compute with two OpenMP threads lost most beside the Ray modules, whatever their priority: one thread
of the team preempted stalls the other at every barrier (fresh clone of d2340d9, beside them against alone:
test_disk_full's report test 67 s against 20.5, test_callgrind 64 against 33, the notebook 50 against 25)."""
PINNED_FIRST = (
    "test_programs.py", "test_tracking.py", "test_gate_programs.py", "test_runtimes.py", "test_cli.py",
    "test_program_own_changes.py", "test_docs.py", "test_disk_full.py",
)  # fmt: skip
"""The pinned phase's longest modules (fresh clone of 76a906e: 91 to 27 s each), handed out first, the longest
first; the others follow in their collected order (each under 27 s), so that the short ones fill the end. xdist's
own order (the most tests first) put a long module last: 417 s against 403 for this order, simulated on that
clone's times."""
UNPINNED = ("test_file_size_limit.py",)
"""Slow modules that lost most on a pinned worker's one CPU: run at the end with LAST (py-spy at 1,000 Hz cut by
the file-size limit took 210 s beside the other worker against 8 s alone). test_callgrind (valgrind: 62 s pinned
against 33 alone) runs in the first phase: its verdicts are instruction counts, which no load moves, and alone it
kept one CPU of two idle."""
WORKERS = 2
"""Pinned workers at most: the suite's host kind has 2 CPUs; more workers on a larger host would each run fewer
threads than the tests were sized for."""


def warm_cache() -> None:
    """hwprof's cache filled once, before anything else runs, as a user's is after a first `hwprof doctor --peaks`
    and `hwprof models`: this host's peaks for doctor's default thread count (collect's) and for one thread (the
    two the tests' collects use), and the model catalogue. Why: a collect without a cached peak measures one (8 s)
    and the cache keeps only a measurement made on a quiet host; with two pytest processes the host is rarely
    quiet, and on a fresh clone (empty cache) the collects of the first minutes each measured again (busy, not
    kept: 63 s in one run). A peak the cache holds already (a quiet one: it keeps no other) is not measured again
    (the two measurements took 13 s of the suite's 18 s before its first phase). A failure here is the tests' to
    find: not fatal."""
    from hwprof.core.config import default_threads
    from hwprof.hardware.machine import load_cached

    for threads in sorted({default_threads(), 1}, reverse=True):
        words = ["doctor", "--peaks", "--threads", str(threads)]
        cached = load_cached(threads)
        if cached is None:
            _hwprof(words)
        else:
            said = f"in the cache ({cached.gflops:.1f} GFLOP/s FP32)"
            print(f"run_tests.py: hwprof {' '.join(words)}: {said}", flush=True)
    _hwprof(["models"])


def _hwprof(words: list[str]) -> None:
    done = subprocess.run([sys.executable, "-P", "-m", "hwprof", *words], capture_output=True, text=True)
    lines = done.stdout.splitlines()
    said = next((line for line in lines if "GFLOP/s" in line), f"{len(lines)} lines printed")
    print(f"run_tests.py: hwprof {' '.join(words)}: exit {done.returncode}: {said.strip()}", flush=True)


DURATIONS_ENV = "HWPROF_TEST_DURATIONS"
"""The folder where each phase's JUnit XML (pytest's own per-test times) and durations.tsv are kept: tox sets it
under its work folder ({work_dir}/durations), which CI keeps; unset, a temporary folder."""
SLOWEST = 30
RUN_STORE_ENV = "HWPROF_TEST_RUN_STORE"
ORDER_ENV = "HWPROF_TEST_ORDER"
"""tests/xdist_order.py's work units, in the order they are handed out."""
"""tests/run_store.py's folder: the real runs that tests only read, built once per suite by the first that asks."""


def junit(folder: Path, phase: str) -> list[str]:
    """pytest's option that writes this phase's per-test times (JUnit XML, xdist workers merged by pytest)."""
    return [f"--junitxml={folder / f'{phase}.xml'}"]


@dataclasses.dataclass(frozen=True)
class Case:
    """One test of one phase, from its JUnit testcase and tests/conftest.py's properties."""

    phase: str
    seconds: float
    cpu_s: float | None
    started: float | None
    """Epoch seconds at its start."""
    worker: str
    name: str


def read_cases(folder: Path) -> list[Case]:
    cases = []
    for xml in sorted(folder.glob("*.xml")):
        for case in ET.parse(xml).iter("testcase"):
            props = {p.get("name"): p.get("value") for p in case.iter("property")}
            cpu, started = props.get("cpu_s"), props.get("started")
            cases.append(
                Case(
                    xml.stem,
                    float(case.get("time") or 0.0),
                    float(cpu) if cpu else None,
                    float(started) if started else None,
                    props.get("worker") or "main",
                    f"{case.get('classname', '')}::{case.get('name', '')}",
                )
            )
    return cases


def write_durations(folder: Path) -> Path:
    """durations.tsv from the phases' JUnit files (phase, wall seconds, CPU seconds, start within the phase,
    worker, test id), the most wall first; the SLOWEST by wall and by CPU printed, and each worker's timeline.
    CPU seconds are tests/conftest.py's property (the test's process and the children it waited for): on the
    CPU-bound phases they, not the wall, are what a test costs."""
    cases = sorted(read_cases(folder), key=lambda c: -c.seconds)
    origin = _origins(cases)

    def at(c: Case) -> str:
        return "" if c.started is None else f"{c.started - origin[c.phase]:.1f}"

    out = folder / "durations.tsv"
    lines = (f"{c.phase}\t{c.seconds:.2f}\t{_num(c.cpu_s)}\t{at(c)}\t{c.worker}\t{c.name}\n" for c in cases)
    out.write_text("phase\tseconds\tcpu_s\tstarted_s\tworker\ttest\n" + "".join(lines))
    walls, cpus = sum(c.seconds for c in cases), sum(c.cpu_s or 0.0 for c in cases)
    print(f"\n{'=' * 30} the {SLOWEST} slowest of {len(cases)} tests (all in {out}) {'=' * 30}", flush=True)
    print(f"all tests: {walls:,.0f} s of wall, {cpus:,.0f} CPU-s", flush=True)
    for c in cases[:SLOWEST]:
        print(f"{c.seconds:8.2f} s {_num(c.cpu_s, ' CPU-s'):>12}  {c.phase:<8} {c.name}", flush=True)
    print(f"\n{'=' * 30} the {SLOWEST} most CPU-seconds {'=' * 30}", flush=True)
    for c in sorted(cases, key=lambda c: -(c.cpu_s or 0.0))[:SLOWEST]:
        print(f"{c.cpu_s or 0.0:8.1f} CPU-s {c.seconds:7.2f} s  {c.phase:<8} {c.name}", flush=True)
    print(f"\n{'=' * 30} each worker's timeline {'=' * 30}", flush=True)
    for line in timelines(cases):
        print(line, flush=True)
    return out


def _num(value: float | None, unit: str = "") -> str:
    return "" if value is None else f"{value:.2f}{unit}"


def _origins(cases: list[Case]) -> dict[str, float]:
    """Each phase's first start (epoch seconds): the zero of its tests' start times."""
    out: dict[str, float] = {}
    for c in cases:
        if c.started is not None:
            out[c.phase] = min(out.get(c.phase, c.started), c.started)
    return out


def timelines(cases: list[Case]) -> list[str]:
    """Per phase and worker: its tests' span within the phase, the time in tests and between them (pytest's
    own work, and a worker waiting for its next module), the longest gap and the test after it."""
    lines, origins = [], _origins(cases)
    for phase, worker in sorted({(c.phase, c.worker) for c in cases if c.started is not None}):
        mine = sorted((c for c in cases if (c.phase, c.worker) == (phase, worker) and c.started), key=_began)
        origin = origins[phase]
        end = max(_began(c) + c.seconds for c in mine)
        busy = sum(c.seconds for c in mine)
        gaps = [(_began(b) - (_began(a) + a.seconds), b.name) for a, b in itertools.pairwise(mine)]
        gap, after = max(gaps, default=(0.0, ""))
        lines.append(
            f"{phase} {worker}: {len(mine)} tests from +{_began(mine[0]) - origin:.0f} s to +{end - origin:.0f} s, "
            f"{busy:.0f} s in tests, {end - _began(mine[0]) - busy:.0f} s between them"
            + (f" (the longest {gap:.1f} s, before {after})" if gap > 1 else "")
        )
    return lines


def _began(case: Case) -> float:
    return case.started or 0.0


def main(args: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest", *BASE]
    if args:
        return subprocess.call([*pytest, *args])
    folder = Path(os.environ.get(DURATIONS_ENV) or tempfile.mkdtemp(prefix="hwprof-durations-"))
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.xml"):
        old.unlink()
    try:
        with tempfile.TemporaryDirectory(prefix="hwprof-run-store-") as store:
            os.environ[RUN_STORE_ENV] = store  # every phase's pytest shares the runs built once (tests/run_store.py)
            return phases(pytest, folder)
    finally:
        write_durations(folder)


def phases(pytest: list[str], folder: Path) -> int:
    tests = Path.cwd()
    modules = sorted(p.name for p in tests.glob("test_*.py"))
    missing = [m for m in (*RAY_MODULES, *LAST, *BESIDE_RAY, *UNPINNED, *PINNED_FIRST) if m not in modules]
    if missing:
        lists = "RAY_MODULES, LAST, BESIDE_RAY, UNPINNED, PINNED_FIRST"
        sys.exit(f"run_tests.py: {', '.join(missing)} not in {tests} (keep {lists} up to date)")
    rest = [m for m in modules if m not in (*RAY_MODULES, *LAST, *BESIDE_RAY, *UNPINNED)]
    unit = [m for m in rest if "mark.slow" not in (tests / m).read_text()]
    use = PhaseUse()
    with use.measure("warm_cache"):
        warm_cache()
    order = ",".join(["+".join(RAY_MODULES), *BESIDE_RAY, *unit])  # tests/xdist_order.py
    with use.measure("first"):
        command = [*pytest, *junit(folder, "first"), *first_workers(), *RAY_MODULES, *BESIDE_RAY, *unit]
        first = subprocess.call(command, env={**os.environ, ORDER_ENV: order})
    slow = [m for m in rest if m not in unit]
    print(f"\n{'=' * 30} {len(slow)} modules on pinned workers {'=' * 30}", flush=True)
    with use.measure("pinned"):
        command = [*pytest, *junit(folder, "pinned"), *pinned_workers(), *slow]
        second = subprocess.call(command, env={**os.environ, ORDER_ENV: ",".join(PINNED_FIRST)})
    print(f"\n{'=' * 30} LAST and UNPINNED, alone {'=' * 30}", flush=True)
    with use.measure("alone"):
        third = subprocess.call([*pytest, *junit(folder, "alone"), *UNPINNED, *LAST])
    use.report(folder / "phases.txt")
    return first or second or third


class PhaseUse:
    """How much of the host's CPUs each phase kept busy (psutil's host-wide CPU times): a phase well under its
    CPUs has room for more beside it; one at its CPUs gets shorter only with less work."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    @contextlib.contextmanager
    def measure(self, name: str) -> Iterator[None]:
        import psutil

        before, started = psutil.cpu_times(), time.monotonic()
        try:
            yield
        finally:
            after, wall = psutil.cpu_times(), time.monotonic() - started
            # user and nice include guest time on Linux: summing every field would count it twice
            busy = sum(getattr(after, f) - getattr(before, f) for f in ("user", "nice", "system", "irq", "softirq"))
            steal = after.steal - before.steal
            cpus = psutil.cpu_count() or 1
            self.lines.append(
                f"{name}: {wall:.0f} s wall, {busy:.0f} CPU-s busy ({busy / max(wall, 1e-9):.2f} of {cpus} CPUs), "
                f"{steal:.0f} s stolen by the hypervisor"
            )

    def report(self, out: Path) -> None:
        print(f"\n{'=' * 30} the phases' use of the CPUs {'=' * 30}", flush=True)
        print("\n".join(self.lines), flush=True)
        out.write_text("\n".join(self.lines) + "\n")


def first_workers() -> list[str]:
    """pytest-xdist's options for the first phase: one unpinned worker per CPU (at most WORKERS), the work units
    of $HWPROF_TEST_ORDER handed out in their order (tests/xdist_order.py); none where there is one CPU (the
    order still holds)."""
    cpus = len(os.sched_getaffinity(0))
    options = ["-p", "xdist_order"]
    if cpus < 2:
        return options
    return [*options, "-n", str(min(WORKERS, cpus)), "--dist", "loadfile"]


def pinned_workers() -> list[str]:
    """pytest-xdist's options for one worker per CPU of this process (at most WORKERS), each worker on CPUs of
    its own (tests/xdist_pin.py), a module at a time (its module-scoped fixtures stay one collect), PINNED_FIRST
    handed out first (tests/xdist_order.py); none where there is one CPU."""
    cpus = len(os.sched_getaffinity(0))
    if cpus < 2:
        return []
    return ["-n", str(min(WORKERS, cpus)), "--dist", "loadfile", "-p", "xdist_pin", "-p", "xdist_order"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
