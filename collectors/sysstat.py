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

import itertools
import os
import re
import resource
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.collectors.base import Capability, Collector, CollectorResult, PassContext

from hwprof.records import (
    CounterSample,
    MetricTables,
    Record,
    ThreadName,
    metrics_path,
    records_path,
    write_records,
)

if TYPE_CHECKING:
    from hwprof.config import RunConfig
    from hwprof.workload.markers import Marker

DEFAULT_CPU_SYSFS_ROOT = Path("/sys/devices/system/cpu")
SAMPLER_THREAD = "hwprof-sysstat"
BUSY_CORES = 0.10
"""A thread is busy in a window when it used at least this fraction of one core."""

_CPUCLOCK_PERTHREAD_SCHED = 4 | 2


def thread_clock_id(tid: int) -> int:
    """The CPU-time clock of any thread of this process: MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)."""
    return ((~tid) << 3) | _CPUCLOCK_PERTHREAD_SCHED


def thread_cpu_ns(tid: int) -> int | None:
    """CPU time (user + system) of a thread of this process; None once it has exited."""
    try:
        return time.clock_gettime_ns(thread_clock_id(tid))
    except OSError:
        return None


def name_this_thread(name: str) -> None:
    """Set the calling OS thread's name (comm, 15 characters), seen in /proc and in traces."""
    try:
        with open("/proc/thread-self/comm", "w") as f:
            f.write(name[:15])
    except OSError:
        pass


def thread_name(tid: int) -> str:
    try:
        with open(f"/proc/self/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def _cpu_number(path: Path) -> int:
    return int(path.name.removeprefix("cpu"))


@dataclass
class FreqSource:
    """Per-core scaling_cur_freq files, or why there are none."""

    fds: dict[int, int] = field(default_factory=dict)
    reason: str = ""
    fix: str = ""

    @classmethod
    def open(cls, root: Path) -> FreqSource:
        files = sorted(
            (p for p in root.glob("cpu[0-9]*/cpufreq/scaling_cur_freq")),
            key=lambda p: _cpu_number(p.parent.parent),
        )
        if not files:
            return cls(
                reason=f"no cpufreq driver: {root}/cpu*/cpufreq/scaling_cur_freq does not exist",
                fix="load a cpufreq driver (sudo modprobe acpi_cpufreq, or boot with amd_pstate or "
                "intel_pstate); VMs usually have none, so run on bare metal",
            )
        fds: dict[int, int] = {}
        errors = []
        for path in files:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                int(os.pread(fd, 32, 0))
            except (OSError, ValueError) as exc:
                errors.append(f"{path}: {exc}")
                continue
            fds[_cpu_number(path.parent.parent)] = fd
        if not fds:
            return cls(reason="scaling_cur_freq not readable: " + "; ".join(errors), fix="run hwprof as root")
        return cls(fds)

    def read_khz(self) -> dict[int, int]:
        return {cpu: int(os.pread(fd, 32, 0)) for cpu, fd in self.fds.items()}

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}


def cpuinfo_mhz() -> dict[str, Any]:
    """/proc/cpuinfo's "cpu MHz", quoted (not sampled) when there is no cpufreq driver."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError as exc:
        return {"unreadable": str(exc)}
    live = re.search(r"^flags\s*:.*\baperfmperf\b", text, re.M) is not None
    return {
        "mhz": [float(v) for v in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", text, re.M)],
        "note": "from APERF/MPERF, a recent average"
        if live
        else "the CPU flags lack aperfmperf (as in most VMs): this is the fixed nominal clock, not a reading",
    }


class ProcReader:
    """This process's /proc files, kept open and re-read with pread."""

    def __init__(self) -> None:
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.statm = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        self.status = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
        self.clear_refs: int | None = None

    def rss_bytes(self) -> int:
        return int(os.pread(self.statm, 128, 0).split()[1]) * self.page

    def hwm_bytes(self) -> int:
        text = os.pread(self.status, 8192, 0)
        m = re.search(rb"^VmHWM:\s*(\d+) kB", text, re.M)
        if m is None:
            raise OSError("VmHWM missing from /proc/self/status")
        return int(m.group(1)) * 1024

    def enable_hwm_reset(self) -> str:
        """Open clear_refs and reset once; '' on success, else why it cannot be used."""
        try:
            if self.clear_refs is None:
                self.clear_refs = os.open("/proc/self/clear_refs", os.O_WRONLY | os.O_CLOEXEC)
            os.write(self.clear_refs, b"5")
        except OSError as exc:
            if self.clear_refs is not None:
                os.close(self.clear_refs)
            self.clear_refs = None
            return f"/proc/self/clear_refs not writable ({exc.strerror})"
        return ""

    def reset_hwm(self) -> None:
        if self.clear_refs is not None:
            os.write(self.clear_refs, b"5")

    @staticmethod
    def tids() -> list[int]:
        return sorted(int(t) for t in os.listdir("/proc/self/task"))

    def close(self) -> None:
        for fd in (self.statm, self.status, self.clear_refs):
            if fd is not None:
                os.close(fd)
        self.clear_refs = None


@dataclass(frozen=True, slots=True)
class Sample:
    t_ns: int
    rss: int
    cpu_s: float
    """Process user + system seconds (getrusage)."""
    vcsw: int
    ivcsw: int
    threads: dict[int, int]
    """tid -> CPU ns."""
    freq_khz: dict[int, int]


def take_sample(proc: ProcReader, freq: FreqSource, tids: Sequence[int]) -> Sample:
    t = time.monotonic_ns()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    threads = {tid: ns for tid in tids if (ns := thread_cpu_ns(tid)) is not None}
    return Sample(
        t,
        proc.rss_bytes(),
        usage.ru_utime + usage.ru_stime,
        usage.ru_nvcsw,
        usage.ru_nivcsw,
        threads,
        freq.read_khz() if freq.fds else {},
    )


class SystemSampler:
    """Takes a Sample every interval on its own thread, from start() to stop() (both included).

    The thread list is re-read every `rescan_s` (a directory listing is the dearest read here);
    a thread's name is read when it is first seen, since it cannot be read once it has exited.
    """

    def __init__(self, interval_s: float, proc: ProcReader, freq: FreqSource, rescan_s: float = 0.1) -> None:
        self.interval_ns = int(interval_s * 1e9)
        self.rescan_every = max(1, round(rescan_s / interval_s))
        self.proc, self.freq = proc, freq
        self.samples: list[Sample] = []
        self.cost_ns: list[int] = []
        self.names: dict[int, str] = {}
        self.tids: list[int] = []
        self.overruns = 0
        self.tid: int | None = None
        self.error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=SAMPLER_THREAD, daemon=True)
        self._thread.start()

    def _rescan(self) -> None:
        self.tids = self.proc.tids()
        for tid in self.tids:
            if tid not in self.names:
                self.names[tid] = thread_name(tid)

    def _loop(self) -> None:
        self.tid = threading.get_native_id()
        name_this_thread(SAMPLER_THREAD)
        next_ns = time.monotonic_ns()
        try:
            for k in itertools.count():
                t0 = time.perf_counter_ns()
                if k % self.rescan_every == 0:
                    self._rescan()
                self.samples.append(take_sample(self.proc, self.freq, self.tids))
                self.cost_ns.append(time.perf_counter_ns() - t0)
                if self._stop.is_set():
                    return
                next_ns += self.interval_ns
                wait_ns = next_ns - time.monotonic_ns()
                if wait_ns < 0:
                    self.overruns += 1
                    next_ns, wait_ns = time.monotonic_ns(), 0
                self._stop.wait(wait_ns / 1e9)
        except (OSError, ValueError) as exc:
            self.error = f"sampler stopped: {exc}"

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


# ---------------------------------------------------------------- analysis (pure)


def series(samples: Sequence[Sample], names: dict[int, str]) -> list[CounterSample]:
    """Counter tracks from consecutive samples (see the module docstring for names and units);
    threads that used no CPU over the whole window get no track."""
    out: list[CounterSample] = [CounterSample("RSS (bytes)", s.t_ns, float(s.rss), "B") for s in samples]
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for s in samples:
        for tid, ns in s.threads.items():
            first.setdefault(tid, ns)
            last[tid] = ns
    idle = {tid for tid in last if last[tid] == first[tid]}
    for a, b in itertools.pairwise(samples):
        dt = (b.t_ns - a.t_ns) / 1e9
        if dt <= 0:
            continue
        out.append(CounterSample("CPU process (%)", a.t_ns, 100 * (b.cpu_s - a.cpu_s) / dt, "%"))
        for tid, ns in b.threads.items():
            if tid in a.threads and tid not in idle:
                value = 100 * (ns - a.threads[tid]) / 1e9 / dt
                out.append(CounterSample(f"CPU {names.get(tid, '?')} {tid} (%)", a.t_ns, value, "%"))
        for cpu, khz in b.freq_khz.items():
            out.append(CounterSample(f"CPU{cpu} frequency (MHz)", b.t_ns, khz / 1e3, "MHz"))
        out.append(CounterSample("Context switches voluntary (/s)", a.t_ns, (b.vcsw - a.vcsw) / dt, "/s"))
        out.append(CounterSample("Context switches involuntary (/s)", a.t_ns, (b.ivcsw - a.ivcsw) / dt, "/s"))
    return out


def thread_table(samples: Sequence[Sample], names: dict[int, str], roles: dict[int, str]) -> list[dict[str, Any]]:
    """CPU seconds per thread between its first and last sample, busiest first."""
    first: dict[int, tuple[int, int]] = {}
    last: dict[int, tuple[int, int]] = {}
    for s in samples:
        for tid, ns in s.threads.items():
            first.setdefault(tid, (s.t_ns, ns))
            last[tid] = (s.t_ns, ns)
    window_s = (samples[-1].t_ns - samples[0].t_ns) / 1e9 if len(samples) > 1 else 0.0
    total = sum(last[t][1] - first[t][1] for t in last)
    rows: list[dict[str, Any]] = []
    for tid in last:
        cpu_ns = last[tid][1] - first[tid][1]
        rows.append(
            {
                "tid": tid,
                "name": names.get(tid, ""),
                "role": roles.get(tid, "other"),
                "cpu_s": cpu_ns / 1e9,
                "cores_busy": cpu_ns / 1e9 / window_s if window_s > 0 else None,
                "share": cpu_ns / total if total > 0 else None,
            }
        )
    rows.sort(key=lambda r: -r["cpu_s"])
    return rows


@dataclass
class StagePoint:
    t_ns: int
    rss: int
    cpu_s: float
    vcsw: int
    ivcsw: int
    threads: dict[int, int]
    hwm: int | None = None


@dataclass
class StageVisit:
    name: str
    iteration: int
    begin: StagePoint
    end: StagePoint
    peak: int
    """Bytes: VmHWM after a reset at begin, or the largest RSS seen (sampled mode)."""

    @property
    def dur_s(self) -> float:
        return (self.end.t_ns - self.begin.t_ns) / 1e9


def stage_tables(visits: Sequence[StageVisit], peak_method: str) -> MetricTables:
    tables = MetricTables(
        units={
            "rss_peak_bytes": "B",
            "rss_begin_bytes": "B",
            "rss_growth_bytes": "B",
            "cpu_s": "s",
            "cores_busy": "cores",
            "threads_busy": "threads",
            "ctx_voluntary": "count",
            "ctx_involuntary": "count",
        },
        methods={
            "cores_busy": "process CPU time / wall time of the stage (getrusage)",
            "threads_busy": f"mean number of threads using >= {BUSY_CORES:.0%} of a core in the stage",
        },
    )
    if peak_method == "sampled":
        tables.methods["rss_peak_bytes"] = (
            "estimate: largest RSS at the stage's markers and the samples inside it (misses shorter peaks)"
        )
    else:
        tables.methods["rss_peak_bytes"] = "VmHWM after a reset at the stage's begin (/proc/self/clear_refs)"
    by: dict[str, list[StageVisit]] = {}
    for v in visits:
        by.setdefault(v.name, []).append(v)
    for name, group in by.items():
        wall = sum(v.dur_s for v in group)
        cpu = [v.end.cpu_s - v.begin.cpu_s for v in group]
        busy = []
        for v in group:
            busy.append(
                sum(
                    1
                    for tid, ns in v.end.threads.items()
                    if v.dur_s > 0 and (ns - v.begin.threads.get(tid, ns)) / 1e9 >= BUSY_CORES * v.dur_s
                )
            )
        tables.stages[name] = {
            "rss_peak_bytes": float(max(v.peak for v in group)),
            "rss_begin_bytes": statistics.fmean(v.begin.rss for v in group),
            "rss_growth_bytes": float(max(v.peak - v.begin.rss for v in group)),
            "cpu_s": statistics.fmean(cpu),
            "cores_busy": sum(cpu) / wall if wall > 0 else 0.0,
            "threads_busy": statistics.fmean(busy),
            "ctx_voluntary": statistics.fmean(v.end.vcsw - v.begin.vcsw for v in group),
            "ctx_involuntary": statistics.fmean(v.end.ivcsw - v.begin.ivcsw for v in group),
        }
    return tables


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
        return Capability.ok(cpu_freq=freq.reason or "available")

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

    def _sampler_cost(self, threads: list[dict[str, Any]]) -> dict[str, Any]:
        """Wall time per sample (includes waits for the GIL and a CPU) and the thread's own CPU time."""
        sampler = self.sampler
        assert sampler is not None
        cost = sorted(sampler.cost_ns)
        own = next((r["cpu_s"] for r in threads if r["tid"] == sampler.tid), None)
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
    ) -> dict[str, Any]:
        sampler = self.sampler
        assert sampler is not None
        window_s = (samples[-1].t_ns - samples[0].t_ns) / 1e9
        rss = [s.rss for s in samples]
        cpu_s = samples[-1].cpu_s - samples[0].cpu_s
        threads = thread_table(samples, names, roles)
        thread_sum = sum(r["cpu_s"] for r in threads)
        stage_peaks = [v.peak for v in self.visits]
        peak = max([self.peak_before, *stage_peaks, *rss, proc.hwm_bytes()])
        summary: dict[str, Any] = {
            "interval_ms": self.config.interval_ms,
            "samples": len(samples),
            "window_s": window_s,
            "rss_bytes": {
                "first": rss[0],
                "last": rss[-1],
                "min": min(rss),
                "max": max(rss),
                "mean": statistics.fmean(rss),
            },
            "peak_rss_bytes": peak,
            "peak_rss_before_measure_bytes": self.peak_before,
            "stage_peak_method": self.peak_method,
            "cpu": {
                "process_s": cpu_s,
                "cores_busy": cpu_s / window_s if window_s > 0 else None,
                "threads_sum_s": thread_sum,
                "threads_vs_process": thread_sum / cpu_s if cpu_s > 0 else None,
            },
            "threads": threads,
            "threads_busy": sum(1 for r in threads if (r["cores_busy"] or 0) >= BUSY_CORES),
            "context_switches": {
                "voluntary": samples[-1].vcsw - samples[0].vcsw,
                "involuntary": samples[-1].ivcsw - samples[0].ivcsw,
                "voluntary_per_s": (samples[-1].vcsw - samples[0].vcsw) / window_s if window_s > 0 else None,
                "involuntary_per_s": (samples[-1].ivcsw - samples[0].ivcsw) / window_s if window_s > 0 else None,
            },
            "stages": {name: dict(row) for name, row in tables.stages.items()},
            "sampler": self._sampler_cost(threads),
        }
        if self.peak_note:
            summary["stage_peak_note"] = self.peak_note
        if self.marker_ns:
            summary["marker_cost_us"] = statistics.fmean(self.marker_ns) / 1e3
        if self.freq.fds:
            per_cpu: dict[str, dict[str, float]] = {}
            for cpu in self.freq.fds:
                mhz = [s.freq_khz[cpu] / 1e3 for s in samples if cpu in s.freq_khz]
                per_cpu[str(cpu)] = {"mean": statistics.fmean(mhz), "min": min(mhz), "max": max(mhz)}
            summary["cpu_freq"] = {"status": "ok", "per_cpu_mhz": per_cpu}
        else:
            summary["cpu_freq"] = {
                "status": "unavailable",
                "reason": self.freq.reason,
                "fix": self.freq.fix,
                "cpuinfo": cpuinfo_mhz(),
            }
        return summary


COLLECTOR = SysstatCollector
