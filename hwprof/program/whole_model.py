"""Is the module measured a whole model? Its forward against the call the program made around it.

A model named with --program-model may be called inside another module's call: a wrapper's (AutoBackend around a
DetectionModel), or, when the name reached the wrong module, the model's (a layer the name also gives). hwprof
measures the found module as the model; when it takes a small share of the program's own call around it, it is a
part, not the model, and the run is refused in one line (WrongModule), naming both and the name to use.

The program's call is the outermost module call in flight when the model is first called after its choice
(torch's Module._call_impl frames on the stack). That call is already running, so its next call is the one timed:
its forward is wrapped once (an instance attribute, as the driver wraps the model's), the model's forward time
inside it is added up by the driver, and the wrapper comes off after the first call that called the model with a
share at or above SMALL_SHARE. One timed call is one sample: a preemption between the model's forward and the rest
of the wrapper's call (a busy neighbour, the suite's own load) once made a whole model look like a part, so a call
below the share is timed again, and the run is refused only when LOW_CALLS calls in a row are below it. The share
kept is the largest seen (the least disturbed call). A program that never calls it again leaves no verdict; one
that stops before LOW_CALLS low calls keeps its largest share, recorded, and is not refused.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from hwprof.program.finder import ProgramAbort, find_name
from hwprof.program.program_code import TORCH_DIR, Place, is_program_frame
from hwprof.workload.script_scopes import class_name

SMALL_SHARE = 0.1
"""Below this share of the program's call, the measured module is a part of what the program calls (one layer of
yolov8n is at most a few percent of its forward); a wrapper's own work (letterbox, NMS inside its forward) leaves
a whole model well above it."""
_MODULE_FILE = str(TORCH_DIR / "nn" / "modules" / "module.py")
_CALL_FRAMES = ("_call_impl", "_wrapped_call_impl")
MAX_TRIES = 3
"""The program's calls of the outer module timed at most, waiting for one that calls the model."""
LOW_CALLS = 2
"""Calls in a row below SMALL_SHARE before the run is refused: one disturbed call refuses nothing."""


class WrongModule(ProgramAbort):
    """The measured module's forward is a small share of the program's call around it."""


@dataclass
class OuterCall:
    """The program's call around the model: the module, how and where the program names it."""

    module: Any
    name: str | None
    at: Place | None

    def label(self) -> str:
        kind = class_name(self.module)
        return (f"{self.name} ({kind})" if self.name else kind) + (f" at {self.at}" if self.at else "")


def outer_call(model: Any) -> OuterCall | None:
    """The outermost module call in flight on this thread, where it is not the model's own."""
    outer: FrameType | None = None
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name in _CALL_FRAMES and code.co_filename == _MODULE_FILE:
            outer = frame
        frame = frame.f_back
    module = outer.f_locals.get("self") if outer is not None else None
    if outer is None or module is None or module is model:
        return None
    caller = outer.f_back
    while caller is not None and not is_program_frame(caller):
        caller = caller.f_back
    if caller is None:
        return OuterCall(module, None, None)
    return OuterCall(module, find_name(module, caller), Place.of(caller))


@dataclass
class WholeModelCheck:
    """The timing of one program call of the outer module, with the model's forward time inside it."""

    outer: OuterCall
    model_label: str
    """The measured module as the run names it: "m (Conv) at script.py:9"."""
    forward_ns: Callable[[], int]
    """The model's forward time so far (the driver's running total)."""
    share: float | None = None
    """The model's forward time as a share of the timed call's, once timed."""
    outer_ms: float | None = None
    model_ms: float | None = None
    _tries: int = 0
    _low: int = 0
    _restore: Callable[[], None] | None = field(default=None, repr=False)

    def arm(self) -> bool:
        """Wrap the outer module's forward; False where it cannot be (a TorchScript module's)."""
        import torch

        module = self.outer.module
        if isinstance(module, torch.jit.ScriptModule):
            return False
        own = module.__dict__.get("forward")
        forward = module.forward

        def timed(*args: Any, **kwargs: Any) -> Any:
            before, start = self.forward_ns(), time.perf_counter_ns()
            out = forward(*args, **kwargs)
            self._timed(time.perf_counter_ns() - start, self.forward_ns() - before)
            return out

        def undo() -> None:
            if own is None:
                module.__dict__.pop("forward", None)
            else:
                module.forward = own

        module.forward = timed
        self._restore = undo
        return True

    def disarm(self) -> None:
        if self._restore is not None:
            self._restore()
            self._restore = None

    def _timed(self, outer_ns: int, inside_ns: int) -> None:
        self._tries += 1
        if inside_ns <= 0 or outer_ns <= 0:
            if self._tries >= MAX_TRIES:
                self.disarm()
            return
        share = min(inside_ns / outer_ns, 1.0)
        if self.share is None or share > self.share:
            self.share, self.outer_ms, self.model_ms = share, outer_ns / 1e6, inside_ns / 1e6
        if share >= SMALL_SHARE:
            self.disarm()
            return
        self._low += 1
        if self._low >= LOW_CALLS:
            self.disarm()
            raise WrongModule(self.refusal())

    def refusal(self) -> str:
        name = self.outer.name
        return (
            f"the module measured as the model, {self.model_label}, took {self.model_ms:.3g} ms of the program's "
            f"call of {self.outer.label()}, which took {self.outer_ms:.3g} ms ({self.share:.1%}): a part of the "
            "model, not the whole one; "
            + (f"name the module the program calls: --program-model {name}" if name else "name the module it calls")
        )

    def result(self) -> tuple[str, float] | None:
        """(the program's call, the model's share of it), once timed."""
        return (self.outer.label(), self.share) if self.share is not None else None
