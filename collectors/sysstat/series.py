"""sysstat's samples as tables: counter series, CPU time per thread, and figures per stage."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from hwprof.collectors.sysstat.sampler import Sample

from hwprof.schema.codec import JsonObject
from hwprof.schema.records import CounterSample, MetricTables

BUSY_CORES = 0.10
"""A thread is busy in a window when it used at least this fraction of one core."""


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


@dataclass
class ThreadCpu:
    """One thread's CPU time between its first and last sample."""

    tid: int
    name: str
    role: str
    cpu_s: float
    cores_busy: float | None
    share: float | None
    """Of all the threads' CPU time."""

    def to_json(self) -> JsonObject:
        return asdict(self)


def thread_table(samples: Sequence[Sample], names: dict[int, str], roles: dict[int, str]) -> list[ThreadCpu]:
    """CPU seconds per thread between its first and last sample, busiest first."""
    first: dict[int, tuple[int, int]] = {}
    last: dict[int, tuple[int, int]] = {}
    for s in samples:
        for tid, ns in s.threads.items():
            first.setdefault(tid, (s.t_ns, ns))
            last[tid] = (s.t_ns, ns)
    window_s = (samples[-1].t_ns - samples[0].t_ns) / 1e9 if len(samples) > 1 else 0.0
    total = sum(last[t][1] - first[t][1] for t in last)
    rows: list[ThreadCpu] = []
    for tid in last:
        cpu_ns = last[tid][1] - first[tid][1]
        rows.append(
            ThreadCpu(
                tid,
                names.get(tid, ""),
                roles.get(tid, "other"),
                cpu_ns / 1e9,
                cpu_ns / 1e9 / window_s if window_s > 0 else None,
                cpu_ns / total if total > 0 else None,
            )
        )
    rows.sort(key=lambda r: -r.cpu_s)
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
