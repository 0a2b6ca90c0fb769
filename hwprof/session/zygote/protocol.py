"""The collect's and its zygote's messages: one JSON object a packet on their SOCK_SEQPACKET pair, a spawn request
carrying the worker's stdin, stdout and stderr (SCM_RIGHTS)."""

from __future__ import annotations

import json
import socket
from typing import Any

MESSAGE_BYTES = 1 << 20
"""The most one message may hold."""


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.send(data)
