"""Which layers' boundaries a measured iteration reads the counter group at (--counter-reads).

A read of an inherited counter group sums every thread's child event; a child running on another
CPU (an OpenMP worker spinning between parallel regions) is read through an IPI to that CPU, so a
read at a layer marker costs 10-15 us with 2 threads here and 64 us with 16 on the H100 host's
CPUs (scripts/bench_counters_overhead.py, "between"), against 1-4 us for a single thread. At two
markers per layer that is 10-20% of a small model's forward.

"every": read at every marker (the method before issue 29). "rotate": each measured iteration reads
the layers whose top-level index falls in one of `every` residue classes (index % every ==
position), so each layer is counted in one of every `every` measured iterations and its counts are
the mean over those visits; the stage and iteration markers are read in every iteration, and the
layer markers are still emitted at every layer (the trace and the time table keep every layer).
Nested layers go with their top-level layer, so a read layer's self count never holds an unread
child. The share is planned from the read cost measured in the last warm-up iteration (or, with
fewer than two warm-up iterations, whose last forward is still cold, in the first measured
iteration, which reads every layer): the fewest classes that
keep the reads under READ_BUDGET of the forward, at most so many that every layer still gets
MIN_VISITS visits in the planned iterations. On a GPU run (the forward is launch-bound: the host's
counters per layer count the launches on the model's thread, which is all they count there by default,
--counter-threads) a fixed share, GPU_EVERY.
The position advances once per full cycle of the rotating event groups (hwprof.perf.engine), so
that every layer class meets every group.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from hwprof.schema.summaries_cpu import LayerReads

READ_BUDGET = 0.01
"""Planned reads at most this share of the forward."""
MIN_VISITS = 4
"""Each layer read in at least this many of the planned measured iterations."""
METHODS = ("rotate", "every")
EVERY_LAYER = range(1 << 62)
"""Every top-level layer index (ReadPlan.layers_read)."""
NO_LAYER = range(0)
GPU_EVERY = 16
"""On a GPU run: each layer read in 1 of this many measured iterations. Reading every layer of an inherited group
cost 1.5-1.9x there (issue 29, the H100 host's 16 threads: a read went to up to 15 spinning workers, 64 us each),
against a yolov7 forward of 6-9 ms launching 428 kernels (the recordings). A GPU run counts the model's thread
alone by default (--counter-threads auto): its read is local, 2.3 us here with a worker spinning against 15-17 us
for the inherited group (scripts/bench_counters_overhead.py, "model thread"), so 1 in 16 leaves about 13 reads per
forward. On a CPU stand-in (yolov7 at 32, 106 layers in 18-20 ms, 2 threads) these defaults cost 1.06x against
1.23x for every layer of every thread (scripts/bench_attributing_passes.py --counter-threads model --every 16); not
a measured GPU layers pass: `scripts/bench_attributing_passes.py --device cuda` measures it where a GPU is lent."""


MAX_ITERATIONS = 64
"""At most this many measured iterations asked for so that a CPU run's rotation can read fewer layers, and at
most ITERS_FACTOR times --iters (a user who asked for a short run keeps one)."""
ITERS_FACTOR = 3
ASK_MARGIN = 2
"""The iterations asked for allow this many times the classes that a read's own time calls for: a read adds
more than its own time to the forward (its IPI stops the worker that is about to start the next parallel
region: about 14 reads of 22 us added about 0.9 ms to yolov7-tiny's 33 ms forward at 320 with 2 threads
here, scripts/bench_layers_pass_parts.py "perf rotate" against "perf no layer reads"), which only the probing
iteration measures, after the ask. The plan then takes what that measurement calls for."""
EXTRA_S = 20.0
"""At most this much more forward time (measured and clean iterations) for those iterations."""


def wanted_iterations(method: str, device: str) -> int | None:
    """Measured iterations the layers pass asks for under this method (None: --iters is enough)."""
    if method == "rotate" and device.startswith("cuda"):
        return GPU_EVERY * MIN_VISITS
    return None


def iterations_for(read_ns: float, layer_reads: int, forward_ns: float, iters: int) -> int | None:
    """Measured iterations that let the rotation meet READ_BUDGET with MIN_VISITS visits per layer (with
    ASK_MARGIN), from a read's cost and the clean forward's time known before the pass (the timing pass): at
    most MAX_ITERATIONS and ITERS_FACTOR times `iters`, and at most EXTRA_S more forward time with the clean
    iterations; None: --iters is enough."""
    if read_ns <= 0 or forward_ns <= 0 or layer_reads <= 0:
        return None
    every = ASK_MARGIN * math.ceil(read_ns * layer_reads / forward_ns / READ_BUDGET)
    by_time = iters + int(EXTRA_S * 1e9 / (2 * forward_ns))
    want = min(every * MIN_VISITS, MAX_ITERATIONS, ITERS_FACTOR * iters, by_time)
    return want if want > iters else None


@dataclass(frozen=True)
class ReadPlan:
    every: int
    """Each layer is read in one of this many measured iterations (1: in all of them)."""
    reason: str
    group_cycle: int = 1
    """Iterations per full cycle of the rotating event groups: the position advances once per cycle."""
    read_us: float | None = None
    """The measured cost of one read, from which the plan was made."""
    forward_ms: float | None = None
    layer_reads: int | None = None
    """Layer-marker reads per forward when every layer is read."""
    compare: bool = False
    """Even measured iterations read every layer, odd ones rotate (extra.counter_reads_compare): both methods
    in one process, so that their per-layer counts can be compared on the same run (tests, benchmarks)."""

    def position(self, iteration: int) -> int:
        step = iteration // 2 if self.compare else iteration
        return (step // max(self.group_cycle, 1)) % self.every

    def reads(self, layer_index: int, iteration: int) -> bool:
        """Whether the measured `iteration` reads the counters at the markers of top-level layer `layer_index`."""
        return layer_index in self.layers_read(iteration)

    def layers_read(self, iteration: int) -> range:
        """The top-level layer indices that the measured `iteration` reads at: a range, whose `in` is one C call
        (the test runs at every layer marker)."""
        if self.every == 1 or (self.compare and iteration % 2 == 0):
            return EVERY_LAYER
        return range(self.position(iteration), EVERY_LAYER.stop, self.every)

    def describe(self, method: str) -> LayerReads:
        """The plan as the perf_events summary records it (PerfEventsSummary.layer_reads)."""
        described = LayerReads.of(
            method=method,
            every=self.every,
            share=1 / self.every,
            reason=self.reason,
            read_us=self.read_us,
            forward_ms=self.forward_ms,
            layer_reads_per_forward=self.layer_reads,
        )
        if self.compare:
            described.update(compare="even measured iterations read every layer, odd ones rotate")
        return described


def max_every(iterations: int) -> int:
    """The most classes that still give each layer MIN_VISITS visits in `iterations` measured iterations."""
    return max(1, iterations // MIN_VISITS)


def plan(
    method: str,
    device: str,
    iterations: int,
    read_ns: float | None,
    layer_reads: int,
    forward_ns: float | None,
    group_cycle: int = 1,
    compare: bool = False,
    forced: int | None = None,
) -> ReadPlan:
    """The plan for a pass: `read_ns` (one read's cost to the forward) and `forward_ns` (the forward without
    reads, or the probing one) measured over one forward with `layer_reads` layer-marker reads; None where
    nothing was measured. `forced` (extra.counter_reads_every)
    sets the share under rotate, for tests and benchmarks."""
    read_us = None if read_ns is None else read_ns / 1e3
    forward_ms = None if forward_ns is None else forward_ns / 1e6

    def made(every: int, reason: str) -> ReadPlan:
        return ReadPlan(every, reason, group_cycle, read_us, forward_ms, layer_reads, compare)

    cap = max_every(iterations // 2 if compare else iterations)
    if method == "every":
        forced = None
    if forced is not None and forced >= 1:
        return made(int(forced), f"extra.counter_reads_every: each layer read in 1 of {forced} measured iterations")
    if method == "every":
        return made(1, "--counter-reads every: every layer read in every measured iteration")
    if device.startswith("cuda"):
        every = min(GPU_EVERY, cap)
        return made(
            every,
            f"GPU run: the forward is launch-bound and a read of the host's counters costs more than many layers' "
            f"launches, so each layer is read in 1 of {every} measured iterations ({iterations} measured)",
        )
    if read_ns is None or not forward_ns or layer_reads <= 0:
        return made(cap, f"no read cost measured: each layer read in 1 of {cap} measured iterations")
    share = read_ns * layer_reads / forward_ns
    wanted = max(1, math.ceil(share / READ_BUDGET))
    every = min(wanted, cap)
    why = (
        f"reads at every layer would cost {100 * share:.1f}% of the forward ({layer_reads} reads adding "
        f"{read_ns / 1e3:.1f} us each to {forward_ns / 1e6:.1f} ms): each layer read in 1 of {every} measured "
        "iterations"
    )
    if every < wanted:
        why += f" (1 of {wanted} would meet the {100 * READ_BUDGET:.0f}% budget; capped for {MIN_VISITS} visits)"
    return made(every, why)


@dataclass
class ReadProbe:
    """Read costs and the forward's span over one iteration that reads at every marker."""

    read_ns: list[int] = field(default_factory=list)
    after_layer_ns: list[int] = field(default_factory=list)
    """Reads at a layer's end marker: right after the layer's parallel regions, as nearly every read of a
    rotated iteration is; the next layer's begin read follows the end read closely. The median over all the
    probing iteration's reads (16.8-18.6 us on yolov7-tiny at 320 with 2 threads) fell short of the rotated
    iterations' p50 (22-25 us) in the same runs."""
    layer_reads: int = 0
    forward_begin: int | None = None
    forward_ns: int | None = None

    def add(self, kind: str, phase: str, name: str, t_ns: int, read_ns: int) -> None:
        self.read_ns.append(read_ns)
        if kind == "layer":
            self.layer_reads += 1
            if phase == "E":
                self.after_layer_ns.append(read_ns)
        elif kind == "stage" and name == "forward":
            if phase == "B":
                self.forward_begin = t_ns
            elif self.forward_begin is not None:
                self.forward_ns = t_ns - self.forward_begin

    def median_ns(self) -> float | None:
        """A read's own time: the median at layer ends, else over every read."""
        reads = self.after_layer_ns or self.read_ns
        return statistics.median(reads) if reads else None

    def cost_ns(self, clean_forward_ns: float | None) -> float | None:
        """A read's cost to the forward, as the plan counts it: this iteration's forward less a forward without
        reads (the warm-up iteration before, or the timing pass's), per read, where that is known; never less
        than a read's own time. It can be more than the read's own time: its IPI stops the worker that is about
        to start the next parallel region. Against the timing pass's forward the difference also holds the
        layer markers' own cost (the warm-up iteration has them too), so the plan errs towards fewer reads."""
        own = self.median_ns()
        if own is None or not clean_forward_ns or not self.forward_ns or not self.read_ns:
            return own
        reads_in_forward = self.layer_reads + 1  # the forward's begin read falls inside it, its end read after
        return max(own, (self.forward_ns - clean_forward_ns) / reads_in_forward)
