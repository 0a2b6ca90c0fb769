"""Which layers perf_events reads in each measured iteration: the plan (hwprof.perf.layer_reads) made from
read costs measured in this process, and the measured iterations the pass asks for to carry it out.

The plan is made from the last warm-up iteration, which reads at every marker (with at least
PROBE_WARMUP warm-up iterations: a first forward is cold), else from the first measured iteration, which
reads every layer. The iterations are asked for before the warm-up (the worker fixes its schedule then):
on a GPU run enough for 1 in 16; on a CPU run with several threads, enough for the budget by the timing
pass's forward and a read's cost measured right after a parallel convolution, as at a layer marker. A run
on another runtime (onnxruntime, openvino) reads no layer marker live and asks for nothing more.
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING

from hwprof.core.config import RunConfig
from hwprof.core.spans import timing_forward_s
from hwprof.perf import layer_reads
from hwprof.perf.engine import CounterSet

if TYPE_CHECKING:
    from hwprof.collectors.base import PassContext

    from hwprof.core.markers import Marker

PROBE_WARMUP = 2
"""The last warm-up iteration plans the layer reads if there are this many: a first forward is cold (231 ms
against 11 ms for yolov8n at 128 here)."""


def read_after_parallel_ns(counters: CounterSet, reads: int = 48) -> float:
    """What a read right after a small parallel convolution adds to the work around it, as a read at a layer
    marker does: batches of convolutions with a read after each against batches without, in ABBA order,
    the difference of the medians per read; at least the read's own median time.

    More than the read's own time: its IPI stops the worker that is about to start the next parallel region
    (16 reads of 22 us each added 0.85 ms to yolov7-tiny's forward at 320 with 2 threads here:
    scripts/bench_layers_pass_parts.py, "perf rotate" against "perf no layer reads")."""
    import torch

    x, w = torch.rand(1, 32, 40, 40), torch.rand(32, 32, 3, 3)
    per_batch = 8
    own: list[int] = []

    def batch(read: bool) -> int:
        t0 = time.perf_counter_ns()
        for _ in range(per_batch):
            torch.nn.functional.conv2d(x, w, padding=1)
            if read:
                r0 = time.perf_counter_ns()
                counters.read_active()
                own.append(time.perf_counter_ns() - r0)
        return time.perf_counter_ns() - t0

    with_reads: list[int] = []
    without: list[int] = []
    for _ in range(max(1, reads // (2 * per_batch))):
        without.append(batch(False))
        with_reads.extend((batch(True), batch(True)))
        without.append(batch(False))
    added = (statistics.median(with_reads) - statistics.median(without)) / per_batch
    return max(added, float(statistics.median(own)))


class ReadPlanner:
    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.plan: layer_reads.ReadPlan | None = None
        """Which layers each measured iteration reads (--counter-reads); None until planned."""
        self.probe = layer_reads.ReadProbe()
        self.wish = layer_reads.wanted_iterations(config.counter_reads, config.device)
        """The measured iterations asked for (None: --iters)."""
        self.clean_forward_ns: float | None = None
        """The timing pass's forward p50, where it ran before this pass: a read's cost to the forward is the
        probing iteration's forward less this, per read."""

    def measured_iterations(self, ctx: PassContext, counters: CounterSet | None) -> int | None:
        config = self.config
        # Under onnxruntime/openvino the layer markers are replayed after the run: no counter is read at
        # them, so there is nothing to rotate and --iters stands.
        reads_layers = config.runtime == "torch"
        forward_s = timing_forward_s(ctx.run_dir)
        self.clean_forward_ns = forward_s * 1e9 if forward_s else None
        if self.wish is None and reads_layers and config.counter_reads == "rotate" and config.threads > 1:
            pipeline = ctx.pipeline
            if forward_s and pipeline is not None and counters is not None and counters.groups:
                from hwprof.core.markers import layer_modules

                layers = len(layer_modules(pipeline.built.module, config.depth))
                read_ns = read_after_parallel_ns(counters)
                self.wish = layer_reads.iterations_for(read_ns, 2 * layers, forward_s * 1e9, config.iters)
        return self.wish

    def probes_warmup(self, marker: Marker) -> bool:
        return marker.iteration == -1 and self.plan is None and self.config.warmup >= PROBE_WARMUP

    def probe_read(self, marker: Marker, counters: CounterSet) -> None:
        """A read at a warm-up marker, timed; the plan at the iteration's end."""
        t0 = time.perf_counter_ns()
        counters.read_active()
        self.observe(marker, time.perf_counter_ns() - t0, counters)

    def observe(self, marker: Marker, read_ns: int, counters: CounterSet) -> None:
        """A timed read of the probing iteration (every marker read); the plan at its end."""
        self.probe.add(marker.kind, marker.phase, marker.name, marker.t_ns, read_ns)
        if marker.kind == "iteration" and marker.phase == "E":
            self.make(counters)

    def make(self, counters: CounterSet) -> None:
        config = self.config
        self.plan = layer_reads.plan(
            config.counter_reads,
            config.device,
            max(config.iters, self.wish or 0),
            self.probe.cost_ns(self.clean_forward_ns),
            self.probe.layer_reads,
            self.clean_forward_ns or self.probe.forward_ns,
            max(len(counters.rotating), 1),
            bool(config.extra.get("counter_reads_compare")),
            config.extra.get("counter_reads_every"),
        )

    @property
    def rotated(self) -> bool:
        return self.plan is not None and self.plan.every > 1
