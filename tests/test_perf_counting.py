"""Pure counting logic on fixtures: what needs a PMU is tested here with hand-written readings.

The readings fixture (fixtures/perf/readings_rotation.jsonl) is two iterations of a forward with
layers model.0, model.1 and model.1.cv1 nested in model.1; hardware groups 1 and 2 rotate; in
iteration 0 group 1 ran only half of the model.1.cv1 interval. Per-interval deltas (9 intervals
between the 10 markers of an iteration; owners: iteration, forward, model.0, forward, model.1,
model.1.cv1, model.1, forward, iteration):
  task-clock   20 10  200 6  40  400 14 4 2 (both iterations)
  cycles it0   40 20 1500 12 80  800 28 8 4 (raw; cv1 ran 200 of 400 ns: scaled 1600)
  cycles it1   40 20 1700 12 80 1600 28 8 4
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest

from hwprof.perf import readings as readings_io
from hwprof.perf.counting import (
    Count,
    Reading,
    SpanCounts,
    aggregate,
    attribute,
    closure,
    cpu_check,
    interval_series,
    scale,
    scaled_delta,
)
from hwprof.perf.derived import derived_metrics
from hwprof.perf.engine import CounterSet
from hwprof.perf.events import (
    DEFAULT_EVENTS,
    EventResolver,
    EventSpec,
    UnknownEventError,
    parse_format,
    parse_terms,
)
from hwprof.perf.groups import coverage, plan_groups, rotation
from hwprof.perf.metric_tables import analyse
from hwprof.perf.open_errors import NO_PMU_REASON, explain, unavailable
from hwprof.perf.syscall import (
    PERF_TYPE_HARDWARE,
    PERF_TYPE_HW_CACHE,
    PERF_TYPE_SOFTWARE,
    GroupReading,
    PerfOpenError,
)

FIXTURES = Path(__file__).parent / "fixtures" / "perf"
INTEL = FIXTURES / "sysfs_intel"
AMD = FIXTURES / "sysfs_amd"


# --- multiplex scaling ----------------------------------------------------------------------------

# (value, time_enabled, time_running) -> scaled, the read_format semantics of perf_event_open(2)
TRIPLES = [
    ((1_000_000, 2_000_000, 2_000_000), 1_000_000.0),
    ((1_000_000, 3_000_000, 1_000_000), 3_000_000.0),
    ((123_456, 1_000_000, 666_667), 123_456 * 1_000_000 / 666_667),
    ((0, 5_000, 5_000), 0.0),
]


@pytest.mark.parametrize(("triple", "expected"), TRIPLES)
def test_scale_triples(triple: tuple[int, int, int], expected: float) -> None:
    assert scale(*triple) == pytest.approx(expected)


def test_scale_never_ran_is_unmeasured_not_zero() -> None:
    assert scale(0, 1_000, 0) is None
    assert scaled_delta(Count(10, 100, 0), Count(10, 300, 0)) is None


def test_scaled_delta_uses_the_interval_ratio_only() -> None:
    # whole-run ratio would be 400/300; the interval ran 100 of 200 ns, so x2
    a, b = Count(1_000, 200, 200), Count(1_500, 400, 300)
    assert scaled_delta(a, b) == pytest.approx(1_000.0)


def test_scaled_delta_refuses_counts_of_different_groups() -> None:
    assert scaled_delta(Count(10, 100, 100, group=1), Count(20, 200, 200, group=2)) is None
    assert scaled_delta(Count(10, 100, 100), Count(10, 100, 100)) is None  # disabled: enabled did not move


# --- attribution on the rotation fixture -----------------------------------------------------------


@pytest.fixture(scope="module")
def loaded() -> readings_io.Loaded:
    return readings_io.load(FIXTURES / "readings_rotation.jsonl")


def _span(spans: list[SpanCounts], name: str, iteration: int) -> SpanCounts:
    return next(s for s in spans if s.name == name and s.iteration == iteration)


def test_self_and_inclusive_counts(loaded: readings_io.Loaded) -> None:
    spans = attribute(loaded.readings)
    m1 = _span(spans, "model.1", 0)
    assert m1.self["task-clock"] == 40 + 14
    assert m1.inclusive["task-clock"] == 40 + 400 + 14
    assert m1.self["cycles"] == 80 + 28
    # inclusive over a multiplexed interval: raw 908 over enabled 454 / running 254
    assert m1.inclusive["cycles"] == pytest.approx(908 * 454 / 254)
    cv1 = _span(spans, "model.1.cv1", 0)
    assert cv1.self["cycles"] == pytest.approx(1600.0)
    assert cv1.running["cycles"] == pytest.approx(0.5)
    assert cv1.depth == 3 and m1.children == 1
    forward = _span(spans, "forward", 0)
    assert forward.self["task-clock"] == 10 + 6 + 4  # the gap
    assert forward.self_wall_ns == 5 + 3 + 2


def test_rotation_counts_each_event_only_where_its_group_ran(loaded: readings_io.Loaded) -> None:
    aggs = aggregate(attribute(loaded.readings))
    m0 = aggs[("layer", "model.0")]
    assert m0.iterations == {
        "task-clock": 2, "page-faults": 2, "cycles": 2, "instructions": 2,
        "LLC-loads": 1, "LLC-load-misses": 1, "branch-misses": 1, "L1-dcache-load-misses": 1,
    }  # fmt: skip
    assert m0.self["cycles"] == pytest.approx((1500 + 1700) / 2)
    assert m0.self["LLC-load-misses"] == 10
    assert m0.self["branch-misses"] == 3
    assert aggs[("layer", "model.1.cv1")].running_min["cycles"] == pytest.approx(0.5)
    assert aggs[("layer", "model.1")].has_children and not m0.has_children


def test_closure_exact_without_multiplexing_and_flags_scaling(loaded: readings_io.Loaded) -> None:
    checks = closure(attribute(loaded.readings))
    tc = checks["task-clock"]
    assert (tc.layers, tc.gap, tc.forward) == (2 * (200 + 54 + 400), 2 * 20, 2 * 674)
    assert tc.ratio == pytest.approx(1.0)
    cycles = checks["cycles"]
    assert cycles.layers + cycles.gap == pytest.approx(3248 + 3448)
    assert cycles.forward == pytest.approx(2448 * 674 / 474 + 3448)
    assert cycles.ratio == pytest.approx(6696 / (2448 * 674 / 474 + 3448))
    assert (
        cycles.ratio is not None and cycles.ratio < 0.99
    )  # per-interval scaling differs from whole-span scaling: visible


def test_cpu_check_compares_the_same_windows(loaded: readings_io.Loaded) -> None:
    check = cpu_check(attribute(loaded.readings))
    assert check is not None
    assert check.event_ns == 2 * 674 and check.process_cpu_ns == 2 * 678
    assert check.iterations == 2


def test_tables_from_fixture(loaded: readings_io.Loaded) -> None:
    units = {name: info.unit for name, info in loaded.header.events.items()}
    analysis = analyse(loaded.readings, units, loaded.scales, line_size=64)
    t = analysis.tables
    m0 = t.layers["model.0"]
    assert m0["CPI"] == pytest.approx(1600 / 1000)
    assert m0["IPC"] == pytest.approx(1000 / 1600)
    assert m0["LLC MPKI"] == pytest.approx(10.0)
    assert m0["LLC miss ratio"] == pytest.approx(0.1)
    assert m0["branch MPKI"] == pytest.approx(3.0)
    assert m0["L1D MPKI"] == pytest.approx(50.0)
    assert m0["memory traffic (estimate)"] == 640
    assert t.methods["memory traffic (estimate)"].startswith("estimate:")
    assert "backend-stall share" not in m0  # stalled-cycles-backend was not measured
    assert t.layers["model.1.cv1"]["cycles.running"] == pytest.approx(0.5)
    assert "cycles.running" not in m0
    assert t.layers["model.1"]["task-clock.inclusive"] == 454
    assert t.stages["forward"]["gap.task-clock"] == 20
    assert t.stages["forward"]["task-clock"] == 674
    assert t.stages["iteration"]["task-clock"] == 696
    assert t.units["gap.task-clock"] == "ns" and t.units["CPI"] == "cycles/instruction"
    assert analysis.totals["task-clock"] == 2 * 696
    assert analysis.iterations == 2
    assert analysis.unmeasured == []


# --- derived metrics with missing inputs ---------------------------------------------------------


def test_derived_absent_without_inputs() -> None:
    assert derived_metrics({"task-clock": 5.0}) == []
    names = {d.name for d in derived_metrics({"cycles": 100.0})}
    assert names == set()
    only_misses = {d.name for d in derived_metrics({"LLC-load-misses": 7.0})}
    assert only_misses == {"memory traffic (estimate)"}


def test_derived_zero_denominator_is_absent_not_infinite() -> None:
    out = {d.name: d.value for d in derived_metrics({"cycles": 100.0, "instructions": 0.0})}
    assert "CPI" not in out and out["IPC"] == 0.0


def test_derived_llc_prefers_llc_events_then_generic() -> None:
    out = {d.name: d for d in derived_metrics({"instructions": 1e6, "cache-misses": 50.0, "cache-references": 500.0})}
    assert out["LLC MPKI"].value == pytest.approx(0.05)
    assert out["LLC MPKI"].method == "cache-misses per 1000 instructions"
    assert out["LLC miss ratio"].value == pytest.approx(0.1)
    stall = {d.name: d.value for d in derived_metrics({"cycles": 200.0, "stalled-cycles-backend": 50.0})}
    assert stall == {"backend-stall share": 0.25}


def test_derived_papi_names() -> None:
    out = {d.name: d.value for d in derived_metrics({"PAPI_TOT_CYC": 300.0, "PAPI_TOT_INS": 100.0, "PAPI_L1_DCM": 2.0})}
    assert out == {"CPI": 3.0, "IPC": pytest.approx(1 / 3), "L1D MPKI": 20.0}


def test_cpus_utilized_needs_wall_time() -> None:
    assert {d.name for d in derived_metrics({"task-clock": 10.0})} == set()
    out = {d.name: d.value for d in derived_metrics({"task-clock": 30.0}, wall_ns=20.0)}
    assert out == {"CPUs utilized": 1.5}


def test_interval_series_tracks() -> None:
    samples = [
        (0, {"task-clock": Count(0, 0, 0), "cycles": Count(0, 0, 0), "instructions": Count(0, 0, 0)}),
        (
            10_000_000,
            {
                "task-clock": Count(15_000_000, 10, 10),
                "cycles": Count(400, 10, 5),
                "instructions": Count(100, 10, 5),
            },
        ),
        (20_000_000, {"task-clock": Count(15_000_000, 20, 20)}),
    ]  # fmt: skip
    series = interval_series(samples)
    tracks = {(t, name): (value, unit) for t, name, value, unit in series}
    assert tracks[(0, "task-clock rate")] == (pytest.approx(1.5), "CPUs")
    assert tracks[(0, "cycles rate")] == (pytest.approx(800 * 1e9 / 1e7), "/s")
    assert tracks[(0, "CPI")] == (pytest.approx(4.0), "cycles/instruction")
    assert (10_000_000, "CPI") not in tracks  # no cycles in the second interval: absent
    assert tracks[(10_000_000, "task-clock rate")] == (0.0, "CPUs")
    energy = [
        (0, {"power/energy-pkg/": Count(0, 1, 1)}),
        (500_000_000, {"power/energy-pkg/": Count(8, 2, 2)}),
    ]
    assert interval_series(energy, {"power/energy-pkg/": 0.25}, units={"power/energy-pkg/": "Joules"}) == [
        (0, "power/energy-pkg/ rate", pytest.approx(4.0), "Joules/s")
    ]


# --- group planning and rotation -------------------------------------------------------------------


def _fits(limit: int) -> Callable[[list[str]], bool]:
    return lambda names: len(names) <= limit


def test_plan_all_in_one_group_when_they_fit() -> None:
    assert plan_groups(["a", "b", "c"], _fits(4)) == ([["a", "b", "c"]], [])


def test_plan_splits_with_anchors_in_every_group() -> None:
    events = ["cycles", "instructions", "a", "b", "c", "d", "e"]
    groups, bad = plan_groups(events, _fits(4), anchors=("cycles", "instructions"))
    assert groups == [
        ["cycles", "instructions", "a", "b"],
        ["cycles", "instructions", "c", "d"],
        ["cycles", "instructions", "e"],
    ]
    assert bad == []


def test_plan_without_anchors_and_unschedulable() -> None:
    groups, bad = plan_groups(["a", "b", "huge", "c"], lambda names: "huge" not in names and len(names) <= 2)
    assert groups == [["a", "b"], ["c"]]
    assert bad == ["huge"]


def test_rotation_and_coverage() -> None:
    schedule = rotation(3, range(7))
    assert schedule == {0: 0, 1: 1, 2: 2, 3: 0, 4: 1, 5: 2, 6: 0}
    assert coverage(schedule) == {0: [0, 3, 6], 1: [1, 4], 2: [2, 5]}
    assert rotation(0, range(3)) == {}


class FakeGroup:
    """An injected reader: counts ticks while enabled, like a group on a PMU with 4 counters."""

    log: ClassVar[list[tuple[str, tuple[str, ...]]]] = []

    def __init__(self, specs: list[EventSpec], disabled: bool) -> None:
        self.names = [s.name for s in specs]
        self.enabled = not disabled
        self.value = 0
        self.time = 0

    def tick(self) -> None:
        self.time += 10
        if self.enabled:
            self.value += 1

    def read_raw(self) -> bytes:
        return struct.pack("<2Q", self.value, self.time)

    def parse(self, raw: bytes) -> GroupReading:
        value, time = struct.unpack("<2Q", raw)
        return GroupReading(time, time if self.enabled else 0, tuple([value] * len(self.names)))

    def enable(self) -> None:
        self.enabled = True
        FakeGroup.log.append(("enable", tuple(self.names)))

    def disable(self) -> None:
        self.enabled = False
        FakeGroup.log.append(("disable", tuple(self.names)))

    def close(self) -> None:
        pass


def test_counter_set_rotates_groups_and_records_which_iterations() -> None:
    resolver = EventResolver(INTEL)
    specs = resolver.resolve_all(DEFAULT_EVENTS)

    def opener(group_specs: list[EventSpec], disabled: bool, exclude_kernel: bool, inherit: bool) -> FakeGroup:
        if len([s for s in group_specs if not s.software]) > 4:
            raise PerfOpenError(errno.EINVAL, "group")
        return FakeGroup(group_specs, disabled)

    def probe(spec: EventSpec, exclude_kernel: bool) -> int:
        return errno.ENOENT if spec.name == "ref-cycles" else 0

    counters = CounterSet.open(specs, range(5), paranoid=2, probe=probe, opener=opener)
    assert [u.event for u in counters.unavailable] == ["ref-cycles"]
    assert counters.unavailable[0].reason == NO_PMU_REASON
    assert counters.groups[0].always_on and {s.name for s in counters.groups[0].specs} == {
        "task-clock", "page-faults", "context-switches", "cpu-migrations"}  # fmt: skip
    rotating = counters.rotating
    assert len(rotating) == 6  # 13 hardware events, 2 anchors + 2 others per group of 4
    for index in rotating:
        assert [s.name for s in counters.groups[index].specs][:2] == ["cycles", "instructions"]
    for iteration in range(5):
        counters.begin_iteration(iteration)
        assert counters.active == (0, rotating[iteration % 6])
        for g in counters.groups:
            g.group.tick()  # type: ignore[attr-defined]
        counters.end_iteration()
    assert counters.measured == {0: 1, 1: 2, 2: 3, 3: 4, 4: 5}
    described = counters.describe()
    assert described[1].iterations == [0]
    assert described[6].iterations == [] and "never enabled" in (described[6].note or "")
    active, raws = counters.read_active()
    counts = counters.parse(active, raws)
    assert set(counts) == {"task-clock", "page-faults", "context-switches", "cpu-migrations"}


def test_counter_set_user_only_when_paranoid_denies_kernel() -> None:
    specs = [EventResolver(INTEL).resolve("task-clock")]

    def probe(spec: EventSpec, exclude_kernel: bool) -> int:
        return 0 if exclude_kernel else errno.EACCES

    seen: list[bool] = []

    def opener(group_specs: list[EventSpec], disabled: bool, exclude_kernel: bool, inherit: bool) -> FakeGroup:
        seen.append(exclude_kernel)
        return FakeGroup(group_specs, disabled)

    counters = CounterSet.open(specs, range(2), paranoid=2, probe=probe, opener=opener)
    assert counters.user_only and seen == [True] and not counters.unavailable


# --- errno table ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("err", "reason_part", "fix_part"),
    [
        (errno.ENOENT, "no PMU", "pmu=on"),
        (errno.EOPNOTSUPP, "no PMU", "bare metal"),
        (errno.EACCES, "perf_event_paranoid is 3", "sysctl -w kernel.perf_event_paranoid=1"),
        (errno.EPERM, "perf_event_paranoid is 3", "CAP_PERFMON"),
        (errno.EMFILE, "too many open files", "ulimit -n"),
        (errno.EBUSY, "held by another", "nmi_watchdog"),
        (errno.EINVAL, "rejected", "format"),
    ],
)
def test_errno_table(err: int, reason_part: str, fix_part: str) -> None:
    reason, fix = explain(err, paranoid=3)
    assert reason_part in reason and fix_part in fix


def test_errno_unknown_keeps_the_errno_name() -> None:
    u = unavailable("cycles", errno.ESRCH)
    assert u.errno == "ESRCH" and u.reason.startswith("ESRCH")


# --- event names and sysfs -------------------------------------------------------------------------


def test_parse_format_and_terms() -> None:
    assert parse_format("config:0-7,32-35\n") == [("config", 0, 7), ("config", 32, 35)]
    assert parse_format("config1:0-15") == [("config1", 0, 15)]
    assert parse_format("config:18") == [("config", 18, 18)]
    with pytest.raises(ValueError, match="unrecognised"):
        parse_format("bogus:1")
    assert parse_terms("event=0xcd,umask=0x1,ldlat=3,edge") == [
        ("event", "0xcd"), ("umask", "0x1"), ("ldlat", "3"), ("edge", None)]  # fmt: skip


def test_builtin_names() -> None:
    r = EventResolver(INTEL)
    assert (r.resolve("cpu-cycles").type, r.resolve("cpu-cycles").config) == (PERF_TYPE_HARDWARE, 0)
    assert r.resolve("cycles").name == "cycles"
    assert r.resolve("task-clock").type == PERF_TYPE_SOFTWARE and r.resolve("task-clock").display_unit == "ns"
    llc = r.resolve("LLC-load-misses")
    assert (llc.type, llc.config) == (PERF_TYPE_HW_CACHE, 2 | (0 << 8) | (1 << 16))
    dtlb = r.resolve("dTLB-load-misses")
    assert dtlb.config == 3 | (1 << 16)
    assert r.resolve("r01c4").config == 0x01C4


def test_intel_sysfs_events() -> None:
    r = EventResolver(INTEL)
    bus = r.resolve("cpu/bus-cycles/")
    assert (bus.type, bus.config, bus.source, bus.pmu) == (4, 0x013C, "sysfs", "cpu")
    raw = r.resolve("cpu/event=0x3c,umask=0x00/")
    assert raw.config == 0x3C
    cmask = r.resolve("cpu/event=0xa3,umask=0x14,cmask=20/")
    assert cmask.config == 0xA3 | (0x14 << 8) | (20 << 24)
    loads = r.resolve("cpu/mem-loads/")
    assert (loads.config, loads.config1) == (0x01CD, 3)
    named = r.resolve("cpu/event=0xc0,edge,name=my-instr/")
    assert named.name == "my-instr" and named.config == 0xC0 | (1 << 18)
    slots = r.resolve("cpu/topdown-total-slots/")
    assert slots.scale == 2.0
    energy = r.resolve("power/energy-pkg/")
    assert (energy.type, energy.config, energy.unit) == (13, 2, "Joules")
    assert energy.scale == pytest.approx(2.3283064365386962890625e-10)
    assert r.resolve("tsc").name == "msr/tsc/"  # a plain alias found in exactly one PMU


def test_amd_split_event_select() -> None:
    r = EventResolver(AMD)
    spec = r.resolve("cpu/event=0x1c0,umask=0x01/")
    assert spec.config == 0xC0 | (0x1 << 32) | (0x01 << 8)
    l3 = r.resolve("amd_l3/event=0x04,umask=0xff,threadmask=0xff,slicemask=0xf/")
    assert l3.config == 0x04 | (0xFF << 8) | (0xF << 48) | (0xFF << 56)
    with pytest.raises(UnknownEventError, match="does not fit in 12 bits"):
        r.resolve("cpu/event=0x1000/")


def test_unknown_names_list_what_the_host_has() -> None:
    r = EventResolver(INTEL)
    with pytest.raises(UnknownEventError) as exc:
        r.resolve_all(["cycles", "bogus", "cpu/nope/", "nopmu/event=1/"], opens=lambda s: s.software)
    text = str(exc.value)
    assert "unknown event 'bogus'" in text
    assert "unknown term 'nope' for PMU cpu" in text
    assert "unknown PMU 'nopmu'" in text
    assert "This host has: cpu-clock, task-clock" in text
    assert "cpu/mem-loads/" in text and "msr/tsc/" in text
    assert "L1-dcache-loads" not in text  # built-in names are filtered by what opens


def test_ambiguous_alias_is_an_error(tmp_path: Path) -> None:
    for pmu in ("a", "b"):
        (tmp_path / pmu / "events").mkdir(parents=True)
        (tmp_path / pmu / "type").write_text("20\n")
        (tmp_path / pmu / "events" / "x").write_text("config=1\n")
    with pytest.raises(UnknownEventError, match="ambiguous"):
        EventResolver(tmp_path).resolve("x")
    assert EventResolver(tmp_path).resolve("a/x/").config == 1


def test_duplicates_dropped() -> None:
    specs = EventResolver(INTEL).resolve_all(["cycles", "cpu-cycles", "task-clock"])
    assert [s.name for s in specs] == ["cycles", "task-clock"]


def test_readings_roundtrip(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with open(path, "w") as out:
        out.write(readings_io.header_line({"a": {"unit": "count", "scale": 2.0}}, [["a"]], inherit=True) + "\n")
        out.write(readings_io.marker_line(["stage", "B", "forward", 0, 5], 9, {0: (1, 1, [3])}) + "\n")
        out.write(readings_io.sample_line(7, {0: (2, 2, [4])}) + "\n")
        out.write('{"kind": "marker", "mar')  # torn last line
    loaded = readings_io.load(path)
    assert loaded.readings == [Reading("stage", "B", "forward", 0, 5, {"a": Count(3, 1, 1, 0)}, 9)]
    assert loaded.samples == [(7, {"a": Count(4, 2, 2, 0)})]
    assert loaded.scales == {"a": 2.0}


def test_never_scheduled_event_is_unmeasured_not_zero() -> None:
    readings = [
        Reading("stage", "B", "forward", 0, 0, {"cycles": Count(0, 0, 0, 1), "task-clock": Count(0, 0, 0)}),
        Reading("stage", "E", "forward", 0, 10, {"cycles": Count(0, 10, 0, 1), "task-clock": Count(10, 10, 10)}),
    ]
    analysis = analyse(readings, {"cycles": "count", "task-clock": "ns"})
    assert analysis.unmeasured == ["cycles"]
    assert "cycles" not in analysis.tables.stages["forward"]
    assert analysis.tables.stages["forward"]["task-clock"] == 10
    assert analysis.running == {"cycles": 0.0, "task-clock": 1.0}
