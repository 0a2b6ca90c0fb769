"""hwprof's side of the agent's socket: the service found by its PID, and each reason it cannot be reached said in
one line with its fix."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from hwprof.agent.channel import Channel
from hwprof.agent.paths import socket_path

OPT_IN = (
    "start it with HWPROF_AGENT=1 in its environment, or call hwprof.agent.start() in its code (or sample it from "
    "outside, whole-process: hwprof attach PID --no-agent)"
)
CONNECT_TIMEOUT_S = 10.0


class AttachError(ValueError):
    """The service cannot be attached to; the message is one line."""


def process_words(pid: int) -> list[str]:
    """The process's command line, word by word ([] where it cannot be read)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def process_line(pid: int) -> str:
    """The process's command line, as `ps` shows it ("" where it cannot be read)."""
    return " ".join(process_words(pid))


def check_process(pid: int) -> int:
    """The service's uid; AttachError where `pid` is not a running Python process."""
    proc = Path(f"/proc/{pid}")
    try:
        uid = proc.stat().st_uid
    except FileNotFoundError:
        raise AttachError(f"no process has PID {pid}") from None
    line = process_line(pid)
    try:
        exe = os.readlink(proc / "exe")
    except OSError:
        exe = line.split(" ", 1)[0]
    if "python" not in Path(exe).name and "python" not in Path(line.split(" ", 1)[0]).name:
        shown = line[:80] or exe or "?"
        raise AttachError(f"PID {pid} ({shown}) is not a Python process: hwprof attach measures a Python service")
    return uid


def connect(pid: int) -> Channel:
    """A connection to the agent of `pid`; AttachError (one line) where there is none to reach."""
    uid = check_process(pid)
    path = socket_path(pid, uid)
    other_user = AttachError(f"the agent of PID {pid} belongs to uid {uid}: attach as that user (or root)")
    try:
        path.stat()
    except PermissionError:
        raise other_user from None
    except FileNotFoundError:
        raise AttachError(f"PID {pid} ({process_line(pid)[:80]}) did not opt in to hwprof's agent: {OPT_IN}") from None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT_S)
    try:
        sock.connect(str(path))
    except PermissionError:
        sock.close()
        raise other_user from None
    except (ConnectionRefusedError, FileNotFoundError):
        sock.close()
        raise AttachError(f"PID {pid}'s agent is not listening ({path} is left from an earlier run)") from None
    sock.settimeout(None)
    return Channel(sock)


def first_reply(channel: Channel, pid: int) -> dict[str, Any]:
    """The agent's answer to the first request; AttachError where it refused or closed."""
    reply = next(channel.messages(), None)
    if reply is None:
        raise AttachError(f"PID {pid}'s agent closed the connection without answering")
    if "refused" in reply:
        raise AttachError(f"PID {pid}'s agent refused: {reply['refused']}")
    return reply


def outside_facts(pid: int) -> dict[str, Any]:
    """What /proc says of a Python process that has no agent to ask: its arguments (after the interpreter) and its
    folder; AttachError where it is not one, or not readable."""
    check_process(pid)
    words = process_words(pid)
    if not words:
        raise AttachError(f"PID {pid}'s command line cannot be read (/proc/{pid}/cmdline)")
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except PermissionError:
        raise AttachError(f"PID {pid} is another user's process: sample it as that user (or root)") from None
    except OSError as exc:
        raise AttachError(f"PID {pid} cannot be read ({exc.strerror})") from None
    return {"argv": words[1:] or words, "cwd": cwd}
