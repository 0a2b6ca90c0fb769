"""hwprof.session.turn: a pass's worker launched beside the previous pass's close, held before its warm-up until
its turn; dropped where its turn does not come. Scripted workers stand in for hwprof's (each says what a worker
says and notes, on CLOCK_MONOTONIC, when it built, got its turn and exited); a real collect's passes are checked in
test_cli's complete run directory."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from hwprof.collectors.base import Capability, Collector, PassContext

from hwprof.core.config import RunConfig
from hwprof.core.procs import live
from hwprof.schema.run import RunDoc
from hwprof.session.collection import Session
from hwprof.session.plan import PassPlan, Plan
from hwprof.session.turn import TURN_ENV, TurnError, wait_turn
from hwprof.session.worker_io import ProgressEvent
from hwprof.workload.images import ImageSet

WORKER = r"""
import json, os, sys, time
from pathlib import Path
notes, close_s, name = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
def say(phase, done=0, total=1):
    print(json.dumps({"phase": phase, "done": done, "total": total}), flush=True)
note = {"pid": os.getpid(), "launched": time.monotonic_ns()}
say("build")
time.sleep(0.2)
note["built"] = time.monotonic_ns()
turn = os.environ.get("HWPROF_TURN")
if turn:
    say("waiting")
    while not os.path.exists(turn):
        time.sleep(0.005)
    os.unlink(turn)
note["through"] = time.monotonic_ns()
say("warmup", 0, 3)
say("measure", 1, 3)
say("measure", 3, 3)
say("closing", 3, 3)
time.sleep(close_s)
note["exited"] = time.monotonic_ns()
result = {"pass": name, "status": "ok", "finished_ns": note["exited"], "collectors": {}}
Path("passes", name, "result.json").write_text(json.dumps(result))
notes.write_text(json.dumps(note))
"""


class Scripted(Collector):
    """A collector whose pass runs WORKER instead of hwprof's worker, closing in `close_s`."""

    name = "scripted"
    title = "test: a scripted worker"
    pass_name = "timing"
    close_s = 0.0
    notes = ""

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        return Capability.ok()

    def wrap_command(self, command: list[str], ctx: PassContext) -> list[str]:
        return [sys.executable, "-c", WORKER, self.notes, str(self.close_s), ctx.pass_name]


def _plan(tmp_path: Path, close_s: float, heavy: str = "") -> Plan:
    """Three passes of a scripted worker; `heavy`: the one whose collector's close holds the most memory."""
    passes = []
    for name in ("one", "two", "three"):
        fields = {"close_s": close_s, "notes": str(tmp_path / f"{name}.json"), "heavy_close": name == heavy}
        passes.append(PassPlan(name, [type(name, (Scripted,), fields)]))
    return Plan(passes)


def _session(run_dir: Path, events: list[tuple[str, ProgressEvent]], early_launch: bool = True) -> Session:
    run_dir.mkdir(parents=True)
    config = RunConfig(extra={"early_launch": early_launch})
    session = Session(config, run_dir, ImageSet([]), lambda name, event: events.append((name, event)))
    session.run = RunDoc.of(status="running", passes={})
    return session


def test_each_pass_builds_beside_the_previous_ones_close_and_warms_up_after_its_end(tmp_path: Path) -> None:
    """Launched when the previous worker says its measuring ended, each worker built while that one closed (1.5 s)
    and got its turn only after that one had exited and been read: never a warm-up beside another pass."""
    run_dir = tmp_path / "run"
    session = _session(run_dir, [])
    session._run_passes(_plan(tmp_path, close_s=1.5))  # a close well past a loaded host's start and build
    notes = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in ("one", "two", "three")}
    for before, after in (("one", "two"), ("two", "three")):
        assert notes[after]["launched"] < notes[before]["exited"], "launched beside the previous pass's close"
        assert notes[after]["built"] < notes[before]["exited"]
        assert notes[after]["through"] > notes[before]["exited"], "its warm-up only after the previous pass ended"
    outcomes = {o.name: o for o in session.outcomes}
    assert "wait_s" not in outcomes["one"].phases  # the first pass waits for nothing
    for name in ("two", "three"):
        phases = outcomes[name].phases
        # the close's 1.5 s, less its start and build
        assert phases["wait_s"] > 0.5 and phases["build_s"] >= 0.15, phases
        # its wall counts from its turn: its start, build and wait lay beside the previous pass
        before_turn = phases["start_s"] + phases["build_s"] + phases["wait_s"]
        assert abs(outcomes[name].wall_s - (sum(phases.values()) - before_turn)) < 0.05, (outcomes[name], phases)
        assert not (run_dir / "passes" / name / "turn").exists()
    assert [o.status for o in session.outcomes] == ["ok"] * 3


def test_with_early_launch_off_each_pass_starts_at_its_turn(tmp_path: Path) -> None:
    session = _session(tmp_path / "run", [], early_launch=False)
    session._run_passes(_plan(tmp_path, close_s=0.3))
    one, two = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "two"))
    assert two["launched"] > one["exited"] and "wait_s" not in session.outcomes[1].phases


def test_no_worker_is_built_beside_a_close_that_holds_the_most_memory(tmp_path: Path) -> None:
    """Collector.heavy_close (torch.profiler's trace converted in the trace pass's close, 1.1 GB at yolov7 640):
    the pass after it is launched at its turn, the others beside their predecessor's close."""
    session = _session(tmp_path / "run", [])
    session._run_passes(_plan(tmp_path, close_s=0.5, heavy="two"))
    one, two, three = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "two", "three"))
    assert two["launched"] < one["exited"] and three["launched"] > two["exited"]
    assert "wait_s" in session.outcomes[1].phases and "wait_s" not in session.outcomes[2].phases


def test_a_pass_whose_turn_does_not_come_is_dropped_with_its_folder(tmp_path: Path) -> None:
    """A stop while the first pass closes: the second pass's worker, launched and held until its turn, is killed and
    its folder removed, as if never launched (a stop skips the passes after the one it ended)."""
    run_dir = tmp_path / "run"
    events: list[tuple[str, ProgressEvent]] = []
    session = _session(run_dir, events)

    def on_event(name: str, event: ProgressEvent) -> None:
        events.append((name, event))
        if name == "one" and event.phase == "closing":  # the second pass was launched at this very line
            session.stop.note(signal.SIGUSR1)

    session.progress = on_event
    plan = _plan(tmp_path, close_s=1.0)
    session._run_passes(plan)
    assert [o.name for o in session.outcomes] == ["one"]
    assert not (run_dir / "passes" / "two").exists() and not (tmp_path / "two.json").exists()
    # the dropped worker is gone: no live process runs the scripted worker for pass two
    two_notes = str(tmp_path / "two.json")
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        assert two_notes not in cmdline or not live(pid), (pid, cmdline)


def test_a_worker_launched_at_its_turn_goes_on_and_one_launched_early_waits_for_it(tmp_path: Path) -> None:
    assert wait_turn(1.0) is None
    turn = tmp_path / "turn"
    said: list[str] = []
    os.environ[TURN_ENV] = str(turn)
    try:
        threading.Timer(0.2, turn.write_text, ("",)).start()
        waited = wait_turn(5.0, lambda: said.append("waiting"))
    finally:
        os.environ.pop(TURN_ENV, None)
    assert waited is not None and 0.15 < waited < 4.0 and said == ["waiting"] and not turn.exists()
    assert TURN_ENV not in os.environ  # its children never see it


def test_a_turn_that_never_comes_ends_the_worker_with_one_line(tmp_path: Path) -> None:
    os.environ[TURN_ENV] = str(tmp_path / "turn")
    started = time.monotonic()
    with pytest.raises(TurnError, match="did not end within"):
        wait_turn(0.2)
    assert time.monotonic() - started < 5.0
