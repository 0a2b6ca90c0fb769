"""What hwprof and a service's agent say to each other on the agent's socket: one JSON object per line.

hwprof -> agent: {"op": "hello"} (the attach's session: the agent answers with the service's facts and a token, and
is busy until that connection closes); {"op": "pass", "token", "run_dir", "pass", "names", "seconds"} (one pass's
window, from the pass's relay: hwprof.agent.relay); {"op": "stop", "why"} (end the window at the call in flight).
agent -> hwprof: {"facts": {...}, "token"}; {"out": text} and {"err": text} (the pass's stdout and stderr, as a
worker's: its progress lines, its log); {"exit": status}; {"refused": one line}.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

MAX_LINE = 1 << 20
"""A line longer than this is not hwprof's: the connection is closed."""


class Channel:
    """One connection, its lines sent whole from any thread."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._send_lock = threading.Lock()
        self.closed = False

    def send(self, **message: Any) -> bool:
        """False where the other end is gone (nothing raised: a service's call may be the sender)."""
        data = (json.dumps(message) + "\n").encode()
        with self._send_lock:
            if self.closed:
                return False
            try:
                self.sock.sendall(data)
            except OSError:
                self.closed = True
                return False
        return True

    def messages(self) -> Iterator[dict[str, Any]]:
        """The other end's messages until it closes (or sends what is not hwprof's)."""
        buffer = b""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                try:
                    message = json.loads(line)
                except ValueError:
                    return
                if isinstance(message, dict):
                    yield message
            if len(buffer) > MAX_LINE:
                return

    def close(self) -> None:
        with self._send_lock:
            self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


class ChannelStream:
    """A text stream whose writes go over the channel as {key: text} (a pass's stdout or stderr)."""

    def __init__(self, channel: Channel, key: str) -> None:
        self.channel = channel
        self.key = key

    def write(self, text: str) -> int:
        if text:
            self.channel.send(**{self.key: text})
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError("a channel has no descriptor")
