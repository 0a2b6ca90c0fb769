"""`hwprof sweep ... --submit` on a real local Ray cluster with a job server: the sweep runs as a Ray Job, and
`hwprof sweep-job status|logs|fetch|stop DIR` follow it as a user would, from child processes of the CLI.

The cluster's nodes get a temporary folder of their own (TMPDIR), so that the test can see that nothing of
the points' scratch is left behind on any node."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("aiohttp")  # ray[default]: the dashboard's job server
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = pytest.mark.slow

POINTS = ["--models", "yolov8n", "--imgsz", "64", "--warmup", "0", "--iters", "1", "--threads", "1,2,3,4"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def job_cluster() -> Iterator[tuple[Cluster, Path]]:
    """A head with the job server (measuring nothing) and two measuring nodes, all with their own TMPDIR."""
    scratch = Path(tempfile.mkdtemp(prefix="hwj", dir="/tmp"))  # short: Ray's sockets live under it otherwise
    saved = {k: os.environ.get(k) for k in ("TMPDIR", "RAY_TMPDIR", "PATH")}
    # the job's entrypoint runs `python` from the head's PATH: this Python, as a head started from its venv
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ.update(TMPDIR=str(scratch), RAY_TMPDIR="/tmp", PATH=path)
    try:
        head = {"num_cpus": 1, "include_dashboard": True, "dashboard_port": free_port()}
        cluster = Cluster(initialize_head=True, connect=False, head_node_args=head)
        for _ in range(2):
            cluster.add_node(num_cpus=1, resources={"hwprof": 1})
        cluster.wait_for_nodes()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        yield cluster, scratch
    finally:
        cluster.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", *args],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def wait_status(local: Path, needle: str, timeout: float = 400) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done = cli("sweep-job", "status", str(local))
        if needle in done.stdout:
            return done.stdout
        time.sleep(2)
    raise AssertionError(f"{needle!r} never came: {done.stdout}{done.stderr}")


def collects_running() -> list[int]:
    return [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if "collect" in (c := p.info["cmdline"] or []) and any("hwprof-point-" in a for a in c)
    ]


def test_a_submitted_sweep_runs_detached_fetches_while_running_and_stops_cleanly(
    job_cluster: tuple[Cluster, Path], tmp_path: Path
) -> None:
    cluster, scratch = job_cluster
    local = tmp_path / "job"
    t0 = time.monotonic()
    sub = cli("sweep", *POINTS, "--ray", cluster.address, "--submit", "--out", str(local), "--", "--only",
              "timing,flops")  # fmt: skip
    submitted = time.monotonic()
    assert sub.returncode == 0, sub.stdout + sub.stderr
    assert "submitted job hwprof-sweep-" in sub.stdout and f"hwprof sweep-job fetch {local}" in sub.stdout
    record = json.loads((local / "ray_job.json").read_text())
    head_dir = Path(record["head_dir"]).expanduser()
    try:
        end = time.monotonic() + 300
        first_point = None
        while first_point is None and time.monotonic() < end:
            log = cli("sweep-job", "logs", str(local)).stdout
            if "running on node" in log:
                first_point = time.monotonic() - submitted
            time.sleep(0.5)
        assert first_point is not None, log
        text = wait_status(local, "1 of 4 points finished")
        assert "RUNNING" in text, text

        got = cli("sweep-job", "fetch", str(local))
        assert got.returncode == 0, got.stdout + got.stderr
        assert "fetched 1 new runs" in got.stdout and "fetch again for more" in got.stdout, got.stdout
        fetched = [p.parent for p in local.glob("*/run.json")]
        assert len(fetched) == 1 and json.loads((fetched[0] / "run.json").read_text())["status"] == "complete"

        stopped = cli("sweep-job", "stop", str(local), timeout=400)
        assert stopped.returncode == 0 and "job STOPPED" in stopped.stdout, stopped.stdout + stopped.stderr
        again = cli("sweep-job", "fetch", str(local))
        assert again.returncode == 0 and "job STOPPED" in again.stdout, again.stdout + again.stderr
        runs = {p.parent.name: json.loads(p.read_text())["status"] for p in local.glob("*/run.json")}
        log = cli("sweep-job", "logs", str(local)).stdout
        assert "complete" in runs.values() and "interrupted" in runs.values(), (runs, log)  # a stopped point came back
        notes = json.loads((local / "sweep.json").read_text())["notes"]
        assert any(n.startswith("interrupted:") and "--resume" in n for n in notes), notes
        assert (local / "sweep.csv").is_file()
        assert not collects_running()
        left = sorted(p.name for p in scratch.glob("hwprof-point-*"))
        assert not left, left  # every node's temporary folder (one here: the nodes share this machine)
        print(f"\nsubmitted job: CLI {submitted - t0:.1f} s, first point running {first_point:.1f} s after submit; "
              f"runs fetched: {runs}; point folders left in the nodes' TMPDIR: {left}")  # fmt: skip
    finally:
        shutil.rmtree(head_dir, ignore_errors=True)


def test_sweep_job_commands_refuse_a_folder_without_a_job(tmp_path: Path) -> None:
    done = cli("sweep-job", "status", str(tmp_path))
    assert done.returncode == 2
    assert done.stdout.strip().splitlines()[-1].startswith("hwprof: error:") and "ray_job.json" in done.stdout
    done = cli("sweep", "--models", "yolov8n", "--submit", "--out", str(tmp_path / "x"))
    assert done.returncode == 2 and "give --ray HOST:PORT too" in done.stdout
