"""A program's model called from a worker thread, or in a child process (issue 58).

From a worker thread: it is measured, and hwprof's stop after the measured calls ends the whole program (the main
thread too, woken where it waits), with no traceback of hwprof's stop printed as the thread's failure; calls from
a thread other than the measured calls' pass through unmarked and are counted by thread. In a child process
(os.fork, multiprocessing's fork and spawn): not measured, but the run says which child called which module, how
often and where it was started, never "the program called no torch module".
"""

from __future__ import annotations

import queue
import re
import signal
import statistics
import subprocess
import threading
import time
from pathlib import Path

import pytest
from driver_hooks import ScheduleHooks
from program_runs import SHORT, collect, error_lines, program, run_doc

from hwprof.core.main_thread import WAKE_SIGNAL, MainThread
from hwprof.core.markers import MarkerBus
from hwprof.program.child_watch import ChildModule, ChildRecord, children_text, read_children, watch_child
from hwprof.program.driver import ProgramDriver, ProgramStop
from hwprof.program.thread_stop import MainThreadStop

ONE_PASS = ["--only", "timing", *SHORT]


class _Stop(BaseException):
    pass


@pytest.mark.parametrize("waits", ["join", "queue"])
def test_an_end_raised_in_a_worker_thread_is_raised_in_the_waiting_main_thread(waits: str) -> None:
    stop = MainThreadStop(ends=(_Stop,))
    stop.install()
    results: queue.Queue[int] = queue.Queue()
    seen: list[str] = []

    def work() -> None:
        try:
            raise _Stop("stopped after 4 measured calls")
        except _Stop as exc:
            stop.end_elsewhere(exc)
            raise

    worker = threading.Thread(target=work, name="inference")
    try:
        with pytest.raises(_Stop, match="stopped after 4 measured calls"):
            worker.start()
            if waits == "join":
                worker.join()
                time.sleep(5)  # the main thread goes on: the stop reaches it here
            else:
                results.get(timeout=30)  # no result ever comes: the stop wakes the main thread
            seen.append("went on")
    finally:
        stop.close()
        worker.join()
    assert not seen
    assert stop.stopped_threads == ["inference"]


def test_a_program_that_took_the_wake_signal_gets_the_end_at_its_next_bytecode() -> None:
    stop = MainThreadStop(ends=(_Stop,))
    stop.install()
    theirs: list[int] = []
    signal.signal(WAKE_SIGNAL, lambda signum, frame: theirs.append(signum))  # the program's own handler
    worker = threading.Thread(target=lambda: stop.end_elsewhere(_Stop("stopped")), name="inference")
    try:
        with pytest.raises(_Stop, match="stopped"):
            worker.start()
            end = time.monotonic() + 30
            while time.monotonic() < end:  # busy in Python: the asynchronous exception lands here
                pass
    finally:
        stop.close()
        worker.join()
    assert theirs == []  # the program's handler was not called by hwprof
    assert signal.getsignal(WAKE_SIGNAL) is signal.SIG_DFL  # close() put back what was there before install()


def test_the_end_raised_in_the_main_thread_is_not_raised_twice() -> None:
    stop = MainThreadStop(ends=(_Stop,))
    stop.install()
    try:
        stop.end_elsewhere(_Stop("here"))  # the main thread raises it itself
        time.sleep(0.05)
    finally:
        stop.close()
    assert stop.stopped_threads == []


def test_calls_from_another_thread_than_the_measured_calls_pass_through_counted() -> None:
    import torch

    from hwprof.program.finder import Found

    model = torch.nn.Conv2d(3, 3, 1)
    driver = ProgramDriver(MarkerBus(), ScheduleHooks([(True, i) for i in range(3)]), warmup=1)
    x = torch.ones(1, 3, 4, 4)
    driver.adopt(Found(model, "model", "named", model, "children", False, root_calls_before=1), (x,))
    model(x)  # the main thread's: marked
    other = threading.Thread(target=lambda: [model(x) for _ in range(2)], name="side")
    other.start()
    other.join()
    with pytest.raises(ProgramStop):
        for _ in range(5):
            model(x)
    assert driver.calls.other_threads == {"side": 2}
    assert driver.calls.measured == 3 and driver.calls.thread is None


def test_a_childs_record_names_the_child_how_it_started_and_what_it_called(tmp_path: Path) -> None:
    record = ChildRecord(pid=41, how="fork", at="serve.py:12")
    record.modules["model (DetectionModel)"] = ChildModule("model (DetectionModel)", 20, 200.0, {"1x3x64x64": 20})
    record.modules["Conv"] = ChildModule("Conv", 30, 0.5, part_of="model (DetectionModel)")  # a probe of a part
    spawned = ChildRecord(pid=42, how="spawn", at="serve.py:30", process="worker-1: __mp_main__.serve")
    text = children_text([record, spawned, ChildRecord(pid=43, how="fork", at=None)])
    assert text == (
        "child pid 41 (os.fork at serve.py:12) called model (DetectionModel) 20 times (10 ms per call at 1x3x64x64 x20)"
    )
    assert children_text([]) is None
    watch = watch_child(tmp_path / "children", "spawn", "serve.py:30")
    watch.record.modules["m (Conv2d)"] = ChildModule("m (Conv2d)", 3, 3.0)
    watch.write()
    (tmp_path / "children" / "9.json").write_text("{damaged")
    (back,) = read_children(tmp_path / "children")
    assert back.how == "spawn" and back.modules["m (Conv2d)"].calls == 3


@pytest.mark.slow
def test_a_model_called_from_a_worker_thread_is_measured_and_the_stop_ends_the_whole_program(tmp_path: Path) -> None:
    out, after = tmp_path / "thread", tmp_path / "after.txt"
    done = collect(out, ONE_PASS, [program("model_thread"), "--after", str(after)])
    assert done.returncode == 0, done.stdout + done.stderr
    found = run_doc(out)["passes"]["timing"]["program"]
    assert found["ended"] == "stopped after the measured calls", found
    assert found["model_thread"] == "inference" and found["stopped_threads"] == ["inference"], found
    assert found["measured_calls"] == 3, found
    assert not after.exists()  # the main thread was stopped too: it did not go on after its join()
    log = (out / "passes" / "timing" / "worker.log").read_text()
    assert "Exception in thread" not in log and "ProgramStop" not in log, log
    script_ms = [float(ms) for ms in re.findall(r"^call \d+: ([\d.]+) ms$", log, re.M)]
    forward = run_doc(out)["collectors"]["timing"]["summary"]["stages"]["forward"]
    assert forward["p50_ms"] > 0.5 * statistics.median(script_ms[1:]), (forward, script_ms)


CHILDREN = {"fork": "os.fork at ", "mp-fork": "multiprocessing fork at ", "mp-spawn": "multiprocessing spawn at "}
"""model_in_child.py --how: how each child is started, and how the run names that start."""


@pytest.fixture(scope="module")
def children(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """One collect of model_in_child.py starting a child each way in turn (os.fork, then multiprocessing's fork and
    spawn), each calling the model 6 times: one line names the three (a collect per child cost 2.5 CPU-s more
    each)."""
    out = tmp_path_factory.mktemp("children") / "run"
    return collect(out, ONE_PASS, [program("model_in_child"), "--how", ",".join(CHILDREN), "--calls", "6"])


@pytest.mark.slow
@pytest.mark.parametrize("how", list(CHILDREN))
def test_a_model_called_in_a_child_process_is_named_with_the_child(
    children: subprocess.CompletedProcess[str], how: str
) -> None:
    done = children
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = error_lines(done.stderr)
    assert "called no torch module" not in line, line
    assert "the program's own process called no model, its children did: child pid " in line, line
    assert "hwprof measures the model in the process it runs" in line, line
    said = line.split("its children did: ", 1)[1].split("; ")
    started = CHILDREN[how]
    (child,) = [part for part in said if f"({started}" in part]  # this child's own part of the line
    assert child.startswith("child pid "), child
    assert started + str(Path(program("model_in_child"))) in child or started in child, child
    calls = 6 if how == "fork" else 7  # a child that builds the model: + its constructor's stride probe
    assert f"model (DetectionModel) {calls} times" in child, child
    if how != "fork":
        assert "process inference: " in child and ".child" in child, child


@pytest.mark.slow
def test_a_model_named_and_called_in_a_forked_child_is_said_as_no_measured_call(tmp_path: Path) -> None:
    """--program-model model, which the parent's own code binds (and its fuse() calls once) before it forks: the
    parent's pass measured nothing, and said only "no measured iteration completed", exit 1, with run.json
    `complete`."""
    out = tmp_path / "fork"
    options = [*ONE_PASS, "--program-model", "model"]
    done = collect(out, options, [program("model_in_child"), "--how", "fork", "--calls", "6"])
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = error_lines(done.stderr)
    assert "called no torch module" not in line, line
    assert "the program's own process made no measured call of model (DetectionModel) at " in line, line
    assert run_doc(out)["status"] == "failed"
    assert "os.fork at " + str(Path(program("model_in_child"))) in line or "os.fork at " in line, line
    assert "model (DetectionModel) 6 times" in line, line
    assert "hwprof measures the model in the process it runs" in line, line


def test_a_call_from_a_worker_thread_runs_in_the_main_thread_while_it_waits_in_join() -> None:
    """What only the main thread may do (Scalene's start sets signal handlers) is run there, waking it."""
    main = MainThread()
    main.install()
    ran_in: list[str] = []
    errors: list[BaseException] = []

    def set_a_handler() -> str:
        signal.signal(signal.SIGURG, signal.SIG_DFL)  # raises ValueError outside the main thread
        ran_in.append(threading.current_thread().name)
        return "done"

    def worker() -> None:
        try:
            assert main.call(set_a_handler) == "done"
            main.call(lambda: 1 / 0)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=worker, name="inference")
    try:
        thread.start()
        thread.join()
    finally:
        main.close()
    assert ran_in == ["MainThread"]
    assert len(errors) == 1 and isinstance(errors[0], ZeroDivisionError)  # its exception, given back


def test_no_call_is_lost_to_a_wake_signal_that_comes_before_the_wait_blocks() -> None:
    """The signal can arrive between the main thread's release of the GIL and its blocking in join(): lost for
    that wait unless sent again (before the resend, 4 of 300 rounds waited out CALL_WAIT_S beside two busy loops)."""
    names: list[str] = []
    for _ in range(300):
        main = MainThread()
        main.install()

        def worker(main: MainThread = main) -> None:
            for _ in range(5):
                names.append(main.call(lambda: threading.current_thread().name))

        thread = threading.Thread(target=worker, name="inference")
        try:
            thread.start()
            thread.join(timeout=60)
        finally:
            main.close()
    assert names == ["MainThread"] * 1500
