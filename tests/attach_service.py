"""A real inference service for `hwprof attach`'s tests: scripts/detect_service.py (ThreadingHTTPServer on the
loopback address, an ultralytics DetectionModel) started with HWPROF_AGENT=1, and a bounded load generator."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVICE = ROOT / "scripts" / "detect_service.py"


def image_bytes() -> bytes:
    """A real JPEG: ultralytics' bus.jpg from its wheel."""
    import ultralytics

    return (Path(ultralytics.__file__).parent / "assets" / "bus.jpg").read_bytes()


@dataclass
class Service:
    proc: subprocess.Popen[str]
    port: int
    baseline: dict[str, Any] = field(default_factory=dict)
    """Its hooks (hooks()) before any attach."""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def detect(self, body: bytes, timeout: float = 60) -> dict[str, Any]:
        request = urllib.request.Request(self.url("/detect"), data=body)
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return dict(json.loads(answer.read()))

    def agent(self, action: str) -> dict[str, Any]:
        """POST /agent: `start` or `stop` the service's agent."""
        request = urllib.request.Request(self.url("/agent"), data=action.encode())
        with urllib.request.urlopen(request, timeout=30) as answer:
            return dict(json.loads(answer.read()))

    def hooks(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.url("/hooks"), timeout=30) as answer:
            return dict(json.loads(answer.read()))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def agent_hook() -> Path | None:
    """hwprof's start-up hook (hwprof-agent.pth) where this interpreter's site reads it; None where it is absent
    (an editable install has none: the wheel carries it)."""
    import site

    for folder in site.getsitepackages():
        if (Path(folder) / "hwprof-agent.pth").is_file():
            return Path(folder) / "hwprof-agent.pth"
    return None


def start_service(imgsz: int = 128, agent: bool = True) -> Service:
    if agent and agent_hook() is None:
        raise RuntimeError(
            "hwprof-agent.pth is not in site-packages (an editable install has none): install hwprof from its wheel "
            "(pip install .), as tox does, or copy hwprof/agent/hwprof-agent.pth there"
        )
    env = {**os.environ, "YOLO_OFFLINE": "1"}
    env.pop("HWPROF_AGENT", None)
    if agent:
        env["HWPROF_AGENT"] = "1"
    proc = subprocess.Popen(
        [sys.executable, str(SERVICE), "--imgsz", str(imgsz), "--threads", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise RuntimeError(f"the service did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    port = int(line.split("127.0.0.1:")[1].split()[0])
    return Service(proc, port)


@dataclass
class Load:
    """Requests at a few per second on their own thread until stopped; every answer (or failure) kept."""

    service: Service
    rate: float = 6.0
    answers: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Load:
        body = image_bytes()

        def run() -> None:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    answer = self.service.detect(body)
                    answer["at"] = started
                    self.answers.append(answer)
                except Exception as exc:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                self._stop.wait(max(0.0, 1 / self.rate - (time.monotonic() - started)))

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)

    def inference_ms(self, since: float = 0.0, until: float = float("inf")) -> list[float]:
        return [a["inference_ms"] for a in self.answers if since <= a["at"] < until]


def median(values: list[float]) -> float:
    return statistics.median(values)


def attach(
    pid: int, out: Path, *options: str, timeout: float = 600, columns: int = 200
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", "attach", str(pid), "--out", str(out), *options],
        cwd=out.parent,
        text=True,
        capture_output=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": str(columns)},
    )
