"""A stop signal at any moment of a command, its start-up included, ends it with one line and 128 + the signal
(issue 38): never a KeyboardInterrupt traceback, never death by the signal once hwprof's code runs.

The command is signalled at several delays after a point where hwprof's entry is surely running: the process
has mapped psutil's extension, which `hwprof.cli.main`'s imports load (hwprof.cli.entry installs its handlers
before them). Before that lies the interpreter's own start-up, which no Python code covers; a loop from the
start (0 to 1 s) checks that nothing after it prints a traceback through hwprof's code.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fault_harness import hwprof_command

pytestmark = pytest.mark.fault

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_small"
SIGNALS = {
    "SIGINT": signal.SIGINT,
    "SIGTERM": signal.SIGTERM,
    "SIGQUIT": signal.SIGQUIT,  # its default action dumped core (exit -3)
    "SIGABRT": signal.SIGABRT,  # sent from outside: a stop as SIGTERM is
}
LOADED_BY_CLI_MAIN = "_psutil_linux"
"""A shared object the command line's imports map (psutil, through hwprof.session.stopping), entry's do not."""


def _starters() -> dict[str, list[str]]:
    script = Path(sys.executable).parent / "hwprof"
    found = {"python -m hwprof": hwprof_command()}
    if script.exists():
        found["console script"] = [str(script)]
    return found


def _mapped(pid: int, name: str) -> bool:
    try:
        return name in Path(f"/proc/{pid}/maps").read_text()
    except (OSError, ProcessLookupError):
        return False


def _signalled(command: list[str], sig: int, delay_s: float, after_entry: bool) -> tuple[int, str]:
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if after_entry:
        end = time.monotonic() + 60
        while not _mapped(proc.pid, LOADED_BY_CLI_MAIN) and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.001)
    time.sleep(delay_s)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=120)
    return proc.returncode, out


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    run = tmp_path / "run"
    if not run.exists():
        shutil.copytree(FIXTURE, run)
    return {"report": ["report", str(run)], "trace": ["trace", str(run)]}


@pytest.mark.parametrize(("command", "starter"), [("report", "console script"), ("trace", "python -m hwprof")])
@pytest.mark.parametrize("sig_name", list(SIGNALS))
def test_a_signal_while_hwprof_starts_ends_it_with_one_line(
    tmp_path: Path, starter: str, command: str, sig_name: str
) -> None:
    sig = SIGNALS[sig_name]
    args = _commands(tmp_path)[command]
    if starter not in _starters():
        pytest.skip(f"no {starter} beside {sys.executable}")
    for delay in (0.0, 0.05, 0.3):
        code, out = _signalled([*_starters()[starter], *args], sig, delay, after_entry=True)
        assert "Traceback" not in out, (delay, out)
        assert code in (128 + sig, 0), (delay, code, out)
        if code != 0:
            lines = [line for line in out.splitlines() if line.startswith("interrupted")]
            assert lines == [lines[-1]] and f"interrupted ({sig_name})" in lines[0], (delay, out)


ENTRY_FRAMES = ("/hwprof/__init__.py", "/hwprof/stage_api.py")
"""The files of hwprof that run before hwprof/__main__.py can catch anything: the package's own init, and the one
module it imports (hwprof.stage, the public stage API; a fresh clone's suite caught a SIGINT inside its
`class stage:` at 30 ms)."""


def _interpreter_start_up(code: int, out: str, sig: int) -> bool:
    """The signal came while the interpreter itself started, before hwprof's entry ran: it dies of the signal
    with nothing printed, or its `site` import (CPython's "Fatal Python error: init_import_site") or runpy's
    search for the package shows a KeyboardInterrupt whose frames are outside hwprof (but its package init)."""
    if code == -sig and not out.strip():
        return True
    frames = [line for line in out.splitlines() if line.strip().startswith("File ") and "/hwprof/" in line]
    return "KeyboardInterrupt" in out and all(any(f in line for f in ENTRY_FRAMES) for line in frames)


EARLY_S = (0.0, 0.01, 0.03, 0.06, 0.1)
"""Delays from the start that land in the interpreter's start-up, hwprof's package init and its entry (tens of ms
on a quiet host, where a SIGINT was once caught at 30 ms): each command gets every signal at each."""
LATE_S = (0.2, 0.35, 0.5, 0.75, 1.0)
"""Delays that land in hwprof's imports and the command itself, where one handler takes every signal (and where the
fast test above signals each command with each signal): one signal at each, in turn, each command starting the
turn one signal further on. Every signal at every delay (80 starts, each running up to its delay) took 24 s."""


def _delays_and_signals(turn: int) -> list[tuple[float, int]]:
    """A command's starts: every signal at each early delay, one signal at each late delay (from signal `turn` on)."""
    signals = list(SIGNALS.values())
    late = [(delay, signals[(turn + k) % len(signals)]) for k, delay in enumerate(LATE_S)]
    return [(delay, sig) for delay in EARLY_S for sig in signals] + late


@pytest.mark.slow
def test_a_signal_at_any_delay_from_the_start_never_shows_a_traceback_through_hwprof(tmp_path: Path) -> None:
    for turn, (command, args) in enumerate(_commands(tmp_path).items()):
        for delay, sig in _delays_and_signals(turn):
            code, out = _signalled([*hwprof_command(), *args], sig, delay, after_entry=False)
            if _interpreter_start_up(code, out, sig):
                continue
            assert "Traceback" not in out, (command, delay, out)
            assert code in (128 + sig, 0), (command, delay, code, out)


def test_a_stop_that_lands_where_python_ignores_exceptions_is_delivered_again(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A signal handled inside a __del__ (or importlib's module-lock weakref callback, as in a command's lazy
    import) raised an Interrupted that Python printed as "Exception ignored ... Traceback" and then dropped."""
    from hwprof.session.stopping import Interrupted, StopSignals

    class SignalledWhileCollected:
        def __del__(self) -> None:
            signal.raise_signal(signal.SIGINT)  # the handler runs here, inside __del__

    stop = StopSignals().install()
    try:
        with pytest.raises(Interrupted):
            SignalledWhileCollected()
            for _ in range(200):
                time.sleep(0.001)
    finally:
        stop.uninstall()
    assert stop.count == 1 and stop.name == "SIGINT"
    assert "Exception ignored" not in capsys.readouterr().err


def test_a_signal_while_collect_writes_its_first_run_json_still_finalises_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The signal is held while the first run.json is written (StopSignals.deferred) and raised after it: it
    escaped the session there, leaving run.json "running" while the CLI said "run.json is final"."""
    import json

    from hwprof.core.config import RunConfig
    from hwprof.session.collection import Session
    from hwprof.session.plan import Plan
    from hwprof.session.stopping import StopSignals
    from hwprof.workload.images import ImageSet

    stop = StopSignals().install()
    session = Session(RunConfig(), tmp_path, ImageSet([]), stop=stop)
    write_inputs = session._write_inputs

    def signalled() -> None:
        write_inputs()
        signal.raise_signal(signal.SIGINT)  # noted now, raised when the first run.json is written

    monkeypatch.setattr(session, "_write_inputs", signalled)
    try:
        doc = session.collect(Plan([]), ["hwprof", "collect"])
    finally:
        stop.uninstall()
    written = json.loads((tmp_path / "run.json").read_text())
    assert doc.status == written["status"] == "interrupted"
    assert written["finished"] and written["interrupted"]["signal"] == "SIGINT"


def test_an_error_a_library_raised_for_the_stop_is_the_stop(monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """matplotlib's C++ turns the stop's KeyboardInterrupt, raised inside it, into ValueError("Invalid bounding
    box") (seen once in 40 stops of `hwprof report` near its end): with a stop requested, that error is the
    stop's (128 + the signal, "interrupted"), not a bad input (exit 2, "hwprof: error")."""
    from hwprof.cli import main as cli

    def report(args, console):  # type: ignore[no-untyped-def]
        try:
            signal.raise_signal(signal.SIGINT)  # the stop's handler raises here, inside the "library"
        except KeyboardInterrupt:
            raise ValueError("Invalid bounding box") from None
        return 0

    monkeypatch.setitem(cli.COMMANDS, "report", report)
    assert cli.main(["report", str(FIXTURE)]) == 128 + signal.SIGINT
    out = capsys.readouterr().err
    assert "interrupted (SIGINT)" in out and "error" not in out


def test_a_stopped_command_exits_without_the_interpreters_finalisation(tmp_path: Path) -> None:
    """A command that a stop ended exits with its status and its output, and no destructor, thread or atexit
    acts after it (the interpreter's finalisation, where a stopped `hwprof report` once aborted: exit -6)."""
    script = (
        "import atexit, sys\n"
        "import hwprof.cli.main as cli\n"
        "from hwprof.cli import entry\n"
        "atexit.register(lambda: print('finalised', flush=True))\n"
        "cli.main = lambda argv=None: (print('stopped', end=''), 130)[1]\n"
        "sys.exit(entry.main())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (130, "stopped"), done.stderr
    plain = script.replace("130)[1]", "0)[1]")
    done = subprocess.run([sys.executable, "-c", plain], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "stoppedfinalised\n"), done.stderr


def test_a_delivery_again_still_pending_when_the_command_ends_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The swallowed stop's delivery again (a timer thread) fired after the command was done, in the interpreter's
    finalisation (a stopped `hwprof report` printed a traceback from enum and aborted, exit -6, in a fresh clone's
    run): uninstall() cancels it."""
    from hwprof.session import stopping
    from hwprof.session.stopping import StopSignals

    monkeypatch.setattr(stopping, "REDELIVER_S", 0.3)

    class SignalledWhileCollected:
        def __del__(self) -> None:
            signal.raise_signal(signal.SIGINT)

    stop = StopSignals().install()
    SignalledWhileCollected()  # swallowed inside __del__: a delivery again is due in 0.3 s
    stop.uninstall()  # the command is done before it
    time.sleep(0.6)  # an interrupt_main now would raise KeyboardInterrupt here (the default handler is back)
    assert stop.requested and stop.name == "SIGINT"


def test_the_entry_handles_every_stop_signal_the_commands_do() -> None:
    """hwprof.cli.entry covers the start-up for exactly the signals StopSignals handles afterwards, and each has its
    exit status in the table."""
    from hwprof.cli import entry
    from hwprof.cli.exit_codes import EXIT_CODES
    from hwprof.session.stopping import SIGNALS as STOP_SIGNALS

    assert entry._SIGNALS == STOP_SIGNALS
    assert {128 + int(sig) for sig in STOP_SIGNALS} <= {row.code for row in EXIT_CODES}


@pytest.mark.slow
def test_two_signals_while_a_finished_pass_is_read_keep_the_pass_in_run_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both signals come after the pass's worker exited, while the collect reads its results (a forked worker
    exits within hundredths of a second of the first signal): the second one's Interrupted waits until the pass
    is recorded. It had lost the pass from run.json (`passes: {}`, the pass said not run, its files all there)."""
    import json

    from hwprof.core.config import RunConfig
    from hwprof.session import pass_process
    from hwprof.session.collection import Session
    from hwprof.session.plan import plan_passes
    from hwprof.session.stopping import StopSignals
    from hwprof.workload.images import discover

    config = RunConfig(model="yolov8n", imgsz=64, iters=2, warmup=1, threads=1, only=["timing"])
    stop = StopSignals().install()
    session = Session(config, tmp_path, discover(None), stop=stop)
    read = pass_process.worker_results

    def signalled(worker: Any) -> Any:
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)  # escalates: raised once the pass is recorded
        return read(worker)

    monkeypatch.setattr(pass_process, "worker_results", signalled)
    try:
        with contextlib.suppress(KeyboardInterrupt):  # whether it raises after run.json is final is not this test's
            session.collect(plan_passes(config), ["hwprof", "collect"])
    finally:
        stop.uninstall()
    written = json.loads((tmp_path / "run.json").read_text())
    assert written["status"] == "interrupted" and written["interrupted"]["signals_received"] == 2
    assert written["passes"]["timing"]["status"] in ("ok", "interrupted"), written["passes"]
    assert written["interrupted"]["passes_not_run"] == []


def test_an_interrupt_wrapped_by_a_class_being_made_is_still_an_interrupt() -> None:
    """Python 3.11 wraps a KeyboardInterrupt raised in __set_name__ (a dataclass made while the command imports it)
    in RuntimeError: a signal at 0.35 s into `hwprof report` printed that traceback (a fresh clone's suite)."""
    from hwprof.cli.main import wraps_interrupt

    class Interrupted:
        def __set_name__(self, owner: type, name: str) -> None:
            raise KeyboardInterrupt

    with pytest.raises(BaseException) as caught:  # RuntimeError on 3.11, the KeyboardInterrupt itself on 3.12+

        class Made:
            field = Interrupted()

    assert isinstance(caught.value, KeyboardInterrupt) or wraps_interrupt(caught.value)
    assert not wraps_interrupt(RuntimeError("a real error"))


def test_the_command_line_says_such_an_interrupt_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hwprof.cli import main as cli

    def interrupted_while_importing(args: object, console: object) -> int:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance") from exc

    monkeypatch.setitem(cli.COMMANDS, "runs", interrupted_while_importing)
    assert cli.main(["runs"]) == 130
    err = capsys.readouterr().err
    assert "interrupted (SIGINT)" in err and "Traceback" not in err


def test_a_stop_delivered_again_as_the_command_ends_is_noted_not_raised() -> None:
    """A signal Python had swallowed comes again from StopSignals' timer; landing as the command ended, at
    uninstall()'s entry, it raised past every handler (a traceback from `hwprof trace` signalled at 0.3 s on a
    fresh clone). The caller's `finally` says the command is ending by an attribute store (no signal handler
    runs there) before it calls uninstall(): the delivery is noted, not raised."""
    from hwprof.session.stopping import StopSignals

    before = signal.getsignal(signal.SIGTERM)
    stop = StopSignals().install()
    stop._redeliver = True  # an Interrupted swallowed, and delivered again from the timer
    stop.ending = True
    stop._handle(signal.SIGABRT, None)  # no Interrupted raised
    stop.uninstall()
    assert signal.getsignal(signal.SIGTERM) == before, "uninstalled"
    fresh = StopSignals().install()
    fresh.ending = True
    fresh._handle(signal.SIGINT, None)
    fresh.uninstall()
    assert fresh.requested and fresh.exit_code == 130, "a new signal while ending: noted, its status kept"
