"""The zygote's late imports (hwprof.session.zygote): what a collector's first use imports (torch.profiler's Inductor
and Dynamo: 0.8 s on the 2-vCPU EPYC), made after the first fork when that first worker does not need them.

Why: the collect's first pass (timing) needs none of them, and waited for them before it could start. Now the
zygote forks it, then imports them while it builds its model (its own imports, the model's seeded init scaled on
a forward, the layer table: 0.7-1.5 s at yolov7 320-640), and the worker waits for them to end before its
warm-up (`wait_imports`): no forward it times runs beside the zygote's work. Every later worker is forked after
them, with them done, as before.

How a worker knows: a pipe made before the first fork. The zygote holds its write end until the imports are made,
then closes it; a worker forked before keeps the read end (and closes its copy of the write end at once), so that
end-of-file there says they are made; one forked after closes both.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import select
import time
from dataclasses import dataclass

WAIT_S = 120.0
"""How long a worker waits for them at most (the zygote's READY_S for its first imports): then it goes on."""


def import_all(names: tuple[str, ...]) -> None:
    """Each module imported; one that fails is left to the worker that uses it, which then says why."""
    for name in names:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


@dataclass
class LateImports:
    """The zygote's side: the names, and the pipe's two ends."""

    names: tuple[str, ...]
    done_fd: int
    """The read end: end-of-file once the imports are made."""
    pending_fd: int | None
    """The write end, held by the zygote alone until the imports are made (None: they are)."""

    @classmethod
    def of(cls, names: tuple[str, ...]) -> LateImports:
        done, pending = os.pipe()
        return cls(names, done, pending)

    def make(self) -> None:
        """Import them, once."""
        if self.pending_fd is None:
            return
        import_all(self.names)
        gc.freeze()  # as after the first imports: what they made is never collected in a worker forked later
        os.close(self.pending_fd)
        self.pending_fd = None

    def forked(self) -> None:
        """In the forked child: keep the read end when the imports are not made yet (wait_imports waits on it)."""
        global _IMPORTS_FD
        if self.pending_fd is None:
            os.close(self.done_fd)
            return
        os.close(self.pending_fd)
        _IMPORTS_FD = self.done_fd


_IMPORTS_FD: int | None = None
"""In a worker forked before the zygote's late imports were made: the pipe's read end."""


def wait_imports(timeout_s: float = WAIT_S) -> float:
    """Before a worker times its first forward: wait until the zygote's late imports are made, where it was forked
    before them; the seconds waited (0 elsewhere: a worker forked after, or started as a process of its own)."""
    global _IMPORTS_FD
    if _IMPORTS_FD is None:
        return 0.0
    started = time.monotonic()
    with contextlib.suppress(OSError):
        select.select([_IMPORTS_FD], [], [], timeout_s)
        os.close(_IMPORTS_FD)
    _IMPORTS_FD = None
    return time.monotonic() - started
