"""A pass of `hwprof attach`, as the session sees it: `python -m hwprof.agent.relay RUN_DIR PASS C1,C2`.

It stands where a pass's worker stands (hwprof.session.worker): the session launches it, reads its progress lines
on stdout and its log on stderr (worker.log), signals it to stop and reads its exit status, while the pass itself
runs in the attached service (hwprof.agent.window) and writes its files into the run directory there. A stop
signal (the collect's SIGINT, TERM, HUP) asks the window to end at the call in flight; a second one, or the
relay's own death, closes the connection, which ends the window in the service too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path
from types import FrameType

from hwprof.agent.channel import Channel
from hwprof.agent.client import AttachError, connect
from hwprof.rundir.worker_files import read_config, write_worker_pid
from hwprof.session.pass_runner import ERROR_PREFIX, EXIT_ERROR, EXIT_INTERRUPTED
from hwprof.session.worker_stop import STOP_SIGNALS

TOKEN_ENV = "HWPROF_ATTACH_TOKEN"
"""The attach's token (its session's, from the agent's hello), given to each relay by the attaching hwprof."""
SECONDS_KEY = "attach_seconds"
"""RunConfig.extra's --seconds of `hwprof attach`: each window's measured calls end this long after the first."""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m hwprof.agent.relay RUN_DIR PASS COLLECTOR[,COLLECTOR...]", file=sys.stderr)
        return 2
    run_dir, pass_name, names = Path(args[0]), args[1], [n for n in args[2].split(",") if n]
    config = read_config(run_dir)
    pid = config.attached
    if pid is None:
        print(ERROR_PREFIX + f"{run_dir} is not an attached run", file=sys.stderr)
        return EXIT_ERROR
    with contextlib.suppress(OSError):
        write_worker_pid(run_dir / pass_name, os.getpid())
    try:
        channel = connect(pid)
    except AttachError as exc:
        print(ERROR_PREFIX + str(exc), file=sys.stderr, flush=True)
        return EXIT_ERROR
    stops = _Stops(channel)
    for sig in STOP_SIGNALS:
        signal.signal(sig, stops.handle)
    seconds = config.extra.get(SECONDS_KEY)
    channel.send(
        op="pass",
        token=os.environ.get(TOKEN_ENV, ""),
        run_dir=str(run_dir),
        names=names,
        seconds=seconds,
        **{"pass": pass_name},
    )
    return relay(channel, pid, stops)


def relay(channel: Channel, pid: int, stops: _Stops) -> int:
    """The window's output copied to this process's stdout and stderr until its exit status comes."""
    for message in channel.messages():
        if "out" in message:
            sys.stdout.write(str(message["out"]))
            sys.stdout.flush()
        elif "err" in message:
            sys.stderr.write(str(message["err"]))
            sys.stderr.flush()
        elif "exit" in message:
            return int(message["exit"])
        elif "refused" in message:
            print(ERROR_PREFIX + f"PID {pid}'s agent refused: {message['refused']}", file=sys.stderr, flush=True)
            return EXIT_ERROR
    if stops.signal:
        return EXIT_INTERRUPTED
    print(ERROR_PREFIX + f"PID {pid}'s agent closed the connection mid-pass (did the service exit?)", file=sys.stderr)
    return EXIT_ERROR


class _Stops:
    """The first stop signal asks the window to end; a second closes the connection."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.signal = ""

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.signal:
            self.channel.close()
            return
        self.signal = name
        self.channel.send(op="stop", why=f"stopped by {name}")


if __name__ == "__main__":
    sys.exit(main())
