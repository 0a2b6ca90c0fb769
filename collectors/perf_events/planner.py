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


def read_after_parallel_ns(counters: CounterSet, reads: int = 40) -> float:
    """The median cost of a read right after a small parallel convolution, while torch's OpenMP workers
    still spin (what a read at a layer marker costs: scripts/bench_counters_overhead.py, "between")."""
    import torch

    x, w = torch.rand(1, 32, 40, 40), torch.rand(32, 32, 3, 3)
    times = []
    for _ in range(reads):
        torch.nn.functional.conv2d(x, w, padding=1)
        t0 = time.perf_counter_ns()
        counters.read_active()
        times.append(time.perf_counter_ns() - t0)
    return float(statistics.median(times))


class ReadPlanner:
    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.plan: layer_reads.ReadPlan | None = None
        """Which layers each measured iteration reads (--counter-reads); None until planned."""
        self.probe = layer_reads.ReadProbe()
        self.wish = layer_reads.wanted_iterations(config.counter_reads, config.device)
        """The measured iterations asked for (None: --iters)."""
        self.clean_forward_ns: float | None = None
        """The forward without reads that a read's cost to the forward is measured against: the warm-up
        iteration before the probing one (its layer markers on, no read), else the timing pass's p50."""
        self._warmup_forward: dict[str, int] = {}

    def measured_iterations(self, ctx: PassContext, counters: CounterSet | None) -> int | None:
        config = self.config
        # Under onnxruntime/openvino the layer markers are replayed after the run: no counter is read at
        # them, so there is nothing to rotate and --iters stands.
        reads_layers = config.runtime == "torch"
        forward_s = timing_forward_s(ctx.run_dir)
        if self.clean_forward_ns is None and forward_s:
            self.clean_forward_ns = forward_s * 1e9
        if self.wish is None and reads_layers and config.counter_reads == "rotate" and config.threads > 1:
            pipeline = ctx.pipeline
            if forward_s and pipeline is not None and counters is not None and counters.groups:
                from hwprof.core.markers import layer_modules

                layers = len(layer_modules(pipeline.built.module, config.depth))
                read_ns = read_after_parallel_ns(counters)
                self.wish = layer_reads.iterations_for(read_ns, 2 * layers, forward_s * 1e9, config.iters)
        return self.wish

    def fewest_iterations(self) -> int | None:
        """A rotation's whole cycles once planned: each layer read, in each rotating event group, MIN_VISITS times
        (None: no plan yet, or every layer read in every iteration)."""
        plan = self.plan
        if plan is None:
            return None
        cycle = plan.every * max(plan.group_cycle, 1) * (2 if plan.compare else 1)
        return layer_reads.MIN_VISITS * cycle if cycle > 1 else None

    def probes_warmup(self, marker: Marker) -> bool:
        """Whether this warm-up marker is read (the last warm-up iteration probes); the forward of the one
        before it, if warm (a third from last exists, or the warm-up ran until warm: hwprof.session.warmup, whose
        iterations before the last need not be numbered -2), is the reference that a read's cost is measured on."""
        if marker.iteration == -1:
            return self.plan is None and self.config.warmup >= PROBE_WARMUP
        warm = self.config.warmup > PROBE_WARMUP or bool(self.config.extra.get("warmup_steady"))
        if warm and marker.kind == "stage" and marker.name == "forward":  # the last one before the probe wins
            self._warmup_forward[marker.phase] = marker.t_ns
            if marker.phase == "E" and "B" in self._warmup_forward:
                self.clean_forward_ns = marker.t_ns - self._warmup_forward["B"]
        return False

    def layers_read(self, marker: Marker) -> range:
        """At an iteration's begin marker: the top-level layers it reads at. A warm-up iteration reads every
        layer if it probes, else none; a measured one as planned, or every layer until planned."""
        if marker.warmup:
            return layer_reads.EVERY_LAYER if self.probes_warmup(marker) else layer_reads.NO_LAYER
        return layer_reads.EVERY_LAYER if self.plan is None else self.plan.layers_read(marker.iteration)

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
