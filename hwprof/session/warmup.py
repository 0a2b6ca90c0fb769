"""When a pass's warm-up ends (issue 66): once its process is warm, instead of always after --warmup's iterations.

Where the passes stop once their figures are resolved (no --iters) and --warmup is not given (RunConfig.extra's
"warmup_steady"), a pass of the built-in pipeline warms up until the forward of its last warm-up iteration is within
STEADY_RATIO of a warm forward: the timing pass's forward p50 (every pass after it); in the timing pass itself, which
has none, until a warm-up's forward is no longer faster than the one before it by more than STEADY_RATIO (two at
least: the earlier of the two was warm too). RunConfig.warmup (3) stays the most.

Why: the warm-up repeated what the process had already done. The forward of a forked pass's first warm-up
iteration was within its pass's steady spread (yolov7 at 640 on the 2-vCPU Xeon, 2026-11-28: 915, 994, 873 and
905 ms in the kernels, layers, trace and Scalene passes against their measured forwards of 950-1,030, 950-1,030,
840-1,310 and 1,120-1,240 ms; yolov7-tiny at 320 the same), so that its next two were 2 x 5 forwards of the collect's
time (about 9 s at 640) for nothing. A process that is not warm (a first call that JIT-compiles or autotunes, a
runtime's lazy set-up) has a first forward far above a warm one, and warms up on, to the most.

Where the user gives --warmup N, or --iters N (the fixed plan, as it always ran), every pass warms up N times."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hwprof.core.config import RunConfig

STEADY_RATIO = 1.25
"""A warm-up forward at most this many times the warm one it is held against: the process is warm. Above the
passes' own costs over the timing pass (1.0-1.2x: their collectors run in their warm-up too) and the host's
iteration-to-iteration spread; below what a cold first call adds (oneDNN's primitives made at the first call,
CUDA's autotuning: several times a forward)."""


def steady(config: RunConfig) -> bool:
    """Whether the warm-up ends once warm (the default), or runs config.warmup iterations (--warmup, --iters)."""
    return bool(config.extra.get("warmup_steady")) and config.program is None


@dataclass(frozen=True)
class Warmth:
    """The warm-up's verdict after one of its iterations."""

    warm: bool
    iterations: int
    why: str
    """The comparison that decided, in words."""

    @property
    def text(self) -> str:
        """ "warm after 1 warm-up iteration (its forward 915.0 ms, within 1.25x the timing pass's p50, 900.9 ms)"."""
        state = "warm" if self.warm else "not yet warm"
        return f"{state} after {self.iterations} warm-up iteration{'s' * (self.iterations != 1)} ({self.why})"


def check(forwards_ms: Sequence[float], reference_ms: float | None) -> Warmth:
    """After a warm-up iteration: its forwards so far (in order) against the timing pass's forward p50 (None: this
    is the timing pass, or no timing pass ran), whether the process is warm."""
    n = len(forwards_ms)
    if not forwards_ms:
        return Warmth(False, 0, "no forward timed")
    last = forwards_ms[-1]
    if reference_ms:
        warm = last <= STEADY_RATIO * reference_ms
        relation = "within" if warm else "above"
        why = f"its forward {last:.1f} ms, {relation} {STEADY_RATIO:g}x the timing pass's p50, {reference_ms:.1f} ms"
        return Warmth(warm, n, why)
    if n < 2:
        return Warmth(False, n, f"its forward {last:.1f} ms, with none before it to hold it against")
    before = forwards_ms[-2]  # warm when that one was not much slower: the forward stopped getting faster
    warm = before <= STEADY_RATIO * last
    relation = "within" if warm else "above"
    why = f"the forward before the last, {before:.1f} ms, {relation} {STEADY_RATIO:g}x the last one's, {last:.1f} ms"
    return Warmth(warm, n, why)
