"""Ray nodes started from a Python environment that lacks some distributions of the test environment (hwprof
itself, or torch): how a fleet node looks before hwprof is installed on it.

The environment is a venv (no pip) whose site-packages holds a symlink to every top-level entry of the test
environment's site-packages except the files of the left-out distributions, so it builds in a second and
shares everything else. ray.cluster_utils.Cluster cannot choose a node's Python, so the node is the venv's own
`ray start --address ... --block` in a session of its own, stopped by signalling that session (never
`ray stop`, which would stop every Ray node of the machine).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil


def _top_level(dist_name: str) -> set[str]:
    files = importlib.metadata.distribution(dist_name).files or []
    return {Path(str(f)).parts[0] for f in files if not str(f).startswith("..")}


def venv_without(root: Path, *left_out: str) -> Path:
    """A venv at root that has every distribution of this environment except left_out; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    target = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip
    skip = set().union(*(_top_level(name) for name in left_out))
    source = Path(sysconfig.get_path("purelib"))
    for entry in source.iterdir():
        if entry.name not in skip and entry.name != "__pycache__" and not (target / entry.name).exists():
            (target / entry.name).symlink_to(entry)
    return python


def finds(python: Path, *modules: str) -> list[bool]:
    """Whether `python` finds each module (importlib's find_spec, as `import` looks it up), in one process:
    importing torch there to see that it is present took seconds of the 2-CPU host's time."""
    code = "import importlib.util as u, sys; print(*[u.find_spec(m) is not None for m in sys.argv[1:]])"
    out = subprocess.run([str(python), "-P", "-c", code, *modules], capture_output=True, text=True, check=True)
    return [word == "True" for word in out.stdout.split()]


@contextlib.contextmanager
def node_from(python: Path, address: str, log: Path, temp_dir: Path | None = None) -> Iterator[str]:
    """A Ray node that declares `hwprof: 1`, run by `python`, joined to the cluster at address; yields its
    node id. Its own temp dir (by default a short one under /tmp, removed after: Ray's socket paths must fit
    in 107 bytes); no log monitor, as ray.cluster_utils' nodes (no driver here takes the workers' output).
    Stopped on exit: SIGTERM to its `ray start --block` (which stops its raylet and workers), then SIGKILL to
    whatever of its session is left."""
    import ray

    made = temp_dir is None
    temp_dir = temp_dir or Path(tempfile.mkdtemp(prefix="hwprof-node-", dir="/tmp"))
    before = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(python), "-c", "from ray.scripts.scripts import main; main()", "start", "--address", address,
             "--num-cpus", "1", "--resources", json.dumps({"hwprof": 1}), "--temp-dir", str(temp_dir),
             "--dashboard-agent-listen-port", "0", "--include-log-monitor", "false", "--block"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        yield _wait_for_new_node(ray, before, proc, log)
    finally:
        _stop_session(proc)
        if made:
            shutil.rmtree(temp_dir, ignore_errors=True)


def _wait_for_new_node(ray: object, before: set[str], proc: subprocess.Popen[bytes], log: Path) -> str:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        new = {n["NodeID"] for n in ray.nodes() if n["Alive"]} - before  # type: ignore[attr-defined]
        if new:
            return new.pop()
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    raise AssertionError(f"the node did not join:\n{log.read_text(errors='replace')}")


def _stop_session(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if os.getsid(p.pid) == proc.pid:
                p.kill()
