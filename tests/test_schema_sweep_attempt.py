"""A sweep point's attempts on a Ray cluster as the schema's SweepAttempt (hwprof.schema.sweep_attempt): an
attempt as sweep.json keeps it round-trips key for key, the table's note reads its fields, and a damaged field
gives one line naming sweep.json and the field."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from hwprof.render.fmt import clock
from hwprof.render.sweep.attempts import attempt_text
from hwprof.rundir.reader import RunDirError
from hwprof.schema.sweep_attempt import SweepAttempt

ATTEMPT: dict[str, Any] = {
    "node_id": "1c4f331c9e8a",
    "host": "vm",
    "start": 1763919616.5,
    "end": 1763919625.0,
    "outcome": "lost",
}


def test_attempt_round_trips_byte_for_byte() -> None:
    attempt = SweepAttempt.from_json(ATTEMPT, "sweep.json")
    assert json.dumps(attempt.to_json(), indent=1) == json.dumps(ATTEMPT, indent=1)
    assert attempt.unknown_keys() == []


def test_attempt_text_reads_the_fields() -> None:
    start, end = clock(ATTEMPT["start"]), clock(ATTEMPT["end"])
    assert attempt_text(ATTEMPT) == f"node 1c4f331c (vm) {start}-{end} lost"
    running = {"node_id": "", "host": "", "start": ATTEMPT["start"], "end": None, "outcome": "running"}
    assert attempt_text(running) == f"node  (unknown host) {start}-... running"


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({**ATTEMPT, "start": "soon"}, 'field "attempts.start" must be a number, found a string'),
        ({"node_id": "n", "end": 1.0}, 'field "attempts.start" is missing'),
    ],
)
def test_a_damaged_attempt_names_the_field(doc: dict[str, object], expected: str) -> None:
    with pytest.raises(RunDirError, match=re.escape(f"sweep.json: {expected}")):
        attempt_text(doc)
