"""A program's calls of its model, each given to the unchanged model or to a changed one, for `hwprof advise`.

The found model's instance `forward` is wrapped (as the pass driver wraps it, hwprof.program.driver), and the
program's calls after the one that found it follow a schedule of steps: which side makes the call (the baseline:
the program's own model; the variant: that model changed at its call), and whether it is warm-up, measured alone
("solo") or measured in an ABBA block. Per call: its forward (the model's call), its iteration (from the end of the
model's previous call to the end of this one: what the program did between its calls, then the forward), the
process's minor page faults over that iteration, and for a side's first CHECK_CALLS measured calls their input and
raw output, for the output check. Once the schedule is done the program is stopped cleanly (ProgramStop).

The changes (Change), applied here because they need no line of the program's code:
- channels_last: a copy of the model converted to channels_last, its input converted at each call;
- bf16: the model's call inside `torch.autocast("cpu", torch.bfloat16)`, its output given back in fp32 (what the
  program's own postprocess was written for);
- torch.compile of a copy of the model (a copy: compiling the wrapped instance would call its wrapper again);
- threads: torch.set_num_threads when the model is found (the program's own earlier setting is overridden);
  OMP_NUM_THREADS is set by the process's environment.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hwprof.program.driver import ProgramStop
from hwprof.program.finder import Found
from hwprof.program.forward_wrap import wrap_forward

BASELINE, VARIANT = "baseline", "variant"
SOLO_CALLS = 4
"""Each side's calls alone in a paired process: the baseline's before the variant exists, the variant's after the
blocks (hwprof.analysis.advice.rows.side_drift reads each side's paired forward against them)."""
CHECK_CALLS = 3
"""Measured calls per side whose input and raw output are kept for the output check."""


@dataclass(frozen=True)
class Step:
    side: str
    iteration: int
    """The side's iteration: 0, 1, ... in ABBA order for measured and solo calls; negative for warm-up."""
    phase: str
    """"warmup", "solo" or "measure"."""


def paired_steps(warmup: int, blocks: int) -> list[Step]:
    """Baseline warm-up, baseline alone, variant warm-up (it is built before its first), the ABBA blocks
    (A 2b, B 2b, B 2b+1, A 2b+1), then a variant warm-up call and the variant alone."""
    out = [Step(BASELINE, i - warmup, "warmup") for i in range(warmup)]
    out += [Step(BASELINE, k, "solo") for k in range(SOLO_CALLS)]
    out += [Step(VARIANT, i - warmup, "warmup") for i in range(warmup)]
    for b in range(blocks):
        a, c = 2 * b, 2 * b + 1
        out += [Step(BASELINE, a, "measure"), Step(VARIANT, a, "measure"), Step(VARIANT, c, "measure")]
        out.append(Step(BASELINE, c, "measure"))
    out.append(Step(VARIANT, -1, "warmup"))
    return out + [Step(VARIANT, k, "solo") for k in range(SOLO_CALLS)]


def single_steps(side: str, warmup: int, blocks: int) -> list[Step]:
    """One side in a process of its own: its warm-up, then as many measured calls as a paired side has."""
    return [Step(side, i - warmup, "warmup") for i in range(warmup)] + [
        Step(side, k, "measure") for k in range(2 * blocks)
    ]


def count_steps(calls: int) -> list[Step]:
    """advise's count of a program's calls (mode "count"): the unchanged model, up to `calls` calls once found."""
    return [Step(BASELINE, i - calls, "warmup") for i in range(calls)]


def schedule_calls(paired: bool, warmup: int, blocks: int) -> int:
    """The program's calls of its model, once found, that one worker's schedule takes: a paired worker's, or a
    side's alone in its process (the larger of the two for a candidate that may be measured either way)."""
    return len(paired_steps(warmup, blocks) if paired else single_steps(BASELINE, warmup, blocks))


@dataclass(frozen=True)
class Change:
    """What the variant changes at the model's call ("" / False / None: nothing)."""

    channels_last: bool = False
    bf16: bool = False
    compile_mode: str = ""
    threads: int | None = None

    @property
    def needs_copy(self) -> bool:
        """The variant is a copy of the model (every change made at its call): the program's own model stays as
        it was, the baseline's, and the copy's forward is not hwprof's wrapper of the original's."""
        return self.in_process

    @property
    def in_process(self) -> bool:
        """The change is made at the model's call (not by the environment alone)."""
        return self.channels_last or self.bf16 or bool(self.compile_mode)


@dataclass
class SideCalls:
    """One side's figures, by side iteration."""

    name: str
    forward_ms: dict[int, float] = field(default_factory=dict)
    iteration_ms: dict[int, float] = field(default_factory=dict)
    solo_ms: dict[int, float] = field(default_factory=dict)
    stamps: dict[int, list[int]] = field(default_factory=dict)
    """[iteration start, end, forward start, forward end], CLOCK_MONOTONIC ns."""
    faults: dict[int, float] = field(default_factory=dict)
    rss: dict[int, float] = field(default_factory=dict)
    """The process's resident bytes after each measured call."""
    threads: set[int] = field(default_factory=set)
    """torch.get_num_threads() at its measured calls."""
    batch: int = 1
    checked: list[tuple[Any, Any]] = field(default_factory=list)
    """(input, raw output) of its first CHECK_CALLS measured calls (detached copies)."""
    setup: dict[str, float] = field(default_factory=dict)


def detached(value: Any) -> Any:
    """A copy of a model's output (tensors detached and cloned, containers rebuilt)."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, tuple | list):
        return type(value)(detached(v) for v in value)
    if isinstance(value, dict):
        return {k: detached(v) for k, v in value.items()}
    return value


def to_float(value: Any) -> Any:
    """Floating tensors of an output in fp32 (an autocast forward returns bf16)."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.float() if value.is_floating_point() else value
    if isinstance(value, tuple | list):
        return type(value)(to_float(v) for v in value)
    if isinstance(value, dict):
        return {k: to_float(v) for k, v in value.items()}
    return value


def first_input(args: tuple[Any, ...]) -> Any:
    import torch

    return next((a for a in args if isinstance(a, torch.Tensor)), None)


def changed_call(model: Any, change: Change) -> Callable[..., Any]:
    """The variant's call: `model` (the program's model copied) changed, its input converted where the layout
    changes."""
    import torch

    if change.channels_last:
        model = model.to(memory_format=torch.channels_last)
    if change.compile_mode:
        model = torch.compile(model, mode=change.compile_mode)

    def call(*args: Any, **kwargs: Any) -> Any:
        if change.channels_last:
            args = tuple(
                a.contiguous(memory_format=torch.channels_last) if isinstance(a, torch.Tensor) and a.dim() == 4 else a
                for a in args
            )
        if change.bf16:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return to_float(model(*args, **kwargs))
        return model(*args, **kwargs)

    return call


@dataclass
class AdviseCalls:
    """The program's calls of its model, run by the schedule; `on_step`: (done, total) after each call."""

    steps: list[Step]
    change: Change
    on_step: Callable[[int, int], None] = lambda done, total: None
    faults: Callable[[], int] = lambda: 0
    resident: Callable[[], int] = lambda: 0
    on_first_call: Callable[[], None] = lambda: None
    """Called at the first call after the model was found (the finder's global hooks come off there: the variant's
    copy, called from the model's call, must not count as another model, nor every module call stay slow)."""
    found: Found | None = None
    sides: dict[str, SideCalls] = field(default_factory=dict)
    index: int = 0
    variant: Callable[..., Any] | None = None
    _copy: Any = None
    _restore: Callable[[], None] | None = None
    _last_end: int | None = None
    _last_faults: int = 0
    _prepare_s: float = 0.0

    @property
    def done(self) -> bool:
        return self.index >= len(self.steps)

    def adopt(self, found: Found, args: tuple[Any, ...]) -> None:
        """The finder chose the model (in the pre-hook of its call): copy it where the change needs a copy, set
        the variant's threads, and wrap its forward for the calls after this one."""
        import torch

        self.found = found
        started = time.perf_counter()
        if self.change.needs_copy:
            self._copy = copy.deepcopy(found.module)  # before the wrap: the copy's forward is its own
        self._prepare_s = time.perf_counter() - started
        if self.change.threads is not None:
            torch.set_num_threads(self.change.threads)
        self._restore = wrap_forward(found.module, self._call)

    def finish(self) -> None:
        """The model's forward given back (the schedule is done, or the program ended)."""
        if self._restore is not None:
            self._restore()
            self._restore = None

    def side(self, name: str) -> SideCalls:
        return self.sides.setdefault(name, SideCalls(name))

    def _call(self, forward: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:

        if self.done:
            return forward(*args, **kwargs)
        if self.index == 0 and self._last_end is None:
            self.on_first_call()
        step = self.steps[self.index]
        side = self.side(step.side)
        call = forward
        if step.side == VARIANT and self.change.in_process:
            call = self._variant(side)
        first = step.side == VARIANT and "first_forward_s" not in side.setup
        start = time.monotonic_ns()
        out = call(*args, **kwargs)
        end = time.monotonic_ns()
        if first:
            side.setup["first_forward_s"] = (end - start) / 1e9
        self._record(side, step, args, out, start, end)
        self.index += 1
        self.on_step(self.index, len(self.steps))
        if self.done:
            self.finish()
            raise ProgramStop(f"advise: {len(self.steps)} calls of the model made")
        return out

    def _variant(self, side: SideCalls) -> Callable[..., Any]:
        if self.variant is None:
            started = time.perf_counter()
            self.variant = changed_call(self._copy, self.change)
            side.setup["prepare_s"] = self._prepare_s + time.perf_counter() - started
        return self.variant

    def _record(self, side: SideCalls, step: Step, args: tuple[Any, ...], out: Any, start: int, end: int) -> None:
        import torch

        faults = self.faults()
        began, self._last_end = self._last_end, end
        before, self._last_faults = self._last_faults, faults
        if step.phase == "warmup" or began is None:
            return
        k = step.iteration
        forward_ms = (end - start) / 1e6
        if step.phase == "solo":
            side.solo_ms[k] = forward_ms
            return
        side.forward_ms[k] = forward_ms
        side.iteration_ms[k] = (end - began) / 1e6
        side.stamps[k] = [began, end, start, end]
        side.faults[k] = float(faults - before)
        side.rss[k] = float(self.resident())
        side.threads.add(torch.get_num_threads())
        x = first_input(args)
        if x is not None:
            side.batch = int(x.shape[0]) if x.dim() else 1
            if len(side.checked) < CHECK_CALLS:
                side.checked.append((x.detach().clone(), detached(out)))
