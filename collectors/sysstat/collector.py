"""System samplers for the measured iterations: RSS and peak RSS, CPU time per thread, CPU frequency
per core, context switches; as counter tracks, per-stage tables and a summary.

A sampler thread (OS name "hwprof-sysstat") reads every `config.interval_ms` from start() to
stop(); stage markers add exact per-stage figures:
- RSS: /proc/self/statm (resident pages x page size); peak RSS: the kernel's high-water mark
  VmHWM from /proc/self/status. Per stage, the mark is reset at the stage's begin marker (writing
  "5" to /proc/self/clear_refs, Linux >= 4.0) and read at its end marker, so a stage's peak is the
  kernel's own figure, not a guess from samples that a 2 ms allocation spike slips between. The
  reset also lowers what VmHWM and getrusage's ru_maxrss report in this pass; the process peak
  before the first reset is kept ("peak_rss_before_measure_bytes"). With
  `config.extra["sysstat_stage_peak"] = "sampled"`, or where clear_refs is not writable, the stage
  peak is instead the largest RSS seen at the stage's markers and samples, labelled as an estimate.
- CPU time per thread: each thread's CPU-time clock (clock_gettime on the clock id the kernel
  derives from a tid, the same encoding glibc's pthread_getcpuclockid uses), nanosecond
  resolution; threads are listed from /proc/self/task every 100 ms, and a thread's name is read
  from /proc/self/task/<tid>/comm when it is first seen. Process CPU time and context switches come from getrusage
  (process-wide: psutil's num_ctx_switches reads /proc/<pid>/status, i.e. the main thread only).
- CPU frequency: /sys/devices/system/cpu/cpu<N>/cpufreq/scaling_cur_freq (kHz) where a cpufreq
  driver exposes it (root overridable with `config.extra["cpu_sysfs_root"]`). Without one, that
  series alone is unavailable with the reason; /proc/cpuinfo's "cpu MHz" is then only quoted in the
  summary, because without cpufreq (e.g. in a VM) it is the fixed nominal clock, not a reading.

Why not psutil in the sampler: measured on the 2-core build VM, psutil's Process.threads() costs
about 320 us and memory_info() 70 us per call (each opens /proc files anew), while the reads
here (kept-open fds with pread, clock_gettime per thread) cost about 6 us for RSS and 2 us per
thread. The sampler shares the CPUs with the measured forward pass, so its cost is the overhead.
The tests check these series against psutil's own totals.

Counter tracks (values over an interval are stamped at the interval's start): "RSS (bytes)" [B],
"CPU process (%)" and "CPU <comm> <tid> (%)" [% of one core], "CPU<N> frequency (MHz)" [MHz],
"Context switches voluntary (/s)" and "Context switches involuntary (/s)" [/s].
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import Capability, Collector, CollectorResult, PassContext
from hwprof.collectors.sysstat.procfs import DEFAULT_CPU_SYSFS_ROOT, FreqSource, ProcReader, cpuinfo_mhz_json
from hwprof.collectors.sysstat.sampler import Sample, SystemSampler
from hwprof.collectors.sysstat.series import (
    BUSY_CORES,
    StagePoint,
    StageVisit,
    ThreadCpu,
    series,
    stage_tables,
    thread_table,
)
from hwprof.collectors.sysstat.threads import thread_cpu_ns, thread_name

from hwprof.schema.codec import JsonObject
from hwprof.schema.probes import SysstatProbe
from hwprof.schema.records import MetricTables, Record, ThreadName, metrics_path, records_path, write_records
from hwprof.schema.summaries_cpu import SysstatSummary

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig
    from hwprof.core.markers import Marker


# ---------------------------------------------------------------- analysis (pure)


# ---------------------------------------------------------------- collector


class SysstatCollector(Collector):
    name = "sysstat"
    title = "RSS, peak RSS per stage, CPU per thread, CPU frequency, context switches"
    pass_name = "layers"
    subscribes = True
    order = 30
    switchable = True
    """Paused, it gets no stage markers; its background sampler keeps its interval."""

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.proc: ProcReader | None = None
        self.freq = FreqSource()
        self.sampler: SystemSampler | None = None
        self.peak_method = "hwm-reset"
        self.peak_note = ""
        self.peak_before = 0
        self.visits: list[StageVisit] = []
        self.marker_ns: list[int] = []
        self._open: StagePoint | None = None
        self._measuring = False
        self._tids: list[int] = []

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        try:
            proc = ProcReader()
            try:
                proc.rss_bytes()
                proc.hwm_bytes()
                tids = proc.tids()
            finally:
                proc.close()
        except (OSError, ValueError) as exc:
            return Capability.unavailable(f"/proc/self is not readable ({exc})", "run on Linux with /proc mounted")
        if thread_cpu_ns(tids[0]) is None:
            return Capability.unavailable("per-thread CPU clocks are not available", "run on Linux")
        freq = FreqSource.open(Path(config.extra.get("cpu_sysfs_root") or DEFAULT_CPU_SYSFS_ROOT))
        freq.close()
        return Capability.ok(details=SysstatProbe.of(cpu_freq=freq.reason or "available"))

    def open(self, ctx: PassContext) -> None:
        self.proc = ProcReader()
        self.freq = FreqSource.open(Path(self.config.extra.get("cpu_sysfs_root") or DEFAULT_CPU_SYSFS_ROOT))

    def start(self, ctx: PassContext) -> None:
        proc = self.proc
        assert proc is not None
        self.peak_before = proc.hwm_bytes()
        if self.config.extra.get("sysstat_stage_peak", "hwm-reset") == "sampled":
            self.peak_method, self.peak_note = "sampled", "asked for with sysstat_stage_peak=sampled"
        elif why := proc.enable_hwm_reset():
            self.peak_method, self.peak_note = "sampled", why
        self._tids = proc.tids()
        self.sampler = SystemSampler(self.config.interval_ms / 1e3, proc, self.freq)
        self.sampler.start()
        self._measuring = True

    def _point(self) -> StagePoint:
        proc = self.proc
        assert proc is not None
        usage = resource.getrusage(resource.RUSAGE_SELF)
        tids = (self.sampler.tids if self.sampler else None) or self._tids
        threads = {tid: ns for tid in tids if (ns := thread_cpu_ns(tid)) is not None}
        return StagePoint(
            time.monotonic_ns(),
            proc.rss_bytes(),
            usage.ru_utime + usage.ru_stime,
            usage.ru_nvcsw,
            usage.ru_nivcsw,
            threads,
        )

    def wants_layer_markers(self) -> bool:
        return False

    def on_marker(self, marker: Marker) -> None:
        if not self._measuring or marker.kind != "stage" or marker.warmup or self.proc is None:
            return
        t0 = time.perf_counter_ns()
        if marker.phase == "B":
            self._open = self._point()
            self.proc.reset_hwm()
        elif self._open is not None:
            end = self._point()
            if self.peak_method == "hwm-reset":
                end.hwm = self.proc.hwm_bytes()
                peak = end.hwm
            else:
                peak = max(self._open.rss, end.rss, self._sampled_peak(self._open.t_ns))
            self.visits.append(StageVisit(marker.name, marker.iteration, self._open, end, peak))
            self._open = None
        self.marker_ns.append(time.perf_counter_ns() - t0)

    def _sampled_peak(self, since_ns: int) -> int:
        """The largest sampled RSS since since_ns (0 if none); walks back from the newest sample."""
        peak = 0
        samples = self.sampler.samples if self.sampler else []
        for k in range(len(samples) - 1, -1, -1):
            if samples[k].t_ns < since_ns:
                break
            peak = max(peak, samples[k].rss)
        return peak

    def stop(self, ctx: PassContext) -> None:
        self._measuring = False
        if self.sampler is not None:
            self.sampler.stop()

    def close(self, ctx: PassContext) -> CollectorResult:
        self.stop(ctx)
        try:
            return self._finish(ctx)
        finally:
            if self.proc is not None:
                self.proc.close()
            self.freq.close()

    def _finish(self, ctx: PassContext) -> CollectorResult:
        sampler, proc = self.sampler, self.proc
        if sampler is None or proc is None or len(sampler.samples) < 2:
            return CollectorResult("failed", reason="the sampler did not run over measured iterations")
        samples = sampler.samples
        tids = sorted({tid for s in samples for tid in s.threads})
        names = {tid: thread_name(tid) or sampler.names.get(tid, "") for tid in tids}
        roles = {tid: "main" for tid in tids if tid == os.getpid()}
        for tid in tids:
            if names[tid].startswith("hwprof-"):
                roles[tid] = f"sampler ({names[tid]})"
        records: list[Record] = [ThreadName(tid, names[tid]) for tid in tids if names[tid]]
        records.extend(series(samples, names))
        rec_path = records_path(ctx.out_dir, self.name)
        write_records(rec_path, records)
        artifacts = [ctx.relpath(rec_path)]
        tables = stage_tables(self.visits, self.peak_method)
        if self.visits:
            met_path = metrics_path(ctx.out_dir, self.name)
            tables.save(met_path)
            artifacts.append(ctx.relpath(met_path))
        summary = self._summary(samples, names, roles, tables, proc)
        status: Any = "ok"
        reason = ""
        if sampler.error:
            status, reason = "partial", sampler.error
        return CollectorResult(status, reason=reason, summary=summary, artifacts=artifacts)

    def _sampler_cost_json(self, threads: list[ThreadCpu]) -> JsonObject:
        """Wall time per sample (includes waits for the GIL and a CPU) and the thread's own CPU time."""
        sampler = self.sampler
        assert sampler is not None
        cost = sorted(sampler.cost_ns)
        own = next((r.cpu_s for r in threads if r.tid == sampler.tid), None)
        return {
            "tid": sampler.tid,
            "wall_us_p50": cost[len(cost) // 2] / 1e3,
            "wall_us_mean": statistics.fmean(cost) / 1e3,
            "cpu_s": own,
            "cpu_us_per_sample": own * 1e6 / len(cost) if own is not None else None,
            "overruns": sampler.overruns,
        }

    def _summary(
        self,
        samples: Sequence[Sample],
        names: dict[int, str],
        roles: dict[int, str],
        tables: MetricTables,
        proc: ProcReader,
    ) -> SysstatSummary:
        sampler = self.sampler
        assert sampler is not None
        window_s = (samples[-1].t_ns - samples[0].t_ns) / 1e9
        rss = [s.rss for s in samples]
        cpu_s = samples[-1].cpu_s - samples[0].cpu_s
        threads = thread_table(samples, names, roles)
        thread_sum = sum(r.cpu_s for r in threads)
        stage_peaks = [v.peak for v in self.visits]
        peak = max([self.peak_before, *stage_peaks, *rss, proc.hwm_bytes()])
        summary = SysstatSummary.of(
            interval_ms=self.config.interval_ms,
            samples=len(samples),
            window_s=window_s,
            rss_bytes={
                "first": rss[0],
                "last": rss[-1],
                "min": min(rss),
                "max": max(rss),
                "mean": statistics.fmean(rss),
            },
            peak_rss_bytes=peak,
            peak_rss_before_measure_bytes=self.peak_before,
            stage_peak_method=self.peak_method,
            cpu={
                "process_s": cpu_s,
                "cores_busy": cpu_s / window_s if window_s > 0 else None,
                "threads_sum_s": thread_sum,
                "threads_vs_process": thread_sum / cpu_s if cpu_s > 0 else None,
            },
            threads=[r.to_json() for r in threads],
            threads_busy=sum(1 for r in threads if (r.cores_busy or 0) >= BUSY_CORES),
            context_switches=_context_switches_json(samples, window_s),
            stages={name: dict(row) for name, row in tables.stages.items()},
            sampler=self._sampler_cost_json(threads),
        )
        if self.peak_note:
            summary.stage_peak_note = self.peak_note
        if self.marker_ns:
            summary.marker_cost_us = statistics.fmean(self.marker_ns) / 1e3
        summary.cpu_freq = self._cpu_freq_json(samples)
        return summary

    def _cpu_freq_json(self, samples: Sequence[Sample]) -> JsonObject:
        """Each CPU's clock over the samples (MHz), or why it could not be read."""
        if not self.freq.fds:
            return {
                "status": "unavailable",
                "reason": self.freq.reason,
                "fix": self.freq.fix,
                "cpuinfo": cpuinfo_mhz_json(),
            }
        per_cpu: dict[str, dict[str, float]] = {}
        for cpu in self.freq.fds:
            mhz = [s.freq_khz[cpu] / 1e3 for s in samples if cpu in s.freq_khz]
            per_cpu[str(cpu)] = {"mean": statistics.fmean(mhz), "min": min(mhz), "max": max(mhz)}
        return {"status": "ok", "per_cpu_mhz": per_cpu}


def _context_switches_json(samples: Sequence[Sample], window_s: float) -> JsonObject:
    voluntary = samples[-1].vcsw - samples[0].vcsw
    involuntary = samples[-1].ivcsw - samples[0].ivcsw
    return {
        "voluntary": voluntary,
        "involuntary": involuntary,
        "voluntary_per_s": voluntary / window_s if window_s > 0 else None,
        "involuntary_per_s": involuntary / window_s if window_s > 0 else None,
    }


COLLECTOR = SysstatCollector
