"""Start-up paid once per collect (or advise): a process that imports what every pass's worker imports (torch,
ultralytics, OpenCV, hwprof's runners) and forks a worker for each pass that may start from it. Its owner names
the worker modules it may run (`python -P -m MODULE ARGS` becomes MODULE.main(ARGS) in the fork): a collect's,
hwprof.session.worker; advise's, hwprof.advisor.paired_worker, whose four processes per candidate each imported
torch again (the advise of tests/test_advise_real.py: 16 of them).

Why: a pass's worker spent 2.0-2.5 s importing before it built its model (2-CPU EPYC: `python -c "import torch,
ultralytics, hwprof.session.worker"` 2.5 s), once per pass; the zygote's imports run once, beside the collect's
own start, and a forked worker begins with them done.

Which passes start from it (`forkable`): those whose command is `python -P -m` one of its modules (the pass worker,
or a collector's launcher that wraps it: Scalene's CPU mode, Collector.zygote_modules; valgrind, ncu and Scalene's
memory mode exec the worker themselves) and whose environment is the zygote's, but for variables read when first
used, not when a library loads (LAZY_ENV); never a user's program's passes (a program expects a fresh interpreter),
nor under a tight task limit (RLIMIT_NPROC under TASK_ROOM: the zygote's two tasks would count against the passes'
threads). Every other pass is started as before (`python -P -m hwprof.session.worker`), and so is every pass when the
zygote cannot start.

Fork safety: the zygote only imports; no parallel region ran (OpenMP's team is made in the worker, after the
fork), and its one other thread, OpenBLAS's server, is rebuilt in the child by OpenBLAS's own fork handler. A
forked worker calls setsid (a session of its own, as `start_new_session`), takes the stdin, stdout and stderr the
collect sends with its request (SCM_RIGHTS), its working directory and environment, and runs
the module's main as `python -m` would.

Its owner's `imports` (what a collector's first use imports: torch.profiler's Inductor and Dynamo, 0.8 s) come
after the first fork when that first worker does not need them (a collect's timing pass): the zygote imports them
while that worker builds its model, and the worker waits for them to end before its warm-up
(hwprof.session.late_imports), so that no forward it times runs beside them. Before, the first pass waited for them
before it could start.

The zygote reports a worker's exit without reaping it (waitid WNOWAIT) until the collect asks it to: the worker's
pid, its session's id, is not given to another process before the collect has stopped what is left in that
session (hwprof.session.child). The collect kills the zygote when its passes are done (it holds nothing to save);
it also exits when the collect's end of its socket closes (a collect killed with SIGKILL).
"""

from hwprof.session.zygote.handle import LAZY_ENV, PASS_WORKER, ForkedWorker, Zygote, ZygoteGone, start
from hwprof.session.zygote.process import PRELOAD, cuda_initialised, main

__all__ = [
    "LAZY_ENV",
    "PASS_WORKER",
    "PRELOAD",
    "ForkedWorker",
    "Zygote",
    "ZygoteGone",
    "cuda_initialised",
    "main",
    "start",
]
