"""When a pass's warm-up ends (issue 66): once its process is warm, instead of always after --warmup's iterations.

Where the passes stop once their figures are resolved (no --iters) and --warmup is not given (RunConfig.extra's
"warmup_steady"), a pass of the built-in pipeline warms up until the forward of its last warm-up iteration is within
STEADY_RATIO of a warm forward of the run: the slowest undisturbed forward p50 of the passes before it (`reference`:
the timing pass's measured forwards, each paired pass's clean ones, its collectors off). In the timing pass itself,
which has none, until a warm-up's forward is no longer faster than the one before it by more than STEADY_RATIO (two
at least: the earlier of the two was warm too). RunConfig.warmup (3) stays the most.

Why: the warm-up repeated what the process had already done. The forward of a forked pass's first warm-up
iteration was within its pass's steady spread (yolov7 at 640 on the 2-vCPU Xeon, 2026-11-28: 915, 994, 873 and
905 ms in the kernels, layers, trace and Scalene passes against their measured forwards of 950-1,030, 950-1,030,
840-1,310 and 1,120-1,240 ms; yolov7-tiny at 320 the same), so that its next two were 2 x 5 forwards of the collect's
time (about 9 s at 640) for nothing. A process that is not warm (a first call that JIT-compiles or autotunes, a
runtime's lazy set-up) has a first forward far above a warm one, and warms up on, to the most.

Why the slowest of the earlier passes and not the timing pass's alone: one process's warm forward is not another's.
On the 2-vCPU EPYC (2026-11-29, yolov7 at 640) the passes' undisturbed p50s of one collect lay 10-25% apart (the
timing pass's 410 ms, the layers pass's clean 480 ms), while a forked pass's first forward was 1.08-1.28x its own
process's p50 (476-577 ms): held to the timing pass alone, a fast timing process sent three passes into a second
warm-up iteration (1.4 s) whose first was as warm as the others'. The slowest undisturbed p50 so far carries that
spread; a cold first call, several times a forward, is still far above 1.25x of it.

Where the user gives --warmup N, or --iters N (the fixed plan, as it always ran), every pass warms up N times."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.core.config import RunConfig

if TYPE_CHECKING:
    from hwprof.core.markers import Marker

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


@dataclass(frozen=True)
class Reference:
    """A warm forward of the run that a warm-up forward is held against."""

    ms: float
    source: str
    """Whose p50 it is, in words: "the timing pass's p50", "the layers pass's clean p50"."""


def reference(run_dir: Path, this_pass: str) -> Reference | None:
    """The slowest undisturbed forward p50 among the run's passes other than `this_pass` whose markers are written
    (those before it): the timing pass's measured forwards, a paired pass's clean ones; None where there is none
    (this is the timing pass, or none ran before it). run.json holds these p50s only once the run is finished
    (hwprof.session.finish), so they are read from the markers here."""
    import statistics

    from hwprof.core.spans import clean_forward_ms_by_iteration, forward_p50_ms

    found: list[Reference] = []
    for path in sorted((run_dir / "passes").glob("*/markers.jsonl")):
        name = path.parent.name
        if name == this_pass:
            continue
        try:
            markers = _forward_markers(path)
        except (OSError, ValueError, TypeError, IndexError):
            continue
        if name == "timing":
            p50, words = forward_p50_ms(markers), "the timing pass's p50"
        else:
            clean = list(clean_forward_ms_by_iteration(markers).values())
            p50, words = (statistics.median(clean) if clean else None), f"the {name} pass's clean p50"
        if p50:
            found.append(Reference(p50, words))
    return max(found, key=lambda r: r.ms) if found else None


def _forward_markers(path: Path) -> list[Marker]:
    """The forward stage's markers of a markers.jsonl: only its lines that hold "forward" are parsed. A paired
    pass's file is mostly layer markers (yolov7-tiny at 320: 1.3 MB for the kernels pass's 150 iterations), which
    read and checked whole took the last pass 0.17 s of its warm-up; these lines, 0.01 s."""
    from hwprof.core.markers import Marker
    from hwprof.schema.check import read_jsonl

    return [Marker.from_row(row) for _, row in read_jsonl(path, containing='"forward"').rows]


def check(forwards_ms: Sequence[float], held_to: Reference | None) -> Warmth:
    """After a warm-up iteration: its forwards so far (in order) against a warm forward of the run (`reference`;
    None: this is the timing pass, or no pass ran before it), whether the process is warm."""
    n = len(forwards_ms)
    if not forwards_ms:
        return Warmth(False, 0, "no forward timed")
    last = forwards_ms[-1]
    if held_to is not None:
        warm = last <= STEADY_RATIO * held_to.ms
        relation = "within" if warm else "above"
        why = f"its forward {last:.1f} ms, {relation} {STEADY_RATIO:g}x {held_to.source}, {held_to.ms:.1f} ms"
        return Warmth(warm, n, why)
    if n < 2:
        return Warmth(False, n, f"its forward {last:.1f} ms, with none before it to hold it against")
    before = forwards_ms[-2]  # warm when that one was not much slower: the forward stopped getting faster
    warm = before <= STEADY_RATIO * last
    relation = "within" if warm else "above"
    why = f"the forward before the last, {before:.1f} ms, {relation} {STEADY_RATIO:g}x the last one's, {last:.1f} ms"
    return Warmth(warm, n, why)
