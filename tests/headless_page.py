"""Headless Chromium for the browser tests: a page opened with the DevTools protocol, and what the page itself did.

Chromium makes requests of its own whatever the page (the time, accounts, spelling dictionaries, its component
updater; which ones depends on the build), so a log of every URL the browser asked for cannot say whether a page
is self-contained. `open_page` drives Chromium over `--remote-debugging-pipe` (the protocol on fds 3 and 4, one
JSON message per NUL-terminated chunk; nothing to install, no port) and records the Network domain of the page's
own target, and of every target it starts (frames in other processes, workers), attached before they run. The
browser's own calls belong to no target, so they are not seen at all: ignored by construction, not by a list
of hosts. Background networking and component updates are switched off all the same, and every host name
resolves to nothing, so no request leaves the machine either way.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium")
NEEDS_CHROMIUM = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)"
)
QUIET_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # a request to any host would fail, never leave the machine
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--metrics-recording-only",
)
"""Every headless start's flags: nothing in the background, no first-run work, no name resolved."""


def chromium(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """The chromium command line with the quiet flags and console messages on stderr (`--dump-dom`, `--screenshot`)."""
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory(prefix="hwprof-chromium-") as profile:
        cmd = [CHROMIUM, *QUIET_FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


@dataclass
class PageVisit:
    """What one page load did: its DOM after load, the URLs its targets requested, what it said or threw."""

    url: str
    dom: str = ""
    requests: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    """console.* calls, uncaught exceptions and the browser's error entries about the page (a failed load)."""

    def foreign_requests(self) -> list[str]:
        """Requests other than the page's own document. data: URLs are inline bytes, no request: not counted."""
        asked = dict.fromkeys(self.requests)  # one URL once: a failed request is also in the browser's log
        return [u for u in asked if u != self.url and not u.startswith("data:")]


class _Pipe:
    """The DevTools protocol over Chromium's debugging pipe: numbered commands, events kept in arrival order."""

    def __init__(self, proc: subprocess.Popen[bytes], to_browser: int, from_browser: int) -> None:
        self.proc, self.to_browser, self.from_browser = proc, to_browser, from_browser
        self.buffer = b""
        self.next_id = 0

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> int:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        return self.next_id

    def read(self, deadline: float) -> dict[str, Any] | None:
        """The next message, or None when the deadline passes first."""
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_browser], [], [], left)[0]:
                return None
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError(f"chromium closed its debugging pipe (exit status {self.proc.poll()})")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message


def _fds_3_and_4(to_child: int, from_child: int) -> None:
    """In the child, before exec: the pipe's ends as fds 3 (Chromium reads) and 4 (Chromium writes)."""
    read_end, write_end = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child, from_child))
    os.dup2(read_end, 3)  # dup2's copies are inheritable; every other fd of ours is not (PEP 446)
    os.dup2(write_end, 4)
    os.close(read_end)
    os.close(write_end)


def open_page(url: str, settle_s: float = 1.0, timeout: float = 120) -> PageVisit:
    """Load `url` in a fresh headless Chromium and record what the page did until load and `settle_s` of quiet."""
    assert CHROMIUM is not None
    visit = PageVisit(url)
    to_child, to_browser = os.pipe()
    from_browser, from_child = os.pipe()
    with tempfile.TemporaryDirectory(prefix="hwprof-chromium-") as profile:
        cmd = [CHROMIUM, *QUIET_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,  # the pipe's fds 3 and 4 (made in preexec_fn) stay open; pass_fds would close them
            preexec_fn=lambda: _fds_3_and_4(to_child, from_child),
        )
        os.close(to_child)
        os.close(from_child)
        try:
            _drive(_Pipe(proc, to_browser, from_browser), visit, settle_s, time.monotonic() + timeout)
        finally:
            os.close(to_browser)
            os.close(from_browser)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return visit


def _attach(pipe: _Pipe, session: str) -> set[int]:
    """The domains a target's traffic and messages come from, and its own children attached paused: the calls'
    ids (a domain reports only what happens after its call is answered)."""
    calls = {pipe.send(method, session=session) for method in ("Network.enable", "Runtime.enable", "Log.enable")}
    auto = {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True}
    return calls | {pipe.send("Target.setAutoAttach", auto, session)}


def _drive(pipe: _Pipe, visit: PageVisit, settle_s: float, deadline: float) -> None:
    created = pipe.send("Target.createTarget", {"url": "about:blank"})
    page_session = ""
    sessions: set[str] = set()
    setup: set[int] = set()  # the page's enable calls not answered yet: it is navigated once they all are
    loaded = False
    dom_call = -1
    quiet_since = time.monotonic()
    seen: list[str] = []  # the page's events so far, for a time-out's message
    while True:
        idle_deadline = quiet_since + settle_s if loaded and dom_call < 0 else deadline
        message = pipe.read(min(deadline, idle_deadline))
        if message is None:
            if time.monotonic() >= deadline:
                state = f"loaded {loaded}, DOM asked {dom_call >= 0}, its events: {seen[-30:]}"
                raise TimeoutError(f"{visit.url}: not loaded and quiet within the time allowed ({state})")
            dom_call = pipe.send("Runtime.evaluate", _DOM, page_session)
            continue
        if "error" in message:
            raise RuntimeError(f"DevTools protocol error: {message['error']}")
        if message.get("id") == created:
            target = message["result"]["targetId"]
            pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})
            continue
        if message.get("id") in setup:
            setup.discard(message["id"])
            if not setup:
                pipe.send("Page.navigate", {"url": visit.url}, page_session)
            continue
        if message.get("id") == dom_call:
            visit.dom = message["result"]["result"]["value"]
            pipe.send("Browser.close")
            return
        method, params, session = message.get("method"), message.get("params", {}), message.get("sessionId")
        if method == "Target.attachedToTarget" and (session in sessions or not page_session):
            child = params["sessionId"]
            sessions.add(child)
            page_session = page_session or child
            calls = _attach(pipe, child)
            if page_session == child:
                setup = calls | {pipe.send("Page.enable", session=child)}
            else:
                pipe.send("Runtime.runIfWaitingForDebugger", session=child)
            continue
        if session not in sessions:
            continue  # the browser's own targets (the start-up tab): not the page
        quiet_since = time.monotonic()
        seen.append(str(method or message.get("id")))
        if method == "Network.requestWillBeSent":
            visit.requests.append(params["request"]["url"])
        elif method == "Page.loadEventFired" and session == page_session:
            loaded = True
        elif method == "Runtime.consoleAPICalled":
            words = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            visit.console.append(f"console.{params.get('type')}: {words}")
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            visit.console.append(f"uncaught: {details.get('exception', {}).get('description', details.get('text'))}")
        elif method == "Log.entryAdded":
            entry = params["entry"]
            if entry.get("source") == "network" and entry.get("url"):
                visit.requests.append(entry["url"])  # one refused before it was sent (an unsafe port): still asked
            if entry.get("level") == "error":
                visit.console.append(f"log: {entry.get('text')} {entry.get('url', '')}")


_DOM = {"expression": "document.documentElement.outerHTML", "returnByValue": True}


def page_url(path: Path) -> str:
    """The file URL Chromium reports for `path` as its document's request."""
    return path.resolve().as_uri()
