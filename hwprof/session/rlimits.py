"""The process's address-space and data limits (`ulimit -v`, `ulimit -d`), checked before any pass.

A pass's worker imports torch, starts its thread pool (each thread maps its stack and a malloc arena) and
builds the model: under `ulimit -v 1000000` (1 GB) a yolov7-tiny worker died of SIGSEGV before its first
iteration, four passes in a row, with an empty log. Where RLIMIT_AS or RLIMIT_DATA is finite, collect measures
what one worker of this run needs: a child that imports torch, builds the run's model and runs one forward at
its size, with the soft limits lifted to the hard ones where the hard ones are higher (so it can finish and be
measured: its VmPeak and VmData), or under the limits as they are where they cannot be lifted (then it shows
whether it fits). A run whose worker cannot fit is refused in one line with the limit, the figure measured and
the fix, before any pass. A worker that still dies by a signal under a finite limit has the limit named in its
line (`limit_note`). Without a finite limit nothing is measured.

The number of processes and threads of one user (`ulimit -u`, RLIMIT_NPROC: every thread counts, those of the
user's other programs too) is checked the same way where the kernel enforces it (a real uid other than 0,
without CAP_SYS_ADMIN or CAP_SYS_RESOURCE): under `ulimit -u` 6-8 collect printed a traceback (its own
process could not start a thread) and left run.json `complete` with no pass; at 9-10 the worker's numpy
(OpenBLAS, which raises SIGINT on itself when it cannot start its threads) made the pass look stopped by a
signal nobody sent. Where the room left under the limit is small, a worker's threads are measured (the same
probe) and a run that cannot fit is refused in one line; a thread or process that still cannot start during
the collect ends it with the limit named (`task_limit_line`).
"""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from hwprof.core.atomic import human_bytes
from hwprof.core.config import RunConfig
from hwprof.rundir.logs import log_lines
from hwprof.session.plan import CollectError

if TYPE_CHECKING:
    from hwprof.collectors.base import CollectorResult

WORKER_EXTRA = 400 * 2**20
"""What a pass's worker maps beyond the probe (its collectors, their threads' stacks and malloc arenas): a
yolov7-tiny 320 timing+flops worker peaked at 1.41 GB of address space where this probe peaked at 0.84 GB on
the project's VM (2 threads). Below that difference, so that the check never refuses a run that fits; a worker
that still runs out dies with the limit named in its line."""

COLLECT_THREADS = 6
"""The threads of collect's own process while a pass runs (its main thread, numpy's OpenBLAS pool, the worker's
stdout pump, the neighbour watch): 6 at their peak on the project's VM (2 CPUs), 3 of them before the first pass."""
WORKER_EXTRA_THREADS = 1
"""A pass's worker's threads beyond the probe's: a yolov7-tiny timing worker peaked at 5 threads where the probe
had 4 (2 threads). No more, so that the check never refuses a run that fits (11 processes and threads in all:
`ulimit -u` 11 ran, 10 did not); a pass whose collectors start more (a sampler's thread, perf or py-spy) and
runs out fails with the limit named in its line."""
NPROC_PROBE_BELOW = 256
"""Room under RLIMIT_NPROC (the limit less the user's processes and threads) below which a worker's threads are
measured: a usual limit (thousands) leaves more, and no probe is run for it."""
THREAD_FAILURES = (
    "can't start new thread", "Thread creation failed", "pthread_create failed", "pthread_create: Resource",
    "fork: retry",
)  # fmt: skip
"""What a process says when it could not start a thread or process: CPython, libgomp (torch's OpenMP pool),
OpenBLAS (numpy's, which then raises SIGINT on itself; "pthread_create failed for thread 2 of 2: ..." when it
starts its pool, "blas_thread_init: pthread_create: Resource temporarily unavailable" on its other path, which a
fresh clone's run met once), a shell."""
NPROC_FIX = "or run as a user whose limit is higher"

LIMITS = {"RLIMIT_AS": ("ulimit -v", "address space"), "RLIMIT_DATA": ("ulimit -d", "data segment")}

PROBE = """
import resource, sys
for name, soft, hard in [(n, int(s), int(h)) for n, s, h in (a.split(':') for a in sys.argv[4:])]:
    resource.setrlimit(getattr(resource, name), (soft, hard))
import torch
torch.set_num_threads(int(sys.argv[1]))
if sys.argv[2]:
    from hwprof.workload.zoo import build_model
    module = build_model(sys.argv[2]).module
    with torch.inference_mode():
        module(torch.zeros(1, 3, int(sys.argv[3]), int(sys.argv[3])))
else:
    torch.ones(64, 64) @ torch.ones(64, 64)
status = dict(line.split(':', 1) for line in open('/proc/self/status') if ':' in line)
print(int(status['VmPeak'].split()[0]) * 1024, int(status['VmData'].split()[0]) * 1024, int(status['Threads']))
"""


class ResourceLimitError(ValueError):
    """A limit of this process is below what one worker of the run needs: a bad input (exit 2, one line)."""


class TaskLimitError(CollectError):
    """collect, or a pass's worker, could not start a thread or a process: the collect cannot go on (one line
    that names the limit and its fix; run.json ends failed, or partial where a pass before it ended ok)."""


@dataclass(frozen=True)
class Limit:
    name: str
    soft: int
    hard: int

    @property
    def words(self) -> str:
        command, what = LIMITS[self.name]
        return f"{self.name} ({what}, `{command}`) is {human_bytes(self.soft)}"


def finite_limits() -> list[Limit]:
    """The address-space and data limits that are set (soft limit not unlimited)."""
    out = []
    for name in LIMITS:
        soft, hard = resource.getrlimit(getattr(resource, name))
        if soft != resource.RLIM_INFINITY:
            out.append(Limit(name, soft, hard))
    return out


def limit_note() -> str:
    """The finite limits, for the line of a worker that died by a signal ("" where none is set)."""
    limits = finite_limits()
    if not limits:
        return ""
    return f" (under {', '.join(lim.words for lim in limits)}; a worker that runs out of it can die of SIGSEGV)"


def check_limits(config: RunConfig) -> None:
    """ResourceLimitError (one line) where a finite RLIMIT_AS or RLIMIT_DATA is below what one worker of this
    run measured it needs, or RLIMIT_NPROC leaves too few processes and threads for collect and its worker;
    nothing is run where no limit is set (or where RLIMIT_NPROC leaves plenty)."""
    limits = finite_limits()
    if limits:
        _check_memory(config, limits)
    _check_tasks(config)


def _probe(config: RunConfig, lifted: list[str]) -> subprocess.CompletedProcess[str]:
    """One worker's torch and model in a child (its VmPeak, VmData and threads on its last line), with the
    `lifted` limits (NAME:soft:hard) set in it first."""
    model = "" if config.program is not None else config.model
    return subprocess.run(
        [sys.executable, "-c", PROBE, str(config.threads), model, str(config.imgsz), *lifted],
        capture_output=True,
        text=True,
        timeout=600,
    )


def _probed(config: RunConfig) -> str:
    return f"{config.model} at {config.imgsz}" if config.program is None else "torch"


def _check_memory(config: RunConfig, limits: list[Limit]) -> None:
    done = _probe(config, [f"{lim.name}:{lim.hard}:{lim.hard}" for lim in limits])  # lifted to the hard limit
    what = _probed(config)
    if done.returncode != 0:
        raise ResourceLimitError(
            f"{' and '.join(lim.words for lim in limits)}: a worker could not import {what} within it "
            f"({_ended(done.returncode)}); fix: ulimit -v unlimited (and ulimit -d unlimited), or run with more"
        )
    peak, data = (int(x) for x in done.stdout.split()[-3:-1])
    need = {"RLIMIT_AS": peak, "RLIMIT_DATA": data}
    for lim in limits:
        least = need[lim.name] + WORKER_EXTRA
        if least > lim.soft:
            command, _what = LIMITS[lim.name]
            raise ResourceLimitError(
                f"{lim.words}, below what one worker of this run needs: at least {human_bytes(least)} (estimate: "
                f"{human_bytes(need[lim.name])} measured for torch and {what} with {config.threads} threads and one "
                f"forward, plus {human_bytes(WORKER_EXTRA)} for the pass's collectors); fix: {command} unlimited, "
                f"or {command} {int(least * 1.2) // 1024} or more (KiB)"
            )


def nproc_limit() -> int | None:
    """RLIMIT_NPROC's soft limit where the kernel holds this process to it: finite, a real uid other than 0, and
    neither CAP_SYS_ADMIN nor CAP_SYS_RESOURCE in effect (the kernel exempts those); None where it does not."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft == resource.RLIM_INFINITY or os.getuid() == 0:
        return None
    try:
        status = Path("/proc/self/status").read_text()
        caps = int(status.split("CapEff:")[1].split()[0], 16)
    except (OSError, IndexError, ValueError):
        caps = 0
    if caps & (1 << 21 | 1 << 24):  # CAP_SYS_ADMIN, CAP_SYS_RESOURCE
        return None
    return soft


def user_tasks(uid: int | None = None) -> int:
    """The processes and threads whose real uid is `uid` (this process's): what RLIMIT_NPROC counts."""
    uid = os.getuid() if uid is None else uid
    total = 0
    for proc in psutil.process_iter(["uids", "num_threads"]):
        uids, threads = proc.info["uids"], proc.info["num_threads"]
        if uids is not None and uids.real == uid and threads:
            total += threads
    return total


def _own_tasks() -> int:
    """This process's threads and those of the processes below it (the collect's own, counted by the limit)."""
    me = psutil.Process()
    total = me.num_threads()
    for proc in me.children(recursive=True):
        try:
            total += proc.num_threads()
        except psutil.Error:
            continue
    return total


def nproc_words(soft: int) -> str:
    return f"RLIMIT_NPROC (`ulimit -u`: the processes and threads of uid {os.getuid()}) is {soft}"


def worker_threads(config: RunConfig) -> int:
    """A pass's worker's threads, reasoned where not measured: its main thread, torch's pool, numpy's OpenBLAS
    pool (one thread per CPU) and its collectors' threads."""
    return config.threads + (os.cpu_count() or 1) + WORKER_EXTRA_THREADS


def _check_tasks(config: RunConfig) -> None:
    soft = nproc_limit()
    if soft is None:
        return
    others = user_tasks() - _own_tasks()
    if soft - others - COLLECT_THREADS - worker_threads(config) > NPROC_PROBE_BELOW:
        return
    _soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    done = _probe(config, [f"RLIMIT_NPROC:{hard}:{hard}"])  # lifted to the hard limit, where higher
    what = _probed(config)
    if done.returncode != 0:
        raise ResourceLimitError(
            f"{nproc_words(soft)}: a worker could not start the threads of {what} within it "
            f"({_ended(done.returncode)}; this user runs {others} other processes and threads); "
            f"fix: ulimit -u {_enough(others + COLLECT_THREADS + worker_threads(config))} or more, {NPROC_FIX}"
        )
    measured = int(done.stdout.split()[-1])
    need = COLLECT_THREADS + measured + WORKER_EXTRA_THREADS
    if others + need > soft:
        raise ResourceLimitError(
            f"{nproc_words(soft)}, below what this collect needs: {need} processes and threads beside the {others} "
            f"this user runs already (estimate: {measured} measured for torch and {what} with {config.threads} "
            f"threads and one forward, plus {WORKER_EXTRA_THREADS} for the pass's collectors and {COLLECT_THREADS} "
            f"of collect's own); fix: ulimit -u {_enough(others + need)} or more, {NPROC_FIX}"
        )


def _enough(need: int) -> int:
    """A limit with room for what was counted (a thread or two started between the count and the pass)."""
    return max(need + 4, int(need * 1.25))


def cannot_start(exc: BaseException) -> bool:
    """Whether `exc` is a thread or process that could not start for lack of room (EAGAIN)."""
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return True
    return isinstance(exc, OSError) and exc.errno == errno.EAGAIN


def thread_failure(log: Path) -> str:
    """The line of a pass's worker log that says a thread or process could not start ("" where none does)."""
    for line in log_lines(log):
        if any(words in line for words in THREAD_FAILURES):
            return line.strip()
    return ""


def thread_limited(
    name: str,
    status: str,
    error: str,
    results: dict[str, CollectorResult],
    log: Path,
    stop_sent: bool,
    config: RunConfig,
) -> tuple[str, str, bool]:
    """A pass's status and error given its worker's log, and whether a thread or process could not start in it.
    Such a worker fails with the limit named (task_limit_line), never "stopped by" a signal hwprof did not send
    (`stop_sent`): numpy's OpenBLAS raises SIGINT on itself when it cannot start its threads, and the worker took
    that for a stop."""
    ours = status == "interrupted" and stop_sent
    cause = thread_failure(log) if status in ("failed", "interrupted") and not ours else ""
    if not cause:
        if status == "interrupted" and not ours:
            error += " (hwprof sent no stop: it came from outside collect, or from the worker itself)"
        return status, error, False
    line = task_limit_line(f"pass {name}'s worker could not start a thread ({cause})", config)
    for result in results.values():
        if result.status == "interrupted":
            result.status, result.reason = "failed", line
    return "failed", line, True


def task_limit_line(what: str, config: RunConfig) -> str:
    """The one line of a thread or process that could not start (`what`): the limit, the count, the fix."""
    soft = nproc_limit()
    if soft is None:
        return (
            f"{what}: the system refused a new thread or process (EAGAIN) though RLIMIT_NPROC does not apply here; "
            "fix: raise the cgroup's pids.max (or kernel.threads-max), or stop other processes"
        )
    others = max(user_tasks() - _own_tasks(), 0)
    need = others + COLLECT_THREADS + worker_threads(config)
    return (
        f"{nproc_words(soft)}: {what}; this user runs {others} processes and threads beside this collect, which "
        f"needs about {COLLECT_THREADS + worker_threads(config)} with its worker; fix: ulimit -u {_enough(need)} "
        f"or more, {NPROC_FIX}"
    )


def _ended(returncode: int) -> str:
    import signal

    if returncode < 0 and -returncode in signal.Signals._value2member_map_:
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exit status {returncode}"
