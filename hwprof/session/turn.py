"""A pass's worker launched beside the previous pass's close, held before its warm-up until its turn comes: once that
pass has ended.

Each pass's worker starts, builds its model and prepares its collectors before it measures anything: 0.6-0.8 s of a
forked worker at yolov7 640 on the 2-vCPU EPYC. The pass before it, once its measuring is over, closes its
collectors in its worker (the layers pass's: 0.4-0.5 s) and has its attached tools read by the collect (perf script:
0.9 s). The collect launches the next pass's worker as soon as the previous one says its measuring ended
("closing"), with TURN_ENV naming a file in the new pass's folder; the worker builds, says "waiting", and waits for
that file before its warm-up; the collect writes it once the previous pass has ended (its worker exited, its tools
read, its outcome recorded) and the new pass's late tools are attached. So no pass warms up or measures beside
another's work, as before, and nothing an earlier pass leaves is read before it is whole (the warm-up's reference,
the kernels pass's sampling plan, the counter rotation's and Scalene's iterations are all read after the wait). The
worker builds on one thread, beside that close on the other CPU (two OpenMP threads spinning against it took 2-3x as
long), and takes the run's threads at its turn. No worker is launched beside a close that holds the most memory of
the collect (Collector.heavy_close: torch.profiler's trace converted). A worker whose collect is gone (its parent
changed) or that waits past its pass's time-out ends with an error instead of waiting on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from hwprof.core.atomic import atomic_write_text

TURN_ENV = "HWPROF_TURN"
"""The file a worker launched beside the previous pass's close waits for before its warm-up."""
TURN_FILE = "turn"
"""Its name in the pass's folder; the worker removes it once through."""
POLL_S = 0.005


class TurnError(RuntimeError):
    """The worker waited in vain: its collect is gone, or it waited past its time-out."""


def turn_path(out_dir: Path) -> Path:
    return out_dir / TURN_FILE


def give_turn(path: Path) -> None:
    """The collect: the previous pass has ended; the worker waiting on `path` may warm up and measure."""
    atomic_write_text(path, "")


def launched_early() -> bool:
    """The worker: whether it was launched beside the previous pass's close, its turn yet to come."""
    return bool(os.environ.get(TURN_ENV))


def wait_turn(timeout_s: float, on_wait: Callable[[], None] | None = None) -> float | None:
    """The worker: where TURN_ENV names a file, wait until it exists (then remove it); the seconds waited, None
    where the worker was not launched beside another pass. `on_wait` runs once before the wait (the worker's
    "waiting" progress line); a stop signal in the wait ends the worker as anywhere else (worker_stop)."""
    where = os.environ.pop(TURN_ENV, "")
    if not where:
        return None
    turn, parent, began = Path(where), os.getppid(), time.monotonic()
    if on_wait is not None:
        on_wait()
    while not turn.exists():
        if os.getppid() != parent:
            raise TurnError("the collect that launched this pass is gone: nothing was measured")
        if time.monotonic() - began > timeout_s:
            raise TurnError(f"the previous pass did not end within {timeout_s:.0f} s: nothing was measured")
        time.sleep(POLL_S)
    turn.unlink(missing_ok=True)
    return time.monotonic() - began
