"""A collector's probe details as the schema's records (hwprof.schema.probes): `hwprof doctor` lists the parts
a collector that works in part cannot run from its typed "unavailable" map, the details round-trip key for
key, run.json's details read back as the collector's own record, and a damaged field gives one line naming
the field. A collector's result goes to result.json and run.json as a typed entry, and back."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hwprof.collectors.base import Capability, Collector, CollectorResult
from hwprof.collectors.perf_sampling.access import probe_details

from hwprof.cli.doctor import unavailable_parts
from hwprof.core.config import RunConfig
from hwprof.rundir.reader import RunDirError
from hwprof.schema.probes import PROBE_TYPES, PerfEventsProbe, PerfSamplingProbe, ProbeDetails, UnavailablePart
from hwprof.schema.run import CollectorEntry
from hwprof.schema.summaries_cpu import Summary, TimingSummary
from hwprof.session import plan

DETAILS = {
    "binary": "/usr/bin/perf",
    "events": ["task-clock"],
    "unavailable": {
        "cycles": {"reason": "no PMU", "fix": "run on bare metal"},
        "instructions": {"reason": "no PMU", "fix": "run on bare metal"},
        "kernel-space samples": {"reason": "perf_event_paranoid=2 without root", "fix": "sudo sysctl"},
    },
}

PERF_EVENTS = {
    "status": "unavailable",
    "reason": "no event opens: no PMU",
    "fix": "run on bare metal",
    "pass": "layers",
    "details": {
        "events": [],
        "unavailable": {"cycles": {"errno": "ENOENT", "reason": "no PMU", "fix": "run on bare metal"}},
    },
}


def test_probe_details_round_trip_byte_for_byte() -> None:
    details = ProbeDetails.from_json(DETAILS, "probe")
    assert json.dumps(details.to_json(), indent=1) == json.dumps(DETAILS, indent=1)
    assert details.unavailable is not None and details.unavailable["cycles"].fix == "run on bare metal"
    assert details.part("cycles") == details.unavailable["cycles"] and details.part("cache-misses") is None


def test_doctor_groups_the_unavailable_parts_by_reason_and_fix() -> None:
    assert unavailable_parts(ProbeDetails.from_json(DETAILS, "probe")) == [
        (["cycles", "instructions"], "no PMU", "run on bare metal"),
        (["kernel-space samples"], "perf_event_paranoid=2 without root", "sudo sysctl"),
    ]
    assert unavailable_parts(PerfSamplingProbe.of(binary="/usr/bin/perf")) == []


def test_a_damaged_probe_detail_names_the_field() -> None:
    damaged = {"unavailable": {"cycles": {"reason": 3}}}
    with pytest.raises(RunDirError, match=re.escape('probe: field "unavailable.cycles.reason" must be a string')):
        ProbeDetails.from_json(damaged, "probe")
    with pytest.raises(RunDirError, match=re.escape('run.json: field "collectors.papi.details.failed" must be')):
        CollectorEntry.read("papi", {"status": "unavailable", "details": {"failed": ["PAPI_TOT_CYC"]}}, "run.json")


def test_run_json_details_read_back_as_the_collectors_record() -> None:
    entry = CollectorEntry.read("perf_events", PERF_EVENTS, "run.json")
    assert isinstance(entry.details, PerfEventsProbe) and entry.details.events == []
    part = entry.details.part("cycles")
    assert part is not None and (part.errno, part.reason) == ("ENOENT", "no PMU")
    assert entry.to_json() == PERF_EVENTS and entry.unknown_keys() == []
    other = CollectorEntry.read("cuda_graph", {"status": "unavailable", "details": {}}, "run.json")
    assert type(other.details) is ProbeDetails and other.to_json() == {"status": "unavailable", "details": {}}
    assert all(name == kind.NAME for name, kind in PROBE_TYPES.items())


def test_an_unavailable_collector_s_details_go_to_run_json_key_for_key(monkeypatch: pytest.MonkeyPatch) -> None:
    details = PerfEventsProbe.of(
        events=[],
        unavailable={"cycles": UnavailablePart.of(errno="ENOENT", reason="no PMU", fix="run on bare metal")},
    )

    class Refused(Collector):
        name = "perf_events"
        pass_name = "layers"

        @classmethod
        def probe(cls, config: RunConfig) -> Capability:
            return Capability.unavailable("no event opens: no PMU", "run on bare metal", details=details)

    class Bare(Collector):
        name = "cuda_graph"
        pass_name = "gpu"

        @classmethod
        def probe(cls, config: RunConfig) -> Capability:
            return Capability.unavailable("the run is on the CPU (--device cpu)", "hwprof collect --device cuda")

    monkeypatch.setattr(plan, "all_collectors", lambda: [Refused, Bare])
    statuses = plan.plan_passes(RunConfig()).statuses
    assert statuses["perf_events"].to_json() == PERF_EVENTS
    assert statuses["cuda_graph"].to_json() == {
        "status": "unavailable",
        "reason": "the run is on the CPU (--device cpu)",
        "fix": "hwprof collect --device cuda",
        "pass": "gpu",
        "details": {},
    }


def test_perf_sampling_reads_its_probe_facts_typed() -> None:
    found = PerfSamplingProbe.of(binary="/usr/bin/perf", version="perf version 6.1", pmu=False, user_only=True)
    found.update(unavailable={"CPI": UnavailablePart.of(reason="no PMU", fix="bare metal")})
    assert probe_details(Capability.ok(details=found)) is found
    assert list(found.to_json()) == ["binary", "version", "pmu", "user_only", "unavailable"]
    assert probe_details(Capability.unavailable("perf not found (PATH)")) == PerfSamplingProbe()


def test_a_collector_result_is_written_and_read_back_as_a_typed_entry() -> None:
    empty: dict[str, Any] = {"status": "ok", "reason": "", "fix": "", "summary": {}, "artifacts": []}
    assert CollectorResult("ok").to_dict() == empty
    assert CollectorResult("ok").entry(pass_name="timing").to_json() == {**empty, "pass": "timing"}
    stage = {"n": 2, "mean_ms": 12.5, "stdev_ms": 0.1, "p50_ms": 12.5, "p90_ms": 12.6, "p99_ms": 12.6}
    summary = {"stages": {"forward": stage}, "fps": 80.0}
    doc = {**empty, "summary": summary, "artifacts": ["passes/timing/t.json"]}
    result = CollectorResult.of_entry(CollectorEntry.read("timing", doc, "result.json"))
    assert isinstance(result.summary, TimingSummary) and result.artifacts == ["passes/timing/t.json"]
    assert result.to_dict() == doc
    bare = CollectorResult.of_entry(CollectorEntry.of(status="failed"))
    assert type(bare.summary) is Summary and bare.to_dict() == {**empty, "status": "failed"}


def test_a_gpu_collector_on_a_cpu_run_is_skipped_not_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 68: every CPU run's report listed cuda_graph, gpu_kineto and nvml under "not measured", as if this host
    lacked something; they are GPU collectors, skipped on a CPU run (and run on a GPU one)."""
    from hwprof.session import plan

    class Gpu(Collector):
        name = "gpu_thing"
        pass_name = "gpu"
        needs_cuda = True

        @classmethod
        def probe(cls, config: RunConfig) -> Capability:
            return Capability.ok()

    monkeypatch.setattr(plan, "all_collectors", lambda: [Gpu])
    cpu = plan.plan_passes(RunConfig()).statuses["gpu_thing"]
    assert (cpu.status, cpu.reason) == ("skipped", plan.GPU_ONLY)
    gpu = plan.plan_passes(RunConfig(device="cuda"))
    assert "gpu_thing" not in gpu.statuses and [p.name for p in gpu.passes] == ["gpu"]
