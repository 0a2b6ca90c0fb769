"""hwprof's agent for a running service: `import hwprof.agent; hwprof.agent.start()` in the service's code (or
`HWPROF_AGENT=1` in its environment, hwprof.agent.autostart), then `hwprof attach PID` from a shell of the same user.

Importing this package imports nothing heavy; start() starts one sleeping thread (hwprof.agent.server)."""

from __future__ import annotations

from pathlib import Path


def start() -> Path:
    """Start this process's agent (once); returns the socket it listens on."""
    from hwprof.agent.server import start as start_agent

    return start_agent()


def stop() -> None:
    """Stop this process's agent."""
    from hwprof.agent.server import stop as stop_agent

    stop_agent()


__all__ = ["start", "stop"]
