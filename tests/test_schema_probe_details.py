"""A collector's probe details as the schema's ProbeDetails (hwprof.schema.run): `hwprof doctor` lists the parts
a collector that works in part cannot run from its typed "unavailable" map, the details round-trip key for
key, and a damaged field gives one line naming the field."""

from __future__ import annotations

import json
import re

import pytest

from hwprof.cli.main import _unavailable_parts
from hwprof.rundir.reader import RunDirError
from hwprof.schema.run import ProbeDetails

DETAILS = {
    "binary": "/usr/bin/perf",
    "events": ["task-clock"],
    "unavailable": {
        "cycles": {"reason": "no PMU", "fix": "run on bare metal"},
        "instructions": {"reason": "no PMU", "fix": "run on bare metal"},
        "kernel-space samples": {"reason": "perf_event_paranoid=2 without root", "fix": "sudo sysctl"},
    },
}


def test_probe_details_round_trip_byte_for_byte() -> None:
    details = ProbeDetails.from_json(DETAILS, "probe")
    assert json.dumps(details.to_json(), indent=1) == json.dumps(DETAILS, indent=1)
    assert details.unavailable is not None and details.unavailable["cycles"].fix == "run on bare metal"


def test_doctor_groups_the_unavailable_parts_by_reason_and_fix() -> None:
    assert _unavailable_parts(DETAILS) == [
        (["cycles", "instructions"], "no PMU", "run on bare metal"),
        (["kernel-space samples"], "perf_event_paranoid=2 without root", "sudo sysctl"),
    ]
    assert _unavailable_parts({"binary": "/usr/bin/perf"}) == []


def test_a_damaged_probe_detail_names_the_field() -> None:
    damaged = {"unavailable": {"cycles": {"reason": 3}}}
    with pytest.raises(RunDirError, match=re.escape('probe: field "unavailable.cycles.reason" must be a string')):
        ProbeDetails.from_json(damaged, "probe")
