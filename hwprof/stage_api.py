"""`hwprof.stage("name")`: a program marks a stage of its own loop for `hwprof collect -- python SCRIPT ...`.

The module imports nothing (not torch, not the rest of hwprof): a program that imports it pays for one small
module, and a stage entered while hwprof is not running costs a global read and a call. Under
`hwprof collect -- python SCRIPT ...` the pass's driver (hwprof.program.driver.ProgramDriver.stage_sink) is the
gate's sink: every begin and end goes to it, and it decides what becomes a stage marker (inside an iteration,
outside the forward, on the model's thread, the outermost stage only). The functions hwprof knows by name
(cv2.imread, NMS, letterbox, ...) and the --stage ones go through the same gate (hwprof.program.stage_hooks).

It sits below every other layer of hwprof (tests/test_layers.py): the program imports it as `hwprof.stage`, and
the driver sets its sink.
"""

from __future__ import annotations

import functools

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing's names for the checker alone: importing typing would take 2 ms, ten times this module
    from collections.abc import Callable
    from typing import Any, TypeVar

    Sink = Callable[[str, str], None]
    """sink(name, phase): phase "B" when a stage begins, "E" when it ends."""
    F = TypeVar("F", bound=Callable[..., Any])

_sink: Sink | None = None


def set_sink(sink: Sink | None) -> Sink | None:
    """Route every stage's begin and end to `sink` (None: nowhere); returns the sink it replaces."""
    global _sink
    previous, _sink = _sink, sink
    return previous


def current_sink() -> Sink | None:
    return _sink


class stage:
    """Time a block of the program, or every call of a function, as the stage `name` of hwprof's stage table.

    As a context manager::

        import hwprof

        for path in paths:
            with hwprof.stage("load"):
                image = decode(path)
            ...

    or as a decorator (`@hwprof.stage("postprocess")` over a function). Under
    `hwprof collect [options] -- python SCRIPT ARGS` the block becomes a stage of the iteration it runs in, beside
    `forward` (the model's call) and the stages hwprof times by itself (load, preprocess, postprocess, write);
    whatever no stage claims is shown as `other`. The outermost stage claims its time: a stage entered inside
    another, or inside a function hwprof already times, adds nothing of its own. A stage that holds the model's
    call is cut at the forward, which stays the forward's. Stages entered on another thread than the model's,
    or outside the measured calls, are not recorded.

    Without hwprof, the block runs as it would without the `with`: entering and leaving cost about two
    attribute reads and two calls (`python scripts/stage_cost.py` prints the figures).
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> stage:
        sink = _sink
        if sink is not None:
            sink(self.name, "B")
        return self

    def __exit__(self, *exc: object) -> None:
        sink = _sink
        if sink is not None:
            sink(self.name, "E")

    def __call__(self, function: F) -> F:
        name = self.name

        @functools.wraps(function)
        def staged(*args: Any, **kwargs: Any) -> Any:
            sink = _sink
            if sink is None:
                return function(*args, **kwargs)
            sink(name, "B")
            try:
                return function(*args, **kwargs)
            finally:
                sink(name, "E")

        return staged  # type: ignore[return-value]
