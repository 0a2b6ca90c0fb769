"""System samplers, run for real: their series must agree with the kernel's and psutil's totals."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import psutil
import pytest
from hwprof.collectors.base import PassContext
from hwprof.collectors.sysstat import collector as sysstat
from hwprof.collectors.sysstat import procfs
from hwprof.collectors.sysstat import sampler as sysstat_sampler
from hwprof.collectors.sysstat import series as sysstat_tables
from hwprof.collectors.sysstat import threads as sysstat_threads

from hwprof.core.config import RunConfig
from hwprof.core.markers import Marker, MarkerBus
from hwprof.perf.threadcpu import name_this_thread
from hwprof.schema.records import CounterSample, MetricTables, ThreadName, read_records

MiB = 1 << 20


class BusyThreads:
    """Named threads that exist before the sampler starts, burn `cpu_s` of CPU each outside the GIL
    (hashlib releases it for large buffers) once `go` is set, then idle until `done`."""

    def __init__(self, names: list[str], cpu_s: float) -> None:
        self.go, self.done = threading.Event(), threading.Event()
        self.ready = threading.Barrier(len(names) + 1)
        self.tids: dict[str, int] = {}
        self.cpu_s = cpu_s
        self.threads = [threading.Thread(target=self._run, args=(n,)) for n in names]
        for t in self.threads:
            t.start()
        self.ready.wait()

    def _run(self, name: str) -> None:
        name_this_thread(name)
        self.tids[name] = threading.get_native_id()
        self.ready.wait()
        self.go.wait()
        data = os.urandom(MiB)
        start = time.thread_time()
        while time.thread_time() - start < self.cpu_s:
            hashlib.sha256(data).digest()
        self.done.wait()

    def join(self) -> None:
        self.done.set()
        for t in self.threads:
            t.join()


def test_sampler_series_agree_with_process_totals_and_psutil() -> None:
    busy = BusyThreads(["busy-a", "busy-b"], cpu_s=0.2)
    proc = procfs.ProcReader()
    sampler = sysstat_sampler.SystemSampler(0.01, proc, procfs.FreqSource())
    try:
        sampler.start()
        time.sleep(0.03)
        busy.go.set()
        while any(t.is_alive() for t in busy.threads) and not all(
            (sysstat_threads.thread_cpu_ns(tid) or 0) >= 0.2e9 for tid in busy.tids.values()
        ):
            time.sleep(0.01)
        time.sleep(0.03)
        sampler.stop()
        ps = psutil.Process()
        ps_threads = {t.id: t.user_time + t.system_time for t in ps.threads()}
        ps_rss = ps.memory_info().rss
        ps_cpu = sum(ps.cpu_times()[:2])
    finally:
        busy.join()
        proc.close()
    samples = sampler.samples
    assert not sampler.error
    assert len(samples) >= 10
    first, last = samples[0], samples[-1]
    assert set(busy.tids.values()) <= set(last.threads)
    assert sampler.names[busy.tids["busy-a"]] == "busy-a"
    assert sampler.tid is not None and sampler.names[sampler.tid] == sysstat_sampler.SAMPLER_THREAD

    # per-thread CPU deltas add up to the process's (getrusage) over the same window
    table = sysstat_tables.thread_table(samples, sampler.names, {})
    process_s = last.cpu_s - first.cpu_s
    assert process_s >= 0.4
    assert sum(r.cpu_s for r in table) == pytest.approx(process_s, rel=0.02, abs=0.005)
    busiest = {r.name for r in table[:2]}
    assert busiest == {"busy-a", "busy-b"}

    # psutil's own totals, read right after the last sample (tick resolution: 10 ms per thread)
    for tid in busy.tids.values():
        assert last.threads[tid] / 1e9 == pytest.approx(ps_threads[tid], abs=0.03)
    assert ps_cpu >= last.cpu_s - 0.02
    assert ps_cpu - last.cpu_s < 0.1
    assert last.rss == pytest.approx(ps_rss, rel=0.05)

    # the CPU series integrates back to the totals
    records = sysstat_tables.series(samples, sampler.names)
    process_pct = [r for r in records if r.track == "CPU process (%)"]
    stamps = [s.t_ns for s in samples]
    integral = sum(r.value / 100 * (stamps[i + 1] - stamps[i]) / 1e9 for i, r in enumerate(process_pct))
    assert integral == pytest.approx(process_s, rel=1e-9)
    tid_a = busy.tids["busy-a"]
    a_pct = [r for r in records if r.track == f"CPU busy-a {tid_a} (%)"]
    assert a_pct and all(r.unit == "%" for r in a_pct)
    assert max(r.value for r in a_pct) > 10
    assert {r.unit for r in records if r.track == "RSS (bytes)"} == {"B"}


def test_series_values_from_two_samples() -> None:
    a = sysstat_sampler.Sample(1_000_000_000, 100 * MiB, 2.0, 10, 20, {7: 1_000_000_000, 8: 0, 10: 42}, {0: 2_400_000})
    b = sysstat_sampler.Sample(
        1_010_000_000,
        101 * MiB,
        2.015,
        12,
        21,
        {7: 1_005_000_000, 8: 10_000_000, 9: 5, 10: 42},
        {0: 3_000_000},
    )
    names = {7: "python", 8: "python", 10: "idle"}
    got = {(r.track, r.ts_ns): (r.value, r.unit) for r in sysstat_tables.series([a, b], names)}
    assert got == {
        ("RSS (bytes)", 1_000_000_000): (100.0 * MiB, "B"),
        ("RSS (bytes)", 1_010_000_000): (101.0 * MiB, "B"),
        ("CPU process (%)", 1_000_000_000): (pytest.approx(150.0), "%"),
        ("CPU python 7 (%)", 1_000_000_000): (pytest.approx(50.0), "%"),
        ("CPU python 8 (%)", 1_000_000_000): (pytest.approx(100.0), "%"),
        ("CPU0 frequency (MHz)", 1_010_000_000): (3000.0, "MHz"),
        ("Context switches voluntary (/s)", 1_000_000_000): (pytest.approx(200.0), "/s"),
        ("Context switches involuntary (/s)", 1_000_000_000): (pytest.approx(100.0), "/s"),
    }  # thread 9 appeared between the samples (no interval yet); thread 10 used no CPU: no track


def make_ctx(config: RunConfig, tmp_path: Path) -> PassContext:
    ctx = PassContext(config, tmp_path / "run", "layers", MarkerBus())
    ctx.out_dir.mkdir(parents=True)
    return ctx


def run_stages(collector: sysstat.SysstatCollector, iterations: int = 2) -> None:
    """forward allocates (and touches) 64 MiB for 30 ms, postprocess allocates nothing."""

    def mark(phase: str, name: str, i: int) -> None:
        collector.on_marker(Marker("stage", phase, name, time.monotonic_ns(), i, False))  # type: ignore[arg-type]

    collector.on_marker(Marker("stage", "B", "forward", time.monotonic_ns(), -1, True))  # warm-up: ignored
    for i in range(iterations):
        mark("B", "forward", i)
        blob = b"\x01" * (64 * MiB)
        time.sleep(0.03)
        del blob
        mark("E", "forward", i)
        mark("B", "postprocess", i)
        time.sleep(0.03)
        mark("E", "postprocess", i)


@pytest.mark.parametrize("method", ["hwm-reset", "sampled"])
def test_stage_peaks_catch_a_transient_allocation(tmp_path: Path, method: str) -> None:
    config = RunConfig(interval_ms=5.0, extra={"sysstat_stage_peak": method})
    collector = sysstat.SysstatCollector(config)
    ctx = make_ctx(config, tmp_path)
    collector.open(ctx)
    collector.start(ctx)
    run_stages(collector)
    collector.stop(ctx)
    result = collector.close(ctx)
    assert result.status == "ok", result.reason
    s = result.to_dict()["summary"]
    assert s["stage_peak_method"] == method
    tables = MetricTables.load(ctx.out_dir / "sysstat.metrics.json")
    forward, post = tables.stages["forward"], tables.stages["postprocess"]
    assert forward["rss_growth_bytes"] >= 60 * MiB
    assert post["rss_growth_bytes"] < 16 * MiB
    assert forward["rss_peak_bytes"] >= forward["rss_begin_bytes"] + 60 * MiB
    assert tables.units["rss_peak_bytes"] == "B"
    assert tables.methods["rss_peak_bytes"].startswith("estimate:" if method == "sampled" else "VmHWM")
    assert post["cpu_s"] < 0.02  # sleeping
    records = list(read_records(ctx.out_dir / "sysstat.records.jsonl"))
    rss = [r.value for r in records if isinstance(r, CounterSample) and r.track == "RSS (bytes)"]
    assert len(rss) >= 10
    assert s["peak_rss_bytes"] >= max(rss)
    assert s["peak_rss_bytes"] >= forward["rss_peak_bytes"]
    names = {r.tid: r.name for r in records if isinstance(r, ThreadName)}
    assert names[s["sampler"]["tid"]] == sysstat_sampler.SAMPLER_THREAD
    assert os.getpid() in names
    main = next(r for r in s["threads"] if r["tid"] == os.getpid())
    assert main["role"] == "main"
    assert s["cpu"]["threads_vs_process"] == pytest.approx(1.0, abs=0.05)


@pytest.mark.skipif(
    Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq").exists(), reason="this host has cpufreq"
)
def test_this_host_says_why_frequency_is_not_sampled(tmp_path: Path) -> None:
    config = RunConfig(interval_ms=5.0)
    collector = sysstat.SysstatCollector(config)
    ctx = make_ctx(config, tmp_path)
    collector.open(ctx)
    collector.start(ctx)
    time.sleep(0.03)
    result = collector.close(ctx)
    freq = result.to_dict()["summary"]["cpu_freq"]
    assert freq["status"] == "unavailable"
    assert freq["reason"].startswith("no cpufreq driver: /sys/devices/system/cpu/cpu*/cpufreq")
    assert "modprobe" in freq["fix"]
    assert freq["cpuinfo"]["mhz"]  # quoted, not sampled
    records = list(read_records(ctx.out_dir / "sysstat.records.jsonl"))
    assert not any(isinstance(r, CounterSample) and "frequency" in r.track for r in records)
    assert result.status == "ok"  # the other series are unaffected


def test_frequency_series_from_a_cpufreq_tree(tmp_path: Path) -> None:
    root = tmp_path / "cpu"
    for cpu, khz in ((0, 2_400_000), (1, 3_100_000), (10, 800_000)):
        d = root / f"cpu{cpu}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_cur_freq").write_text(f"{khz}\n")
    (root / "cpufreq").mkdir()  # the policy folder sysfs also has: not a CPU
    config = RunConfig(interval_ms=5.0, extra={"cpu_sysfs_root": str(root)})
    collector = sysstat.SysstatCollector(config)
    ctx = make_ctx(config, tmp_path)
    collector.open(ctx)
    collector.start(ctx)
    time.sleep(0.03)
    result = collector.close(ctx)
    freq = result.to_dict()["summary"]["cpu_freq"]
    assert freq == {
        "status": "ok",
        "per_cpu_mhz": {
            "0": {"mean": 2400.0, "min": 2400.0, "max": 2400.0},
            "1": {"mean": 3100.0, "min": 3100.0, "max": 3100.0},
            "10": {"mean": 800.0, "min": 800.0, "max": 800.0},
        },
    }
    records = list(read_records(ctx.out_dir / "sysstat.records.jsonl"))
    tracks = {r.track: (r.value, r.unit) for r in records if isinstance(r, CounterSample) and "frequency" in r.track}
    assert tracks == {
        "CPU0 frequency (MHz)": (2400.0, "MHz"),
        "CPU1 frequency (MHz)": (3100.0, "MHz"),
        "CPU10 frequency (MHz)": (800.0, "MHz"),
    }


def test_unreadable_frequency_file_is_reported(tmp_path: Path) -> None:
    """A folder where scaling_cur_freq should be fails for root too (EISDIR)."""
    (tmp_path / "cpu0" / "cpufreq" / "scaling_cur_freq").mkdir(parents=True)
    freq = procfs.FreqSource.open(tmp_path)
    assert not freq.fds
    assert freq.reason.startswith("scaling_cur_freq not readable:")
    assert "Is a directory" in freq.reason


def test_probe_is_available_here() -> None:
    cap = sysstat.SysstatCollector.probe(RunConfig())
    assert cap.available, cap.sentence()


def test_close_without_start_fails_cleanly(tmp_path: Path) -> None:
    config = RunConfig()
    collector = sysstat.SysstatCollector(config)
    ctx = make_ctx(config, tmp_path)
    collector.open(ctx)
    result = collector.close(ctx)
    assert result.status == "failed"
    assert "did not run" in result.reason


def test_a_stop_before_two_samples_is_interrupted_not_failed(tmp_path: Path) -> None:
    """A stop that lands as the pass starts leaves the sampler without two samples: interrupted, not failed."""
    from hwprof.session.collector_state import mark_pass_end

    config = RunConfig()
    collector = sysstat.SysstatCollector(config)
    ctx = make_ctx(config, tmp_path)
    collector.open(ctx)
    stop = "stopped by SIGTERM (twice: every process of the pass was killed)"
    result = mark_pass_end(collector.close(ctx), "interrupted", stop)
    assert result.status == "interrupted"
    assert result.reason.startswith(stop) and "did not run" in result.reason
    failed = mark_pass_end(sysstat.SysstatCollector(config).close(ctx), "failed", "the model raised")
    assert failed.status == "failed"
