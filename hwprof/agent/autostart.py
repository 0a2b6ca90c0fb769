"""`HWPROF_AGENT=1 python server.py`: the agent started as the interpreter starts.

hwprof's install puts a start-up hook into site-packages (hwprof-agent.pth, written by setup.py's build step) that
imports this module when HWPROF_AGENT is set to anything but "" or "0", and does nothing else otherwise. An agent
that cannot start says so in one line on stderr; the service starts all the same."""

from __future__ import annotations

import os
import sys

ENV = "HWPROF_AGENT"


def wanted() -> bool:
    return os.environ.get(ENV, "") not in ("", "0")


def autostart() -> None:
    if not wanted():
        return
    from hwprof.agent import start

    try:
        start()
    except Exception as exc:  # the service must start whatever happens to its agent
        print(f"hwprof agent: not started ({type(exc).__name__}: {exc})", file=sys.stderr)


autostart()
