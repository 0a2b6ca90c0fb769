"""RAPL collector on a fake powercap tree with the real layout, and the perf fallback's plumbing.

Energy figures are checked against scripted readings whose per-stage energies are worked out by hand below, on
any host. What the host running the suite has is checked only for what holds on every host; what RAPL says on
each recorded host (no powercap, a power PMU that does not count...) is tests/test_recorded_hosts.py's.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from pathlib import Path

import pytest
from hwprof.collectors.base import PassContext
from hwprof.collectors.rapl import collector as rapl
from hwprof.collectors.rapl import energy as rapl_energy
from hwprof.collectors.rapl import perf_energy, sources

from hwprof.core.config import RunConfig
from hwprof.core.markers import Marker, MarkerBus
from hwprof.perf.steal import CpuTimeBand, cpu_count, uncharged_ns
from hwprof.schema.records import CounterSample, MetricTables, read_records, write_records

MAX_PKG = 262143328850
"""max_energy_range_uj of a real package zone (2^32 energy-status units of 61.035 uJ)."""
MAX_DRAM = 65712999613

ZONES: dict[str, tuple[str, int]] = {
    "intel-rapl:0": ("package-0", MAX_PKG),
    "intel-rapl:0:0": ("core", MAX_PKG),
    "intel-rapl:0:1": ("dram", MAX_DRAM),
    "intel-rapl:1": ("package-1", MAX_PKG),
    "intel-rapl:1:0": ("core", MAX_PKG),
    "intel-rapl:1:1": ("dram", MAX_DRAM),
}
LABELS = ["package-0", "package-0/core", "package-0/dram", "package-1", "package-1/core", "package-1/dram"]


def zone_dir(root: Path, zone: str) -> Path:
    parts = zone.split(":")
    return root / zone if len(parts) == 2 else root / ":".join(parts[:2]) / zone


def make_tree(root: Path, start: dict[str, int] | None = None) -> Path:
    """/sys/class/powercap as the kernel lays it out: the control type folder, top-level zones,
    sub-zones inside their package, and links to every zone at the top."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "intel-rapl").mkdir()
    (root / "intel-rapl" / "enabled").write_text("1\n")
    for zone, (name, max_range) in ZONES.items():
        d = zone_dir(root, zone)
        d.mkdir(parents=True)
        (d / "name").write_text(name + "\n")
        (d / "max_energy_range_uj").write_text(f"{max_range}\n")
        (d / "enabled").write_text("1\n")
        (d / "constraint_0_name").write_text("long_term\n")
        (d / "energy_uj").write_text(f"{(start or {}).get(zone, 1000)}\n")
        if d.parent != root:
            (root / zone).symlink_to(d.relative_to(root))
    return root


def set_energy(root: Path, values: dict[str, int]) -> None:
    for zone, value in values.items():
        (zone_dir(root, zone) / "energy_uj").write_text(f"{value}\n")


def config_for(root: Path, tmp_path: Path, batch: int = 1, interval_ms: float = 10.0) -> RunConfig:
    extra = {"powercap_root": str(root), "event_source_root": str(tmp_path / "no-event-source")}
    return RunConfig(model="yolov8n", batch=batch, interval_ms=interval_ms, extra=extra)


def context(config: RunConfig, tmp_path: Path) -> PassContext:
    ctx = PassContext(config, tmp_path / "run", "layers", MarkerBus())
    ctx.out_dir.mkdir(parents=True)
    return ctx


def test_discovers_every_zone_once_with_labels(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "powercap")
    source = sources.open_powercap(root)
    try:
        assert [d.label for d in source.domains] == LABELS
        assert [d.zone for d in source.domains] == list(ZONES)
        assert [d.max_range_uj for d in source.domains] == [m for _, m in ZONES.values()]
        assert [source.domains[i].label for i in rapl_energy.headline_indices(source.domains)] == [
            "package-0",
            "package-0/dram",
            "package-1",
            "package-1/dram",
        ]
        assert source.read() == [1000.0] * 6
        set_energy(root, {"intel-rapl:1:0": 123456})
        assert source.read()[4] == 123456.0  # re-read through the kept-open fd
    finally:
        source.close()


def test_delta_across_a_wrap() -> None:
    assert sources.delta_uj(100, 350, MAX_PKG) == 250
    assert sources.delta_uj(MAX_PKG - 1_000_000, 1_000_000, MAX_PKG) == 2_000_000
    assert sources.delta_uj(5.0, 3.0, None) == -2.0  # perf counts never wrap


class Script:
    """Drives the collector like the worker: counters advance by scripted microjoules, then a marker."""

    def __init__(self, root: Path, collector: rapl.RaplCollector, start: dict[str, int]) -> None:
        self.root, self.collector = root, collector
        self.raw = dict(start)
        self.t_ns = 10**12

    def step(
        self,
        kind: str,
        phase: str,
        name: str,
        iteration: int,
        dt_s: float,
        add: dict[str, int] | None = None,
        warmup: bool = False,
    ) -> None:
        for zone, uj in (add or {}).items():
            self.raw[zone] = (self.raw[zone] + uj) % ZONES[zone][1]
        set_energy(self.root, self.raw)
        self.t_ns += round(dt_s * 1e9)
        self.collector.on_marker(Marker(kind, phase, name, self.t_ns, iteration, warmup))  # type: ignore[arg-type]


# Scripted energy, in microjoules, per zone: forward of iteration 0 and 1, and every postprocess.
FORWARD = [
    {
        "intel-rapl:0": 2_000_000,
        "intel-rapl:0:0": 1_500_000,
        "intel-rapl:0:1": 500_000,
        "intel-rapl:1": 1_000_000,
        "intel-rapl:1:0": 250_000,
        "intel-rapl:1:1": 125_000,
    },
    {
        "intel-rapl:0": 3_000_000,
        "intel-rapl:0:0": 2_500_000,
        "intel-rapl:0:1": 250_000,
        "intel-rapl:1": 1_000_000,
        "intel-rapl:1:0": 250_000,
        "intel-rapl:1:1": 125_000,
    },
]
POSTPROCESS = {"intel-rapl:0": 250_000}
START = {
    "intel-rapl:0": MAX_PKG - 1_000_000,
    "intel-rapl:0:0": 10,
    "intel-rapl:0:1": MAX_DRAM - 100_000,
    "intel-rapl:1": 0,
    "intel-rapl:1:0": 0,
    "intel-rapl:1:1": 7,
}


def run_script(tmp_path: Path) -> tuple[rapl.RaplCollector, PassContext]:
    root = make_tree(tmp_path / "powercap", START)
    config = config_for(root, tmp_path, batch=1, interval_ms=5.0)
    collector = rapl.RaplCollector(config)
    ctx = context(config, tmp_path)
    collector.open(ctx)
    script = Script(root, collector, START)
    # a warm-up iteration with energy that must not count
    script.step("iteration", "B", "iteration", -1, 0.0, warmup=True)
    script.step("iteration", "E", "iteration", -1, 1.0, {"intel-rapl:0": 9_999_999}, warmup=True)
    for i in range(2):
        script.step("iteration", "B", "iteration", i, 0.0)
        script.step("stage", "B", "forward", i, 0.125)
        script.step("stage", "E", "forward", i, 0.5, FORWARD[i])
        script.step("stage", "B", "postprocess", i, 0.0)
        script.step("stage", "E", "postprocess", i, 0.25, POSTPROCESS)
        script.step("iteration", "E", "iteration", i, 0.125)
    return collector, ctx


def test_energy_per_stage_matches_hand_computed_values(tmp_path: Path) -> None:
    collector, ctx = run_script(tmp_path)
    result = collector.close(ctx)
    assert result.status == "ok", result.reason
    s = result.to_dict()["summary"]
    assert s["source"] == "powercap"
    assert s["energy_J_is"] == "package-0 + package-0/dram + package-1 + package-1/dram"
    forward = s["stages"]["forward"]
    # iteration 0: 2 + 0.5 + 1 + 0.125 = 3.625 J (package-0 and its dram both wrapped);
    # iteration 1: 3 + 0.25 + 1 + 0.125 = 4.375 J
    assert forward["n"] == 2
    assert forward["mean"] == 4.0
    assert forward["min"] == 3.625 and forward["max"] == 4.375
    assert forward["std"] == pytest.approx(0.75 / math.sqrt(2), rel=1e-12)
    assert forward["avg_W"] == 8.0  # 8 J over 2 x 0.5 s
    assert forward["dur_ms_mean"] == 500.0
    assert forward["iterations_for_5pct"] == 28  # ceil((1.96 * 0.5303 / 0.2)^2) = ceil(27.01)
    assert forward["domains"]["package-0"]["mean_J"] == 2.5
    assert forward["domains"]["package-0/core"]["mean_J"] == 2.0
    assert forward["domains"]["package-0/dram"]["mean_J"] == 0.375
    assert forward["domains"]["package-1/dram"]["mean_J"] == 0.125
    post = s["stages"]["postprocess"]
    assert post["mean"] == 0.25 and post["std"] == 0.0 and post["avg_W"] == 1.0
    assert post["domains"]["package-1"]["mean_J"] == 0.0
    # an iteration is forward + postprocess: 3.875 and 4.625 J over 1 s each
    per_inf = s["per_inference"]
    assert per_inf["J_per_inference"] == 4.25
    assert per_inf["inferences_per_J"] == 1 / 4.25
    assert per_inf["avg_W"] == 4.25
    assert per_inf["iterations"] == 2
    assert per_inf["domains_J_per_inference"]["package-0"] == 2.75
    tables = MetricTables.load(ctx.out_dir / "rapl.metrics.json")
    assert tables.stages["forward"]["energy_J"] == 4.0
    assert tables.stages["forward"]["energy_J:package-0/core"] == 2.0
    assert tables.stages["forward"]["power_W"] == 8.0
    assert tables.units["energy_J"] == "J"
    assert "between the span's begin and end markers" in tables.methods["energy_J"]
    assert tables.layers == {}
    assert s["per_layer"]["reported"] == 0 and "no layer readings" in s["per_layer"]["reason"]
    lines = [json.loads(x) for x in (ctx.out_dir / rapl.READINGS_FILE).read_text().splitlines()]
    assert lines[0]["type"] == "header" and lines[0]["unit"] == "uJ"
    assert sum(1 for x in lines if x["type"] == "marker") == 12  # warm-up markers are not read


def reading(kind: str, phase: str, name: str, i: int, t_ns: int, uj: float) -> rapl_energy.Reading:
    return rapl_energy.Reading(kind, phase, name, i, t_ns, (uj,))


def test_layer_energy_only_where_the_spread_allows() -> None:
    domains = [sources.Domain("package-0", "intel-rapl:0", MAX_PKG, True)]
    readings: list[rapl_energy.Reading] = []
    t, e = 0, 0.0
    steady = [1000.0] * 6
    noisy = [0.0, 2000.0, 0.0, 0.0, 3000.0, 0.0]  # a short layer: most spans see no RAPL step
    for i in range(6):
        readings.append(reading("layer", "B", "model.0", i, t, e))
        t, e = t + 2_000_000, e + steady[i]
        readings.append(reading("layer", "E", "model.0", i, t, e))
        readings.append(reading("layer", "B", "model.1", i, t, e))
        t, e = t + 100_000, e + noisy[i]
        readings.append(reading("layer", "E", "model.1", i, t, e))
    report = rapl_energy.energy_report(readings, domains, batch=1)
    assert list(report.layers) == ["model.0"]
    assert report.tables.layers["model.0"]["energy_J"] == 0.001
    assert report.tables.layers["model.0"]["energy_J_sem"] == 0.0
    assert report.layer_note.reported == 1 and report.layer_note.withheld == 1
    assert "standard error above 10%" in (report.layer_note.reason or "")
    # model.1: mean 833.3 uJ, std 1329 uJ -> (std / (0.1 mean))^2 = 254.4 -> 255 iterations
    assert report.layer_note.iterations_needed_median == 255
    assert report.per_inference.to_json() == {}  # no iteration spans in this script


def test_power_series_in_watts_across_a_wrap() -> None:
    domains = [
        sources.Domain("package-0", "intel-rapl:0", MAX_PKG, True),
        sources.Domain("package-0/dram", "intel-rapl:0:1", MAX_DRAM, False),
    ]
    samples = [
        (0, [MAX_PKG - 50_000.0, 0.0]),
        (10_000_000, [50_000.0, 25_000.0]),
        (30_000_000, [250_000.0, 25_000.0]),
    ]
    series = rapl_energy.power_series(samples, domains)
    assert [(c.track, c.ts_ns, c.value, c.unit) for c in series] == [
        ("RAPL package-0 (W)", 0, 10.0, "W"),  # 100 mJ over 10 ms, across the wrap
        ("RAPL package-0/dram (W)", 0, 2.5, "W"),
        ("RAPL package-0 (W)", 10_000_000, 10.0, "W"),
        ("RAPL package-0/dram (W)", 10_000_000, 0.0, "W"),
    ]
    assert not any(c.track.lower().startswith("power") for c in series)


def test_unreadable_zone_is_skipped_and_reported(tmp_path: Path) -> None:
    """A directory where energy_uj should be: unreadable even for root (reads fail with EISDIR).
    Tests run as root here, and root reads chmod-000 files, so permission bits alone prove nothing."""
    root = make_tree(tmp_path / "powercap")
    energy = zone_dir(root, "intel-rapl:1:1") / "energy_uj"
    energy.unlink()
    energy.mkdir()
    collector, ctx = rapl.RaplCollector(config_for(root, tmp_path)), None
    ctx = context(collector.config, tmp_path)
    collector.open(ctx)
    assert collector.source is not None
    assert [d.label for d in collector.source.domains] == LABELS[:5]
    collector.on_marker(Marker("iteration", "B", "iteration", 1000, 0, False))
    set_energy(root, {zone: 5000 for zone in ZONES if zone != "intel-rapl:1:1"})
    collector.on_marker(Marker("iteration", "E", "iteration", 2000, 0, False))
    result = collector.close(ctx)
    assert result.status == "partial"
    assert "intel-rapl:1:1 not readable" in result.reason
    assert "never changed" not in result.reason
    assert "Is a directory" in result.to_dict()["summary"]["skipped"]["intel-rapl:1:1"]


def test_energy_not_readable_gives_the_chmod_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every energy_uj is chmod 000. As root that alone does not stop a read, so open() is also made
    to fail with EACCES for those files, exactly as it does for a normal user on Linux >= 5.10."""
    root = make_tree(tmp_path / "powercap")
    for zone in ZONES:
        (zone_dir(root, zone) / "energy_uj").chmod(0)
    real_open = open

    def deny(path: object, *args: object, **kw: object) -> object:
        if str(path).endswith("energy_uj"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(sources, "open", deny, raising=False)
    cap = rapl.RaplCollector.probe(config_for(root, tmp_path))
    assert not cap.available
    assert cap.reason.startswith("powercap energy_uj not readable (root-only since Linux 5.10)")
    assert "Permission denied" in cap.reason
    assert f"sudo chmod a+r {root}/intel-rapl:*/energy_uj" in cap.fix
    assert "or run hwprof as root" in cap.fix
    assert "perf has no power PMU" in cap.reason  # the fallback was tried too


def test_no_powercap_and_no_perf_pmu_is_unavailable_and_writes_nothing(tmp_path: Path) -> None:
    config = config_for(tmp_path / "absent", tmp_path)
    cap = rapl.RaplCollector.probe(config)
    assert not cap.available
    assert cap.reason == (
        f"no powercap driver: {tmp_path / 'absent'} does not exist; "
        f"perf has no power PMU ({tmp_path / 'no-event-source' / 'power'} does not exist)"
    )
    assert cap.fix.startswith("sudo modprobe intel_rapl_msr")
    collector = rapl.RaplCollector(config)
    ctx = context(config, tmp_path)
    collector.open(ctx)
    collector.start(ctx)
    collector.on_marker(Marker("stage", "B", "forward", 1, 0, False))
    result = collector.close(ctx)
    assert result.status == "unavailable" and result.reason == cap.reason and result.fix == cap.fix
    assert list(ctx.out_dir.iterdir()) == []


def test_root_comes_from_config_then_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sources.ENV_POWERCAP_ROOT, str(tmp_path / "env"))
    assert sources.powercap_root(RunConfig()) == tmp_path / "env"
    assert sources.powercap_root(RunConfig(extra={"powercap_root": str(tmp_path / "cfg")})) == tmp_path / "cfg"
    monkeypatch.delenv(sources.ENV_POWERCAP_ROOT)
    assert sources.powercap_root(RunConfig()) == Path("/sys/class/powercap")


def test_this_host_measures_energy_or_says_why_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever host runs it: RAPL is unavailable with a reason and a fix, or available, and then 0.2 s of busy
    work measures energy, never 0 J. Each recorded host's own reason is tests/test_recorded_hosts.py's."""
    monkeypatch.delenv(sources.ENV_POWERCAP_ROOT, raising=False)
    monkeypatch.delenv(sources.ENV_EVENT_SOURCE_ROOT, raising=False)
    cap = rapl.RaplCollector.probe(RunConfig())
    if not cap.available:
        assert cap.reason and cap.fix, cap
        return
    source = sources.open_source(RunConfig())
    try:
        before = source.read()
        start = time.monotonic()
        while time.monotonic() - start < 0.2:
            pass
        after = source.read()
    finally:
        source.close()
    moved = [sources.delta_uj(b, a, d.max_range_uj) for b, a, d in zip(before, after, source.domains, strict=True)]
    assert sum(uj for uj, d in zip(moved, source.domains, strict=True) if d.top_level) > 0, (source.where, moved)


def test_sampler_thread_writes_power_tracks(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "powercap")
    config = config_for(root, tmp_path, interval_ms=5.0)
    collector = rapl.RaplCollector(config)
    ctx = context(config, tmp_path)
    collector.open(ctx)
    collector.prepare(ctx)
    assert collector.update_interval.value_ms is None  # a fake tree never steps
    collector.start(ctx)
    collector.on_marker(Marker("iteration", "B", "iteration", 10, 0, False))
    files = [open(zone_dir(root, zone) / "energy_uj", "r+b", buffering=0) for zone in ZONES]  # noqa: SIM115
    for k in range(10):
        # in place and of constant length, as sysfs does: the sampler may read at any moment
        for energy in files:
            os.pwrite(energy.fileno(), f"{1000 + 20_000 * (k + 1):020d}\n".encode(), 0)
        time.sleep(0.01)
    for energy in files:
        energy.close()
    collector.on_marker(Marker("iteration", "E", "iteration", 100_000_010, 0, False))
    result = collector.close(ctx)
    assert result.status == "ok"
    records = [r for r in read_records(ctx.out_dir / "rapl.records.jsonl") if isinstance(r, CounterSample)]
    assert {r.track for r in records} == {f"RAPL {label} (W)" for label in LABELS}
    assert {r.unit for r in records} == {"W"}
    package = [r for r in records if r.track == "RAPL package-0 (W)"]
    assert len(package) >= 10  # ~0.1 s at 5 ms
    assert sum(r.value for r in package) > 0
    assert result.to_dict()["summary"]["read_cost_us"]["domains"] == 6


def test_event_encoding_and_cpu_lists() -> None:
    assert perf_energy.encode_event("event=0x02", {"event": "config:0-7"}) == {"config": 2}
    formats = {"event": "config:0-7", "umask": "config:8-15"}
    assert perf_energy.encode_event("event=0x3c,umask=0x1", formats) == {"config": 0x13C}
    assert perf_energy.parse_cpu_list("0,36\n") == [0, 36]
    assert perf_energy.parse_cpu_list("0-2,8") == [0, 1, 2, 8]
    with pytest.raises(ValueError, match="no format"):
        perf_energy.encode_event("bogus=1", {"event": "config:0-7"})


MSR_PMU = Path("/sys/bus/event_source/devices/msr")


@pytest.mark.skipif(not (MSR_PMU / "type").exists(), reason="no msr PMU to stand in for the power PMU")
def test_perf_fallback_opens_and_reads_a_real_pmu(tmp_path: Path) -> None:
    """A 'power' PMU folder that points at the host's msr PMU (type and tsc event): the fallback's
    sysfs parsing, perf_event_open and reads run for real; the 'energy' is TSC ticks x scale."""
    pmu = tmp_path / "event_source" / "power"
    (pmu / "format").mkdir(parents=True)
    (pmu / "events").mkdir()
    (pmu / "type").write_text((MSR_PMU / "type").read_text())
    (pmu / "format" / "event").write_text((MSR_PMU / "format" / "event").read_text())
    (pmu / "cpumask").write_text("0\n")
    (pmu / "events" / "energy-pkg").write_text((MSR_PMU / "events" / "tsc").read_text())
    (pmu / "events" / "energy-pkg.scale").write_text("2.3283064365386962890625e-10\n")
    (pmu / "events" / "energy-pkg.unit").write_text("Joules\n")
    config = RunConfig(extra={"powercap_root": str(tmp_path / "absent"), "event_source_root": str(pmu.parent)})
    try:
        source = sources.open_source(config)
    except sources.SourceUnavailable as exc:
        assert "perf_event_open on the power PMU failed" in exc.reason
        assert "perf_event_paranoid=0" in exc.fix
        pytest.skip(f"cpu-wide perf events not allowed here: {exc.reason}")
    try:
        assert source.kind == "perf"
        assert [d.label for d in source.domains] == ["package-0"]
        assert source.domains[0].max_range_uj is None
        assert "no powercap driver" in source.skipped["powercap"]
        first = source.read()[0]
        time.sleep(0.01)
        second = source.read()[0]
        assert second > first > 0
    finally:
        source.close()


def test_perf_event_open_counts_task_clock() -> None:
    """The ctypes perf_event_open itself, on a software event every kernel has: this thread's
    task-clock must agree with its CPU time from the C library, allowing the host's steal time."""
    fd = perf_energy.perf_event_open(1, {"config": 1}, 0, -1)  # PERF_TYPE_SOFTWARE, TASK_CLOCK, this thread
    try:
        lost_before = uncharged_ns() or 0
        before, cpu_before = perf_energy.read_count(fd), time.thread_time_ns()
        while time.thread_time_ns() - cpu_before < 20_000_000:
            pass
        counted, cpu = perf_energy.read_count(fd) - before, time.thread_time_ns() - cpu_before
        band = CpuTimeBand(cpu, (uncharged_ns() or 0) - lost_before, windows=1, cpus=cpu_count(), rel=0.05)
        assert band.holds(counted), (counted, cpu, band)
    finally:
        os.close(fd)


def test_counters_that_never_change_are_unavailable_and_no_zero_is_written(tmp_path: Path) -> None:
    """The 16-CPU VM's energy-psys: offered, readable, never moving. No energy figure may come of it."""
    root = make_tree(tmp_path / "powercap")
    collector = rapl.RaplCollector(config_for(root, tmp_path))
    ctx = context(collector.config, tmp_path)
    collector.open(ctx)
    for i in range(3):
        collector.on_marker(Marker("iteration", "B", "iteration", 1000 + 10 * i, i, False))
        collector.on_marker(Marker("stage", "B", "forward", 1002 + 10 * i, i, False))
        collector.on_marker(Marker("stage", "E", "forward", 1008 + 10 * i, i, False))
        collector.on_marker(Marker("iteration", "E", "iteration", 1009 + 10 * i, i, False))
    result = collector.close(ctx)
    assert result.status == "unavailable"
    assert result.reason.startswith("the energy counter package-0, package-0/core")
    assert "never changed during the 3 measured iterations (12 reads" in result.reason
    assert "bare metal" in result.fix
    summary = result.to_dict()["summary"]
    assert "per_inference" not in summary and "stages" not in summary
    assert not (ctx.out_dir / "rapl.metrics.json").exists()
    assert not (ctx.out_dir / "rapl.records.jsonl").exists()
    assert (ctx.out_dir / rapl.READINGS_FILE).exists()  # the raw readings are kept
    assert result.to_dict()["summary"]["still_counters"]["domains"] == LABELS


def test_a_still_domain_is_left_out_and_the_others_are_reported(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "powercap")
    collector = rapl.RaplCollector(config_for(root, tmp_path))
    ctx = context(collector.config, tmp_path)
    collector.open(ctx)
    collector.on_marker(Marker("iteration", "B", "iteration", 10**9, 0, False))
    set_energy(root, {zone: 2_001_000 for zone in ZONES if zone != "intel-rapl:0:1"})
    collector.on_marker(Marker("iteration", "E", "iteration", 2 * 10**9, 0, False))
    result = collector.close(ctx)
    assert result.status == "partial"
    assert "left out: the energy counter package-0/dram never changed" in result.reason
    assert "package-0/dram" not in result.to_dict()["summary"]["per_inference"]["domains_J_per_inference"]
    assert result.to_dict()["summary"]["energy_J_is"] == "package-0 + package-1 + package-1/dram"
    assert result.to_dict()["summary"]["per_inference"]["J_per_inference"] == pytest.approx(6.0)


def test_probe_refuses_a_counter_that_does_not_move(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "powercap")
    cap = rapl.RaplCollector.probe(config_for(root, tmp_path))
    assert not cap.available
    assert "changed in 200 ms of polling" in cap.reason and "does not count on this machine" in cap.reason
    assert "bare metal" in cap.fix


def test_probe_accepts_a_counter_that_moves(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "powercap")
    stop = threading.Event()

    def tick() -> None:
        k = 0
        with open(zone_dir(root, "intel-rapl:0") / "energy_uj", "r+b", buffering=0) as energy:
            while not stop.is_set():
                k += 1
                os.pwrite(energy.fileno(), f"{1000 + 61 * k:020d}\n".encode(), 0)
                time.sleep(0.001)

    thread = threading.Thread(target=tick)
    thread.start()
    try:
        cap = rapl.RaplCollector.probe(config_for(root, tmp_path))
    finally:
        stop.set()
        thread.join()
    assert cap.available, cap.reason


FIXTURES = Path(__file__).parent / "fixtures"


def test_a_recorded_run_with_a_still_counter_reports_energy_unavailable(tmp_path: Path) -> None:
    """The 16-CPU VM's run: rapl 'ok', 0.000 J per image. Analysis must set it aside, with the reason."""
    from rich.console import Console

    from hwprof.analysis.run_analysis import analyse
    from hwprof.render.report import render_rich
    from hwprof.rundir.reader import RunData

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text((FIXTURES / "cpu16_still_energy" / "run.json").read_text())
    data = RunData.load(run_dir)
    assert data.doc.entry("rapl").status == "ok"  # as recorded
    a = analyse(data)
    assert a.stages.j_per_image is None and a.stages.energy_missing is not None
    assert "psys never changed during the 20 measured iterations" in a.stages.energy_missing.reason
    assert all(r.energy_j is None for r in a.stages.rows)
    assert a.unavailable["rapl"]["status"] == "unavailable"
    console = Console(width=100, record=True)
    render_rich(a, console)
    text = console.export_text()
    assert "0.000 J" not in text and "J per image" not in text
    assert "never changed" in text


def test_a_recorded_still_counter_draws_no_power_track(tmp_path: Path) -> None:
    from hwprof.trace.tracks import build_timeline

    run_dir = tmp_path / "run"
    (run_dir / "passes" / "layers").mkdir(parents=True)
    (run_dir / "run.json").write_text((FIXTURES / "cpu16_still_energy" / "run.json").read_text())
    rows = [CounterSample("RAPL psys (W)", 10**9 + k * 10**7, 0.0, "W") for k in range(5)]
    rows.append(CounterSample("cpu util (%)", 10**9, 50.0, "%"))
    write_records(run_dir / "passes" / "layers" / "rapl.records.jsonl", rows[:5])
    write_records(run_dir / "passes" / "layers" / "sysstat.records.jsonl", rows[5:])
    timeline = build_timeline(run_dir)
    names = {c.name for p in timeline.passes for c in p.counter_tracks}
    assert "cpu util (%)" in names
    assert not any("RAPL" in n for n in names)


def test_analysis_withholds_a_still_counter_on_a_copy_of_the_typed_document() -> None:
    """validity.checked: the copy's run.json sets rapl aside (status, reason and fix updated in place, the
    mark last, as the dict patch wrote it); the loaded run keeps its document as recorded."""
    from hwprof.analysis.validity import checked
    from hwprof.rundir.reader import RunData
    from hwprof.schema.rapl_still import NO_FIX
    from hwprof.schema.run import RunDoc

    path = FIXTURES / "cpu16_still_energy" / "run.json"
    recorded = json.loads(path.read_text())
    data = RunData(path.parent, RunDoc.read(recorded, str(path)))
    copy = checked(data)
    assert copy.withheld == {"rapl"} and data.withheld == frozenset()
    entry = copy.doc.to_json()["collectors"]["rapl"]
    reason = entry["reason"]
    expected = {**recorded["collectors"]["rapl"], "status": "unavailable", "reason": reason, "fix": NO_FIX}
    assert list(entry.items()) == list({**expected, "set_aside_by_analysis": True}.items())
    assert "never changed" in reason
    assert data.doc.to_json() == recorded and data.doc.entry("rapl").status == "ok"
    assert copy.doc.collectors["timing"] is data.doc.collectors["timing"]
