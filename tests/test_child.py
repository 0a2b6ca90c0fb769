"""A pass ends when its worker exits, even when a process it forked still holds its stdout (issue 17),
and what the worker left in its session is stopped and named in run.json."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from hwprof.collectors.base import Capability, Collector, PassContext

from hwprof.analysis.run_status import lingering_lines
from hwprof.core.config import RunConfig
from hwprof.core.procs import live
from hwprof.schema.check import SCHEMA_VERSION
from hwprof.schema.run import RunDoc
from hwprof.session import child
from hwprof.session.collection import Session
from hwprof.session.plan import PassPlan
from hwprof.session.worker_io import ProgressEvent
from hwprof.workload.images import ImageSet

FORKING_WORKER = textwrap.dedent(
    """
    import ctypes, os, platform, signal, sys, threading, time
    SYS_EXIT = {"x86_64": 60, "aarch64": 93}[platform.machine()]  # ends the calling thread only
    pids = []
    for stubborn in (False, True):
        pid = os.fork()
        if pid == 0:  # a copy of the worker: it keeps stdout (the pass's pipe) open
            if not stubborn:
                time.sleep(600)
                os._exit(0)
            # as seen under Scalene: in a process group of its own (killpg misses it), SIGTERM blocked,
            # its main thread gone (state Zl) and one thread in a futex wait
            os.setpgid(0, 0)
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            threading.Thread(target=threading.Event().wait).start()
            ctypes.CDLL(None, use_errno=True).syscall(SYS_EXIT, 0)
        pids.append(pid)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the stubborn copy is set up (its main thread gone) before we go on
        with open(f"/proc/{pids[1]}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.01)
    with open("forked.json", "w") as f:
        f.write(str(pids))
    os.makedirs("passes/timing", exist_ok=True)  # a worker that ends well writes its result (else its pass fails)
    with open("passes/timing/result.json", "w") as f:
        f.write('{"pass": "timing", "status": "ok"}')
    print('{"phase": "measure", "done": 1, "total": 1}', flush=True)
    time.sleep(float(sys.argv[1]))
    """
)
"""The fake worker: forks two children that hold stdout, then sleeps argv[1] seconds and exits 0."""


class ForkingWorker(Collector):
    """A collector whose pass runs FORKING_WORKER instead of hwprof's worker."""

    name = "forking_worker"
    title = "test: a worker that leaves forked children behind"
    pass_name = "timing"
    worker_sleep_s = 0.0

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        return Capability.ok()

    def wrap_command(self, command: list[str], ctx: PassContext) -> list[str]:
        return [sys.executable, "-c", FORKING_WORKER, str(self.worker_sleep_s)]


def _run_pass(tmp_path: Path, timeout_s: float, worker_sleep_s: float) -> tuple[Session, list[int]]:
    events: list[ProgressEvent] = []
    session = Session(
        RunConfig(pass_timeout_s=timeout_s), tmp_path, ImageSet([]), lambda _pass, event: events.append(event)
    )
    session.run = RunDoc()
    collector = type("Worker", (ForkingWorker,), {"worker_sleep_s": worker_sleep_s})
    session.run_pass(PassPlan("timing", [collector]))
    assert events == [ProgressEvent(phase="measure", done=1, total=1)]
    return session, json.loads((tmp_path / "forked.json").read_text())


def _gone(pids: list[int]) -> bool:
    return not any(live(pid) for pid in pids)


def test_a_pass_ends_when_its_worker_exits_and_its_forked_children_are_stopped(tmp_path: Path) -> None:
    """Before the fix the session read the pipe until EOF: this pass ran into its 60 s time-out."""
    session, forked = _run_pass(tmp_path, timeout_s=60, worker_sleep_s=0)
    outcome = session.outcomes[0]
    assert outcome.status == "ok", outcome.error
    assert outcome.returncode == 0
    assert [x.pid for x in outcome.lingering] == sorted(forked)
    by_pid = {x.pid: x for x in outcome.lingering}
    assert by_pid[forked[0]].stopped_by == "SIGTERM"
    assert by_pid[forked[1]].stopped_by == "SIGKILL"
    assert by_pid[forked[1]].state == "Zl"
    for x in outcome.lingering:
        assert x.cmdline[:2] == [sys.executable, "-c"] and x.name.startswith("python")
        assert 0 < x.lingered_s < outcome.wall_s
    assert _gone(forked)
    session._record(outcome)
    run = json.loads((tmp_path / "run.json").read_text())
    recorded = run["passes"]["timing"]["lingering"]
    assert [(x["pid"], x["stopped_by"]) for x in recorded] == [(p, by_pid[p].stopped_by) for p in sorted(forked)]
    warnings = lingering_lines(RunDoc.read({"schema_version": SCHEMA_VERSION, "status": "ok", **run}, "run.json"))
    assert len(warnings) == 2 and f"pid {forked[1]}, state Zl" in warnings[1] and "stopped by SIGKILL" in warnings[1]


def test_a_timed_out_pass_also_stops_what_its_worker_left_in_other_process_groups(tmp_path: Path) -> None:
    session, forked = _run_pass(tmp_path, timeout_s=3, worker_sleep_s=600)
    outcome = session.outcomes[0]
    assert outcome.status == "timeout"
    assert "ran past its 3 s time-out" in outcome.error
    # the one in the worker's process group goes with the worker's killpg (the sweep may still see it alive
    # for an instant, dying of that SIGTERM: then it is listed as having exited); the other one is stopped here
    by_pid = {x.pid: x.stopped_by for x in outcome.lingering}
    assert by_pid.pop(forked[1]) == "SIGKILL"
    assert by_pid in ({}, {forked[0]: "exited"})
    assert _gone(forked)


def test_a_worker_that_closes_its_stdout_and_runs_on_still_times_out() -> None:
    """EOF on the pipe is not the worker's exit: before, the session then waited on the worker with no limit."""
    script = "import os, time; print('{}', flush=True); os.close(1); time.sleep(600)"
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert child.follow(proc, 2.0, lambda line, at: None) is None
    finally:
        child.stop(proc, grace_s=5)
    assert proc.wait(timeout=5) == -signal.SIGTERM
