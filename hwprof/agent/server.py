"""The agent in a service: a daemon thread listening on its Unix socket (hwprof.agent.paths), idle until attached.

Until `hwprof attach` connects it costs the service nothing but that sleeping thread: no hook, no import of
torch or of hwprof's measuring code. A connection is accepted from the service's own user or root alone (the
peer's uid read from the socket, SO_PEERCRED), and one attach at a time: the attach's session is its `hello`
connection, and another `hello` while it is open is refused. The attach's passes come on connections of their own
(their relays, hwprof.agent.relay), each naming the session's token; each runs its window in that connection's
thread (hwprof.agent.window). When either connection closes (hwprof killed), the window in flight ends and its
hooks come off.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import struct
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hwprof.agent.channel import Channel, ChannelStream
from hwprof.agent.paths import own_agent_dir, socket_path

if TYPE_CHECKING:
    from hwprof.agent.window import WindowEnd

EXIT_REFUSED = 3


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (Linux's SO_PEERCRED: pid, uid, gid)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


class Agent:
    """The listening thread and the attach it serves (at most one)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.listener: socket.socket | None = None
        self.token: str | None = None
        """The attach session's token while one is open (None: no attach is)."""
        self._lock = threading.Lock()
        self._window: WindowEnd | None = None
        """The window in flight, ended when the session's connection closes."""

    def start(self) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a stale socket of an earlier process with this PID
        old = os.umask(0o177)
        try:
            listener.bind(str(self.path))
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        listener.listen(4)
        self.listener = listener
        threading.Thread(target=self._accept, name="hwprof-agent", daemon=True).start()

    def close(self) -> None:
        if self.listener is not None:
            with contextlib.suppress(OSError):  # close() alone leaves the thread in accept() on Linux: shut it down
                self.listener.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self.listener.close()
            self.listener = None
        with contextlib.suppress(OSError):
            self.path.unlink()

    def _accept(self) -> None:
        while self.listener is not None:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="hwprof-agent-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        channel = Channel(conn)
        try:
            uid = peer_uid(conn)
            if uid not in (os.getuid(), 0):
                channel.send(refused=f"uid {uid} may not attach to this service (only uid {os.getuid()} or root)")
                return
            messages = channel.messages()
            first = next(messages, None)
            if first is None:
                return
            if first.get("op") == "hello":
                self._session(channel, messages)
            elif first.get("op") == "pass":
                self._pass(channel, messages, first)
            else:
                channel.send(refused=f"unknown request {first.get('op')!r}")
        except Exception as exc:  # the agent never takes the service down
            channel.send(refused=f"the agent failed: {type(exc).__name__}: {exc}")
        finally:
            channel.close()

    def _session(self, channel: Channel, messages: Iterator[dict[str, Any]]) -> None:
        with self._lock:
            if self.token is not None:
                channel.send(refused="another hwprof attach is measuring this service; wait for it to end")
                return
            self.token = secrets.token_hex(16)
        try:
            channel.send(facts=service_facts(), token=self.token)
            for _ in messages:  # nothing more is asked here: the session lasts as long as the connection
                pass
        finally:
            with self._lock:
                self.token = None
                if self._window is not None:
                    self._window.request("hwprof's attach ended (its connection closed)")

    def _pass(self, channel: Channel, messages: Iterator[dict[str, Any]], request: dict[str, Any]) -> None:
        from hwprof.agent.window import WindowEnd

        end = WindowEnd()
        with self._lock:
            if self.token is None or request.get("token") != self.token:
                channel.send(refused="a pass's window needs the open attach's token (run `hwprof attach PID`)")
                return
            if self._window is not None:
                channel.send(refused="a window is already open in this service")
                return
            self._window = end

        def follow() -> None:  # the relay's stop, or its end (hwprof killed): the window ends
            for message in messages:
                if message.get("op") == "stop":
                    end.request(str(message.get("why") or "stopped by hwprof"))
            end.request("hwprof's pass ended (its connection closed)")

        threading.Thread(target=follow, name="hwprof-agent-follow", daemon=True).start()
        try:
            status = run_window(channel, request, end)
        finally:
            with self._lock:
                self._window = None
        channel.send(exit=status)


def run_window(channel: Channel, request: dict[str, Any], end: WindowEnd) -> int:
    """One pass's window, its stdout and stderr sent over `channel`; the pass's exit status, as a worker's."""
    from hwprof.agent.routed import routed_output
    from hwprof.agent.window import WindowRunner

    seconds = request.get("seconds")
    with routed_output(ChannelStream(channel, "out"), ChannelStream(channel, "err")):
        try:
            runner = WindowRunner(
                Path(str(request["run_dir"])),
                str(request["pass"]),
                [str(n) for n in request.get("names") or []],
                end,
                float(seconds) if seconds is not None else None,
            )
            return runner.run()
        except Exception as exc:
            print(f"hwprof-error: the window could not start: {type(exc).__name__}: {exc}", file=sys.stderr)
            return EXIT_REFUSED


def service_facts() -> dict[str, Any]:
    """What hwprof records of the service: its command, folder, interpreter and torch's threads (where imported)."""
    torch = sys.modules.get("torch")
    return {
        "pid": os.getpid(),
        "argv": list(sys.argv),
        "orig_argv": list(getattr(sys, "orig_argv", sys.argv)),
        "cwd": os.getcwd(),
        "executable": sys.executable,
        "python": sys.version.split()[0],
        "torch_threads": torch.get_num_threads() if torch is not None else None,
        "torch": getattr(torch, "__version__", None) if torch is not None else None,
    }


_AGENT: list[Agent] = []


def start() -> Path:
    """Start this process's agent (once); the socket it listens on."""
    if _AGENT:
        return _AGENT[0].path
    own_agent_dir()
    agent = Agent(socket_path(os.getpid(), os.getuid()))
    agent.start()
    _AGENT.append(agent)
    import atexit

    atexit.register(agent.close)
    return agent.path


def stop() -> None:
    """Stop listening (the socket removed)."""
    if _AGENT:
        _AGENT.pop().close()
