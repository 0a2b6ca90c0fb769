"""Can a process forked from a zygote-like parent use CUDA?

The parent imports exactly what hwprof's zygote imports (hwprof.session.zygote.PRELOAD and the pass worker
module), checks that none of it initialised CUDA, forks a child that runs a CUDA kernel, then (control) has
the parent initialise CUDA and forks again: that second child is expected to fail ("Cannot re-initialize
CUDA in forked subprocess"), which shows what a zygote must never do.
Nothing here calls torch.cuda.is_available() or device_count() in the parent before the first fork: both
initialise the driver and poison later forks (torch's poison_fork).
"""

from __future__ import annotations

import importlib
import os
import sys
import time


def child_cuda(label: str) -> int:
    import torch

    try:
        x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
        y = (x * 2).sum()
        torch.cuda.synchronize()
        print(f"{label}: pid {os.getpid()} CUDA ok, sum {float(y):.6g} on {torch.cuda.get_device_name(0)}", flush=True)
        return 0
    except Exception as exc:  # the answer itself
        print(f"{label}: pid {os.getpid()} CUDA FAILED: {exc!r}"[:400], flush=True)
        return 1


def fork_and_wait(label: str) -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(child_cuda(label))
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    print(f"{label}: exit {code}", flush=True)
    return code


def main() -> int:
    t0 = time.monotonic()
    from hwprof.session.zygote import PASS_WORKER, PRELOAD

    for name in (*PRELOAD, PASS_WORKER):
        try:
            importlib.import_module(name)
        except Exception as exc:
            print(f"preload {name} failed: {exc!r}", flush=True)
    import torch

    print(
        f"zygote-like preload of {len(PRELOAD) + 1} modules: {time.monotonic() - t0:.1f} s; "
        f"torch {torch.__version__}; CUDA initialised in the parent: {torch.cuda.is_initialized()}; "
        f"parent in bad fork: {torch.cuda._is_in_bad_fork()}",
        flush=True,
    )
    first = fork_and_wait("forked child (parent never touched CUDA)")
    second = fork_and_wait("second forked child (as a second pass)")
    # control: the parent initialises CUDA, then forks (what a zygote must never do)
    code = child_cuda("parent itself")
    control = fork_and_wait("control child forked AFTER the parent initialised CUDA (expected to fail)")
    print(
        f"verdict: forked workers {'CAN' if first == 0 and second == 0 else 'CANNOT'} use CUDA when the parent "
        f"only imported; control fork after init {'failed as expected' if control != 0 else 'unexpectedly worked'}",
        flush=True,
    )
    return 0 if first == 0 and second == 0 and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
