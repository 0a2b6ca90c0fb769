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
"""

from __future__ import annotations

import resource
import subprocess
import sys
from dataclasses import dataclass

from hwprof.core.atomic import human_bytes
from hwprof.core.config import RunConfig

WORKER_EXTRA = 400 * 2**20
"""What a pass's worker maps beyond the probe (its collectors, their threads' stacks and malloc arenas): a
yolov7-tiny 320 timing+flops worker peaked at 1.41 GB of address space where this probe peaked at 0.84 GB on
the project's VM (2 threads). Below that difference, so that the check never refuses a run that fits; a worker
that still runs out dies with the limit named in its line."""

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
print(int(status['VmPeak'].split()[0]) * 1024, int(status['VmData'].split()[0]) * 1024)
"""


class ResourceLimitError(ValueError):
    """A limit of this process is below what one worker of the run needs: a bad input (exit 2, one line)."""


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
    run measured it needs; nothing is run where no limit is set."""
    limits = finite_limits()
    if not limits:
        return
    model = "" if config.program is not None else config.model
    args = [f"{lim.name}:{lim.hard}:{lim.hard}" for lim in limits]  # lifted to the hard limit, where higher
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(config.threads), model, str(config.imgsz), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    what = f"{config.model} at {config.imgsz}" if model else "torch"
    if done.returncode != 0:
        raise ResourceLimitError(
            f"{' and '.join(lim.words for lim in limits)}: a worker could not import {what} within it "
            f"({_ended(done.returncode)}); fix: ulimit -v unlimited (and ulimit -d unlimited), or run with more"
        )
    peak, data = (int(x) for x in done.stdout.split()[-2:])
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


def _ended(returncode: int) -> str:
    import signal

    if returncode < 0 and -returncode in signal.Signals._value2member_map_:
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exit status {returncode}"
