"""A window's output sent to hwprof, not to the service's own streams.

A pass's progress lines go to the stream hwprof.session.worker_io pins (any thread: the service's calls write them);
its log (sys.stderr) is routed by thread: what the window's own thread writes goes to hwprof, what the service's
threads write goes where it always went. sys.stderr is given back at the window's end unless the service replaced it
meanwhile (then its own stays)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from hwprof.session.worker_io import progress_to


class ThreadRouted:
    """sys.stderr while a window is open: the window's thread's writes to `mine`, the others' to `theirs`."""

    def __init__(self, theirs: TextIO, mine: Any, thread: int) -> None:
        self.theirs = theirs
        self.mine = mine
        self.thread = thread

    def _target(self) -> Any:
        return self.mine if threading.get_ident() == self.thread else self.theirs

    def write(self, text: str) -> int:
        return int(self._target().write(text))

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.theirs, name)


@contextmanager
def routed_output(out: Any, err: Any) -> Iterator[None]:
    """Progress lines to `out`, this thread's stderr to `err`, for the block."""
    router = ThreadRouted(sys.stderr, err, threading.get_ident())
    sys.stderr = router
    try:
        with progress_to(out):
            yield
    finally:
        if sys.stderr is router:
            sys.stderr = router.theirs
