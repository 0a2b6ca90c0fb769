"""A program's calls of its model, turned into hwprof's iterations: warm-up, measured and clean (ABBA) ones.

Iteration k spans from the end of the model's call k-1 to the end of call k: it holds what the program did
between two forwards (the previous frame's postprocess, this frame's load and preprocess: "other" where no
stage claims it) and then the forward, the `forward` stage. The first marked calls are warm-up (the pass is
set up at the first, after the calls that chose the model); the calls after them follow the pass's schedule
(measured, or clean in a paired pass), one call per step. The first marked call's iteration holds its forward
alone: it is always warm-up (--warmup >= 1). Once the schedule is done the program is stopped cleanly
(ProgramStop, raised from the model's call), or left to run to its end unmeasured (--program-end run), or, in an
attached service (hwprof.agent, end "detach"), given its model's forward back and left to serve on. A
program that ends inside an iteration (after its last forward) leaves a tail with no forward: it is closed for
the collectors and not kept (PassHooks.discard_iteration). torch.jit.trace's calls of the model pass through
unmarked (Calls.traced).

The driver owns no collector: it tells the pass (`PassHooks`, hwprof.session.program_pass_runner) when to start,
switch, and stop them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from hwprof.core.input_shapes import input_shape
from hwprof.core.markers import MarkerBus
from hwprof.program.call_facts import CallFacts
from hwprof.program.finder import Found, ProgramAbort, in_trace
from hwprof.program.forward_wrap import wrap_forward
from hwprof.program.whole_model import WholeModelCheck, outer_call
from hwprof.workload.script_scopes import class_name


class ProgramStop(BaseException):
    """Raised from the model's call after the last measured one (--program-end stop): the program unwinds (its
    `finally` blocks and context managers run) and the pass ends. A BaseException, so that the program's own
    `except Exception` does not swallow it."""


class PassHooks(Protocol):
    """What the pass does at the driver's moments (hwprof.session.program_pass_runner.ProgramPassRunner)."""

    def model_found(self, found: Found, sample: tuple[Any, ...]) -> list[tuple[bool, int]]:
        """Build what the pass needs around the model (model.json, collectors prepared, layer markers on);
        returns the schedule of measured (True) and clean (False) steps."""
        ...

    def start_measuring(self) -> None: ...

    def set_clean(self, clean: bool) -> None: ...

    def after_measured(self, iteration: int) -> None: ...

    def after_step(self) -> None: ...

    def stop_measuring(self) -> None: ...

    def discard_iteration(self, iteration: int) -> None:
        """The program ended inside this iteration, before its forward ended: its markers are not kept."""
        ...


@dataclass
class Calls:
    """The model's calls the pass saw."""

    before: int = 0
    """Calls before the model was chosen and the choosing call (its forward was bound before the pre-hook chose
    it): 2 for a model found by repetition, 1 for one named with --program-model. Never marked."""
    total: int = 0
    """Marked calls: warm-up, measured and clean."""
    warmup: int = 0
    measured: int = 0
    clean: int = 0
    after: int = 0
    """Calls after the schedule was done (--program-end run), unmarked."""
    tail: bool = False
    """The program ended inside an iteration (after its last forward): that iteration was discarded."""
    traced: int = 0
    """Calls made inside torch.jit.trace (the tracer's: tracing and checking the trace), unmarked."""
    thread: str | None = None
    """The thread that made the marked calls, where it is not the main thread (its name)."""
    other_threads: dict[str, int] = field(default_factory=dict)
    """Calls from threads other than the marked calls' (by thread name): passed through, unmarked."""

    @property
    def seen(self) -> int:
        """Every call of the model by the program."""
        return self.before + self.total + self.after + self.traced + sum(self.other_threads.values())


@dataclass
class ProgramDriver:
    bus: MarkerBus
    hooks: PassHooks
    warmup: int
    end: str = "stop"
    steps: list[tuple[bool, int]] = field(default_factory=list)
    found: Found | None = None
    calls: Calls = field(default_factory=Calls)
    done: bool = False
    """The schedule is done: later calls run unmarked."""
    on_warmup_end: Callable[[], None] = lambda: None
    """Called once, before the first measured iteration (the finder's global hooks come off there)."""
    sync: Callable[[], None] | None = None
    """For a model on a GPU: waits for its kernels, so that the forward's end marker is the end of its work and
    not of its launches (a program's own later `.cpu()` would otherwise take the forward's time into "other")."""
    _open: bool = False
    """An iteration is open (its begin marker emitted)."""
    _in_forward: bool = False
    _set_up: bool = False
    """The pass was set up around the model (PassHooks.model_found), at its first call after the choice."""
    _sample: tuple[Any, ...] = ()
    """The choosing call's arguments (for `settle`)."""
    _internal: int = 0
    """hwprof's own calls of the model (the layer table, FLOPs: after the program, hwprof.session.program_pass_runner):
    not the program's."""
    _thread: int | None = None
    """The thread that calls the model: stage markers come from it alone."""
    _restore: Callable[[], None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _depth: threading.local = field(default_factory=threading.local)
    """Per thread: how many stages are open (the outermost alone is marked)."""
    _stage: str | None = None
    """The stage whose begin marker is out (on the model's thread, in the open iteration)."""
    _cut: str | None = None
    """A stage cut at the forward's begin (it holds the model's call): it begins again in the next iteration."""
    ends: tuple[type[BaseException], ...] = (ProgramStop, ProgramAbort)
    """hwprof's ends of the program, raised from the model's call (ProgramStop too, and the pass's stop)."""
    end_elsewhere: Callable[[BaseException], None] = lambda exc: None
    """One of `ends` is raised in the model's call: raise it in the main thread too where that call is another
    thread's (hwprof.program.thread_stop)."""
    forward_ns: int = 0
    """The marked forwards' time so far (the whole-model check's measure of the model inside the program's call)."""
    whole: WholeModelCheck | None = None
    """The model is called inside another module's call of the program's: its share of that call, checked once
    (hwprof.program.whole_model)."""
    facts: CallFacts = field(default_factory=CallFacts)
    """What each marked call ran under that the program may change: torch's thread count, grad mode."""
    per_call: bool = False
    """A service's calls (hwprof.agent): an iteration is the call alone, not the time since the previous one (idle
    between requests)."""
    any_thread: bool = False
    """A call from any thread is marked (an attached service's window, which lets one call through at a time), not
    only the first marked call's thread's."""

    @property
    def in_forward(self) -> bool:
        """Inside a marked forward of the model."""
        return self._in_forward

    def adopt(self, found: Found, args: tuple[Any, ...]) -> None:
        """The model was chosen in the pre-hook of one of its calls: wrap its forward, so that its next call is
        the first marked one (torch bound the choosing call's forward before the hook ran). The pass is set up at
        that call (`_setup`): until then the finder may choose another module (hwprof.program.finder), and this
        one's forward is given back."""
        if self._restore is not None:
            self._restore()
        self.found = found
        self.calls = Calls(before=found.root_calls_before)  # a replaced module's calls were not this one's
        self._disarm()
        self._sample = args
        self._restore = wrap_forward(found.module, self._call)

    def _setup(self, args: tuple[Any, ...]) -> None:
        assert self.found is not None
        self._set_up = True
        try:
            with self.internal():
                self.steps = self.hooks.model_found(self.found, args)
        except ProgramAbort:
            raise
        except Exception as exc:  # raised inside the program's call: its own `except Exception` must not hide it
            raise ProgramAbort(f"hwprof could not set up the model {self.found.name}: {exc}") from exc
        self._check_whole()

    def _check_whole(self) -> None:
        """The model is called inside another module's call: time the program's next call of that one."""
        assert self.found is not None
        outer = outer_call(self.found.module)
        if outer is None:
            return
        check = WholeModelCheck(outer, self.model_label(), lambda: self.forward_ns)
        if check.arm():
            self.whole = check

    def model_label(self) -> str:
        """The measured module as the run names it: its name, class and place in the program."""
        assert self.found is not None
        at = f" at {self.found.at}" if self.found.at is not None else ""
        return f"{self.found.name} ({class_name(self.found.module)}){at}"

    def _disarm(self) -> None:
        if self.whole is not None:
            self.whole.disarm()

    def settle(self) -> None:
        """The program ended before calling its model again after choosing it: the pass is set up all the same
        (its model.json, its layer table), with the choosing call's input, and measured nothing."""
        if self.found is not None and not self._set_up and not self.bus.halted:
            self._setup(self._sample)

    @contextmanager
    def internal(self) -> Iterator[None]:
        """hwprof's own forwards of the model: passed through unmarked."""
        self._internal += 1
        try:
            yield
        finally:
            self._internal -= 1

    def _call(self, forward: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return self._program_call(forward, args, kwargs)
        except BaseException as exc:
            if isinstance(exc, self.ends):  # hwprof's end of the program, raised in the thread that calls the model
                self.end_elsewhere(exc)
            raise

    def _program_call(self, forward: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._internal or self._in_forward:
            return forward(*args, **kwargs)
        if self.any_thread:
            self._thread = threading.get_ident()
        if self._thread is not None and threading.get_ident() != self._thread:
            name = threading.current_thread().name  # another thread's call: not an iteration of this one's
            self.calls.other_threads[name] = self.calls.other_threads.get(name, 0) + 1
            return forward(*args, **kwargs)
        if in_trace():  # torch.jit.trace's call, not the program's: the traced module is what it will call
            self.calls.traced += 1
            return forward(*args, **kwargs)
        if not self._set_up and not self.done and not self.bus.halted:
            self._setup(args)
        if self.done or self.bus.halted:
            self.calls.after += 1
            return forward(*args, **kwargs)
        if self._thread is None:
            self._thread = threading.get_ident()
            if threading.current_thread() is not threading.main_thread():
                self.calls.thread = threading.current_thread().name
        if not self._open:
            self._begin()
        bus = self.bus
        if self._stage is not None:
            bus.emit("stage", "E", self._stage)
            self._cut, self._stage = self._stage, None
        bus.emit("stage", "B", "forward")
        self._in_forward = True
        start = time.perf_counter_ns()
        try:
            out = self.model_forward(forward, args, kwargs)
        finally:
            self._in_forward = False
            self.forward_ns += time.perf_counter_ns() - start
        bus.emit("stage", "E", "forward")
        bus.input_shape(input_shape(args))
        self.facts.record(*self._step()[:2])
        self._end()
        return out

    def model_forward(self, forward: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A marked forward of the program's model, between its stage markers. Its own frame, named as
        collectors.pyspy.clock looks for it: a sampler sees the forward stage in the stacks, as it sees
        Pipeline.forward in hwprof's own pipeline, and aligns its clock on it."""
        out = forward(*args, **kwargs)
        if self.sync is not None:
            self.sync()
        return out

    def _step(self) -> tuple[bool, bool, int]:
        """(warm-up, measured, index) of the call that opens the next iteration."""
        n = self.calls.total + 1
        if n <= self.warmup:
            return True, False, n - self.warmup - 1
        measured, index = self.steps[n - self.warmup - 1]
        return False, measured, index

    def _begin(self) -> None:
        warmup, measured, index = self._step()
        if not warmup and self.calls.total == self.warmup:
            self.on_warmup_end()
            self.hooks.start_measuring()
        if not warmup and not measured:
            self.hooks.set_clean(True)
        bus = self.bus
        bus.iteration, bus.warmup, bus.clean = index, warmup, not warmup and not measured
        bus.emit("iteration", "B", "iteration")
        self._open = True
        if self._cut is not None:
            bus.emit("stage", "B", self._cut)
            self._stage, self._cut = self._cut, None

    def _end(self) -> None:
        warmup, measured, index = self._step()
        self.bus.emit("iteration", "E", "iteration")
        self._open = False
        self.calls.total += 1
        if warmup:
            self.calls.warmup += 1
        elif measured:
            self.calls.measured += 1
            self.hooks.after_measured(index)
        else:
            self.calls.clean += 1
            self.bus.clean = False
            self.hooks.set_clean(False)
        self.hooks.after_step()
        if self.calls.total < self.warmup + len(self.steps):
            if not self.per_call:
                self._begin()
            return
        self.finish(unwrap=self.end != "run")  # run: its later calls are counted (Calls.after)
        if self.end == "stop":
            raise ProgramStop(f"stopped after {self.calls.measured} measured calls of the model")

    def finish(self, unwrap: bool = True) -> None:
        """The schedule is over (or the program ended): an iteration left open is closed, collectors stopped once;
        `unwrap`: the model's forward is given back."""
        if unwrap and self._restore is not None:
            self._restore()
            self._restore = None
        if unwrap:
            self._disarm()
        if self.done:
            return
        self.done = True
        self._cut = None
        if self._open and not self.bus.halted:
            # The program ended after its last forward (or inside it): what is left is its tail, with no forward,
            # not an iteration. The collectors see it closed; the pass's spans do not keep it.
            if self._stage is not None:
                self.bus.emit("stage", "E", self._stage)
                self._stage = None
            self.bus.emit("iteration", "E", "iteration")
            self._open = False
            if self.bus.clean:
                self.bus.clean = False
                self.hooks.set_clean(False)
            self.hooks.discard_iteration(self.bus.iteration)
            self.calls.tail = True
        if self.calls.total > self.warmup:
            self.hooks.stop_measuring()

    def stage_sink(self, name: str, phase: str) -> None:
        """A stage between forwards (a known function, --stage, hwprof.stage; hwprof.stage_api's sink): marked
        only inside an iteration, outside the forward, on the model's thread, and only the outermost of nested
        ones (it claims their time: none is counted twice). A stage that holds the model's call ends at the
        forward's begin and begins again after it, in the next iteration: the forward stays the forward's."""
        local = self._depth
        depth = getattr(local, "n", 0)
        if phase == "B":
            local.n = depth + 1
            if depth == 0 and self._marking_here():
                self.bus.emit("stage", "B", name)
                self._stage = name
            return
        if depth == 0:
            return  # an end whose begin came before the gate had a sink
        local.n = depth - 1
        if depth == 1 and self._stage is not None and threading.get_ident() == self._thread:
            self._stage = None
            if not self.bus.halted:
                self.bus.emit("stage", "E", name)

    def _marking_here(self) -> bool:
        return (
            self._open
            and not self.done
            and not self._in_forward
            and not self._internal
            and threading.get_ident() == self._thread
        )
