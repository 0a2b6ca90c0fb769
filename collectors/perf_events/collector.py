"""Per-layer and per-stage hardware counters through perf_event_open, across every torch thread.

The counters are opened in open(), before the worker imports torch, with inherit=1 from the
thread that later runs the model: every intra-op thread torch creates is then counted, and one
read of the parent fd (at every marker) returns the sum over all of them. The collector
subscribes last (order 90) so that its reads bracket as little of the other subscribers' work
as possible. Hardware events this host cannot count are reported with the reason and the fix;
the run goes on with what opens (on a VM without a PMU: the software events).

Artifacts in the pass folder: perf_events.metrics.json (hwprof.perf.metric_tables), perf_events.records.jsonl
(interval counter tracks), perf_events.readings.jsonl (raw readings, hwprof.perf.readings).
"""

from __future__ import annotations

import time
from array import array
from collections import Counter as Tally
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import Capability, Collector, CollectorResult, PassContext
from hwprof.collectors.perf_events.planner import ReadPlanner

from hwprof.core.config import RunConfig
from hwprof.perf import layer_reads
from hwprof.perf import readings as readings_io
from hwprof.perf.counting import Reading, interval_series
from hwprof.perf.derived import cache_line_size
from hwprof.perf.engine import CounterSet
from hwprof.perf.events import DEFAULT_EVENTS, EventResolver, EventSpec, UnknownEventError
from hwprof.perf.metric_tables import analyse, summary_checks
from hwprof.perf.open_errors import Unavailable, read_paranoid, unavailable
from hwprof.perf.sampler import IntervalSampler
from hwprof.perf.steal import uncharged_ns
from hwprof.perf.syscall import try_open
from hwprof.perf.threadcpu import CountedThreadsCpu
from hwprof.schema.codec import JsonObject
from hwprof.schema.probes import PerfEventsProbe
from hwprof.schema.records import CounterSample, metrics_path, records_path, write_records
from hwprof.schema.summaries_cpu import LayerReads, PerfEventsSummary

if TYPE_CHECKING:
    from hwprof.core.markers import Marker

CPU_CHECK_METHOD = (
    "forward-stage task-clock vs the CPU time of the threads it counts (the opening thread and every thread "
    "created after it, each thread's own CPU clock listed from /proc/self/task: exact where the process "
    "clock is a scheduler tick stale per running thread), both read at the same stage markers, summed "
    "over the measured iterations. task-clock also runs while the hypervisor steals the vCPU and "
    "during interrupts, which CPU time leaves out, and stops for each context switch, which CPU time "
    "includes: `band` is [CPU time - 3% - 10 us per context switch, (CPU time + host steal + irq + "
    "softirq time from /proc/stat + its tick resolution) + 3%] and `consistent` says whether the count "
    "falls in it"
)
NEVER_SCHEDULED = {
    "reason": "opened, but the PMU never scheduled its group (time_running stayed 0): its counters are "
    "held by another user, e.g. the NMI watchdog or another perf session",
    "fix": "`sysctl -w kernel.nmi_watchdog=0`, stop other profilers, or set extra.perf_max_group lower",
}
INTERVAL_IN_FORWARD = (
    "the interval sampler waits out the forward of each measured iteration; the counter tracks there come from "
    "the reads at the stage and layer markers (every marker read, rotated or not)"
)
COUNTED_ALL = (
    "every thread of the pass process created after the counters were opened (torch's intra-op pool) plus the "
    "thread running the model (--counter-threads all)"
)
COUNTED_MODEL = (
    "the thread running the model alone (--counter-threads model): on a GPU run its host work is launching the "
    "kernels, torch's intra-op threads only spin, and a read interrupts no other CPU"
)
UNKNOWN_FIX = "pass --events with names from that list (or leave --events out for the default set)"


def requested(config: RunConfig) -> tuple[list[str], bool]:
    """(event names, explicitly asked for)."""
    if config.events:
        return list(config.events), True
    return list(DEFAULT_EVENTS), False


def check_events(names: list[str], resolver: EventResolver | None = None) -> list[EventSpec]:
    """Resolve names or raise UnknownEventError listing what this host can count."""
    resolver = resolver or EventResolver()
    return resolver.resolve_all(names, opens=lambda s: try_open(s) == 0)


def _probe_unavailable(specs: list[EventSpec]) -> tuple[list[str], list[Unavailable]]:
    paranoid = read_paranoid()
    opened, missing = [], []
    for spec in specs:
        err = try_open(spec)
        if err and try_open(spec, True) == 0:
            err = 0
        if err:
            missing.append(unavailable(spec.name, err, paranoid))
        else:
            opened.append(spec.name)
    return opened, missing


def _most_common(missing: list[Unavailable]) -> Unavailable:
    top = Tally((u.reason, u.fix) for u in missing).most_common(1)[0][0]
    return next(u for u in missing if (u.reason, u.fix) == top)


class PerfEvents(Collector):
    thread_bound = True
    name = "perf_events"
    title = "per-layer counters (perf_event_open, all threads)"
    last_warmup = True
    pass_name = "layers"
    subscribes = True
    order = 90
    needs_layer_markers = True
    switchable = True

    @classmethod
    def wanted(cls, config: RunConfig) -> bool:
        return config.counters != "papi" and super().wanted(config)

    @classmethod
    def check_options(cls, config: RunConfig) -> None:
        if config.events:
            check_events(config.events)

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        names, _ = requested(config)
        try:
            specs = check_events(names)
        except UnknownEventError as exc:
            return Capability.unavailable(str(exc), UNKNOWN_FIX)
        opened, missing = _probe_unavailable(specs)
        details = PerfEventsProbe.of(events=opened, unavailable={u.event: u.part() for u in missing})
        if not opened:
            top = _most_common(missing)
            return Capability.unavailable(f"no event opens: {top.reason}", top.fix, details=details)
        return Capability.ok(details=details)

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.counters: CounterSet | None = None
        self.specs: list[EventSpec] = []
        self.explicit = False
        self.paranoid: int | None = None
        self.sampler: IntervalSampler[readings_io.Raw] | None = None
        self.sampler_cpu: IntervalSampler[Any] | None = None
        """Kept after stop(): its CPU time is reported in the summary."""
        self.counted_cpu: CountedThreadsCpu | None = None
        """The CPU time of the threads the counters see, read at stage markers (set in open())."""
        self.samples: list[tuple[int, readings_io.Raw]] = []
        self.readings: list[readings_io.MarkerRaw] = []
        self.read_ns = array("q")
        self.marker_ns = 0
        """Time spent in on_marker over the measured iterations (the collector's own cost)."""
        self.planner = ReadPlanner(config)
        """Which layers each measured iteration reads (--counter-reads, hwprof.perf.layer_reads)."""
        self.layers_read = layer_reads.EVERY_LAYER
        """The top-level layer indices the current iteration reads at (set at its iteration marker)."""
        self.pause_in_forward = config.runtime == "torch" and not config.extra.get("sampler_in_forward")
        """Layer markers are read live (not replayed after a runtime's run): the sampler waits out each measured
        forward and the marker reads give the counter series there (extra.sampler_in_forward keeps it on)."""

    def open(self, ctx: PassContext) -> None:
        names, self.explicit = requested(self.config)
        self.specs = check_events(names)
        self.paranoid = read_paranoid()
        # before the counters: a thread that exists when they are opened is not counted by them
        self.sampler = IntervalSampler(self.config.interval_ms, "hwprof-perf-sampler")
        self.sampler_cpu = self.sampler
        inherit = self.config.counted_threads() == "all"
        self.counted_cpu = CountedThreadsCpu(inherit)
        max_group = self.config.extra.get("perf_max_group")
        self.counters = CounterSet.open(
            self.specs,
            range(self.config.iters),
            paranoid=self.paranoid,
            max_group=int(max_group) if max_group else None,
            inherit=inherit,
        )

    def measured_iterations(self, ctx: PassContext) -> int | None:
        return self.planner.measured_iterations(ctx, self.counters)

    def fewest_iterations(self, ctx: PassContext) -> int | None:
        return self.planner.fewest_iterations()

    def on_marker(self, marker: Marker) -> None:
        kind = marker.kind
        if kind == "layer" and marker.index not in self.layers_read:
            return  # first, and nothing else: this runs at every layer marker of every iteration
        entered = time.perf_counter_ns()
        counters, counted_cpu = self.counters, self.counted_cpu
        if counters is None or counted_cpu is None or not counters.groups:
            return
        planner = self.planner
        if kind == "iteration" and marker.phase == "B":
            self.layers_read = planner.layers_read(marker)
        if marker.warmup:
            if planner.probes_warmup(marker):
                planner.probe_read(marker, counters)
            return
        plan = planner.plan
        if kind == "iteration" and marker.phase == "B":
            counters.begin_iteration(marker.iteration)
        t0 = time.perf_counter_ns()
        active, raws = counters.read_active()
        read = time.perf_counter_ns() - t0
        self.read_ns.append(read)
        cpu, uncharged = (None, None) if kind == "layer" else (counted_cpu.ns(), uncharged_ns())
        self.readings.append((marker, active, raws, cpu, uncharged))
        if kind == "iteration" and marker.phase == "E":
            counters.end_iteration()
        elif kind == "stage" and marker.name == "forward" and self.pause_in_forward:
            self._sampler_in_forward(marker.phase == "E", counters)
        if plan is None:  # no warm-up planned it: this first measured iteration reads every layer
            planner.observe(marker, read, counters)
        self.marker_ns += time.perf_counter_ns() - entered

    def _sampler_in_forward(self, resume: bool, counters: CounterSet) -> None:
        """The interval sampler waits out the forward of a measured iteration, where the reads at the stage and
        layer markers give the counter series: a sampler thread waking inside a parallel region takes a CPU
        from a torch thread and interrupts the others with its read. A small gain, measured within the
        blocks' spread: 1.051-1.066x against 1.055-1.071x left on (yolov7-tiny at 320, 2 threads, two runs of
        scripts/bench_layers_pass_parts.py, "perf rotate" and "perf rotate sampler-on")."""
        if self.sampler is None:
            return
        if resume:
            self.sampler.begin(counters.read_active)
        else:
            self.sampler.pause()

    def start(self, ctx: PassContext) -> None:
        if self.sampler is not None and self.counters is not None and self.counters.groups:
            self.sampler.begin(self.counters.read_active)

    def stop(self, ctx: PassContext) -> None:
        """Pause the interval sampler: start() resumes it (a benchmark toggles the collector)."""
        if self.sampler is not None:
            self.sampler.pause()

    def pause(self, ctx: PassContext) -> None:
        self.stop(ctx)

    def resume(self, ctx: PassContext) -> None:
        self.start(ctx)

    def close(self, ctx: PassContext) -> CollectorResult:
        if self.sampler is not None:
            self.samples = self.sampler.finish()
            self.sampler = None
        counters = self.counters
        if counters is None:
            return CollectorResult("failed", reason="the counters were never opened")
        try:
            return self._finish(ctx, counters)
        finally:
            counters.close()

    def _finish(self, ctx: PassContext, counters: CounterSet) -> CollectorResult:
        missing = {u.event: u.part().to_json() for u in counters.unavailable}
        if not counters.groups:
            top = _most_common(counters.unavailable)
            return CollectorResult(
                "unavailable",
                f"no event opens: {top.reason}",
                top.fix,
                summary=PerfEventsSummary.of(unavailable=missing),
            )
        readings = [
            Reading(m.kind, m.phase, m.name, m.iteration, m.t_ns, counters.parse(active, raws), cpu, uncharged)
            for m, active, raws, cpu, uncharged in self.readings
        ]
        samples: list[tuple[int, Mapping[str, Any]]] = [(t, counters.parse(*row)) for t, row in self.samples]
        if self.pause_in_forward:
            samples = sorted(samples + [(r.t_ns, r.counts) for r in readings], key=lambda sample: sample[0])
        specs = counters.events
        units = {s.name: s.display_unit for s in specs}
        scales = {s.name: s.scale for s in specs if s.scale != 1.0}
        line_size, line_source = cache_line_size()
        analysis = analyse(readings, units, scales, line_size, rotated=self.planner.rotated)
        out = ctx.out_dir
        analysis.tables.save(metrics_path(out, self.name))
        series = interval_series(samples, scales, units=units)
        write_records(
            records_path(out, self.name),
            (CounterSample(track, t, value, unit) for t, track, value, unit in series),
        )
        readings_file = out / f"{self.name}.readings.jsonl"
        readings_io.write(readings_file, counters, specs, self.readings, self.samples)
        summary = self._summary(counters, specs, missing, analysis, len(series), line_size, line_source)
        status, reason, fix = self._status(counters, missing)
        artifacts = [
            ctx.relpath(metrics_path(out, self.name)),
            ctx.relpath(records_path(out, self.name)),
            ctx.relpath(readings_file),
        ]
        return CollectorResult(status, reason, fix, summary, artifacts)

    def _status(self, counters: CounterSet, missing: dict[str, dict[str, str]]) -> tuple[Any, str, str]:
        if not missing:
            return "ok", "", ""
        top = _most_common(counters.unavailable)
        names = ", ".join(missing)
        if self.explicit:
            return "partial", f"unavailable: {names}: {top.reason}", top.fix
        opened = ", ".join(s.name for s in counters.events)
        return "ok", f"counted {opened} only; unavailable: {names}: {top.reason}", top.fix

    def _summary(
        self,
        counters: CounterSet,
        specs: list[EventSpec],
        missing: dict[str, dict[str, str]],
        analysis: Any,
        n_series: int,
        line_size: int,
        line_source: str,
    ) -> PerfEventsSummary:
        names, _ = requested(self.config)
        mode = "user mode only (exclude_kernel: perf_event_paranoid)" if counters.user_only else "user and kernel mode"
        fallback = None
        if missing and all(s.software for s in specs):
            fallback = "no hardware event opened: counting software events only"
        read_cost = self._read_cost_json(analysis)
        multiplexed = {e: f for e, f in analysis.running.items() if f < 0.999}
        reads_plan = self._layer_reads(analysis)
        checks = summary_checks(analysis)
        if checks.task_clock_vs_process_cpu is not None:
            checks.task_clock_vs_process_cpu.method = CPU_CHECK_METHOD
        inherit = counters.inherit
        return PerfEventsSummary.of(
            engine=f"perf_event_open (ctypes), inherit={int(inherit)}, opened in the pass process before torch",
            counted=f"{COUNTED_ALL if inherit else COUNTED_MODEL}, {mode}; the interval sampler thread is not counted",
            counter_threads="all" if inherit else "model",
            threads=self.config.threads,
            events_requested=names,
            events_opened=[s.name for s in specs],
            unavailable=missing,
            fallback=fallback,
            perf_event_paranoid=self.paranoid,
            groups=counters.describe(),
            rotation=len(counters.rotating) > 1,
            layer_reads=reads_plan,
            iterations_measured=analysis.iterations,
            running_fraction=analysis.running,
            multiplexed=multiplexed,
            never_scheduled={e: NEVER_SCHEDULED for e in analysis.unmeasured},
            read_cost=read_cost,
            totals=analysis.totals,
            units={s.name: s.display_unit for s in specs},
            checks=checks,
            sampler_cpu_ms=self.sampler_cpu.cpu_ns() / 1e6 if self.sampler_cpu else None,
            interval_ms=self.config.interval_ms,
            interval_samples=len(self.samples),
            interval_note=INTERVAL_IN_FORWARD if self.pause_in_forward else None,
            counter_records=n_series,
            cache_line_bytes=line_size,
            cache_line_source=line_source,
            gap="stages.forward['gap.<event>'] in perf_events.metrics.json: forward outside every layer",
        )

    def _read_cost_json(self, analysis: Any) -> JsonObject:
        """The cost of the reads at the markers: per read, and this collector's share of the iterations' wall."""
        reads = sorted(self.read_ns)
        groups_per_read = (
            sum(len(active) for _, active, *_ in self.readings) / len(self.readings) if self.readings else 0.0
        )
        read_cost: JsonObject = {"reads": len(reads), "groups_per_read": groups_per_read}
        if reads:
            read_cost.update(
                mean_us=sum(reads) / len(reads) / 1e3,
                p50_us=reads[len(reads) // 2] / 1e3,
                p99_us=reads[min(len(reads) - 1, int(len(reads) * 0.99))] / 1e3,
                method="perf_counter_ns around the read(2) of the enabled groups at each marker, in the run",
            )
        iteration_wall = analysis.tables.stages.get("iteration", {}).get("wall-time", 0.0) * analysis.iterations
        if iteration_wall:
            read_cost["on_marker_share"] = self.marker_ns / iteration_wall
            read_cost["on_marker_share_method"] = (
                "time in this collector's on_marker (reads, bookkeeping) over the measured iterations' wall "
                "time: its own cost on the model thread, excluding the layer hooks that the pass adds anyway "
                "(and the test at a layer it does not read, which returns before any clock is read)"
            )
        return read_cost

    def _layer_reads(self, analysis: Any) -> LayerReads:
        """Which layers the iterations read (the planner's plan), with the visits the analysis saw."""
        method = self.config.counter_reads
        plan = self.planner.plan
        reads_plan = plan.describe(method) if plan is not None else LayerReads.of(method=method)
        if self.planner.wish is not None:
            reads_plan.update(iterations_asked=self.planner.wish)
        visits = [int(row["visits"]) for row in analysis.tables.layers.values() if "visits" in row]
        if visits:
            reads_plan.update(visits_min=min(visits), visits_max=max(visits), iterations=analysis.iterations)
        return reads_plan


COLLECTOR = PerfEvents
