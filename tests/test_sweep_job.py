"""`hwprof sweep ... --submit` on a real local Ray cluster with a job server: the sweep runs as a Ray Job, and
`hwprof sweep-job status|logs|fetch|stop DIR` follow it as a user would, from child processes of the CLI.

The cluster is the session's (tests/ray_cluster.py), with two measuring nodes; its nodes have a temporary folder
of their own (TMPDIR), so that the test can see that nothing of the points' scratch is left behind on any node."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("aiohttp")  # ray[default]: the dashboard's job server
from ray_nodes import collect_pids, sweep_cli, wait_until  # noqa: E402

if TYPE_CHECKING:
    from ray_cluster import LocalCluster

pytest_plugins = ("ray_cluster",)  # the session's cluster
pytestmark = pytest.mark.slow

POINTS = [
    "--models",
    "yolov8n",
    "--imgsz",
    "64",
    "--warmup",
    "0",
    "--iters",
    "400",
    "--batch",
    "1,2,3,4",
    "--threads",
    "1,2,3",
]
"""Eight points on this 2-CPU host (three threads are refused): four rounds on the two measuring nodes, so that
`sweep-job stop` lands while points still run (with four, all had finished by the time it landed on a busy CI
host). The test stops the job after the first round; the rest never run. 400 measured forwards (5-11 s at 64x64 on
one thread of a quiet 2-CPU host): the stop's way from the CLI through the job server, the driver and the control
actor to the point's collect took longer than a point's last seconds once the measured loop was a single forward
(a CI run beside other tests: the running points finished as complete, none came back interrupted)."""


@pytest.fixture
def job_cluster(ray_cluster: LocalCluster) -> tuple[LocalCluster, Path]:
    """The head with the job server (measuring nothing) and two measuring nodes, all with their own TMPDIR (each
    test leaves no job running and nothing in the nodes' TMPDIR: they assert it)."""
    ray_cluster.wait_for_job_agent()
    return ray_cluster.measuring(2), ray_cluster.scratch


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "hwprof", *args],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def cli_until(args: tuple[str, ...], ready: Callable[[str], bool], timeout: float = 60) -> str:
    """`hwprof ARGS` (a `sweep-job` command) until its output is ready: once the event it reports has happened
    (waited for on the files and processes themselves: each command is a Python process, a CPU-second here)."""
    end = time.monotonic() + timeout
    while True:
        done = cli(*args)
        if ready(done.stdout) or time.monotonic() > end:
            return done.stdout + done.stderr
        time.sleep(0.5)


def wait_finished(local: Path, at_least: int, timeout: float = 400) -> str:
    """`sweep-job status` until at least `at_least` points have finished (the job still running), asked once
    that many runs have come back to the job's folder on the head."""
    head_dir = Path(json.loads((local / "ray_job.json").read_text())["head_dir"]).expanduser()
    wait_until(lambda: len(list(head_dir.glob("*/run.json"))) >= at_least, timeout)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done = cli("sweep-job", "status", str(local))
        found = re.search(r"(\d+) of \d+ points finished", done.stdout)
        if found and int(found.group(1)) >= at_least:
            return done.stdout
        time.sleep(1)
    raise AssertionError(f"{at_least} finished points never came: {done.stdout}{done.stderr}")


def test_a_submitted_sweep_runs_detached_fetches_while_running_and_stops_cleanly(
    job_cluster: tuple[LocalCluster, Path], tmp_path: Path
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
        assert wait_until(lambda: collect_pids(scratch), 300), "no point's collect started"
        first_point = time.monotonic() - submitted
        log = cli_until(("sweep-job", "logs", str(local)), lambda out: "running on node" in out)
        assert "running on node" in log, log
        text = wait_finished(local, 1)
        assert "RUNNING" in text, text

        got = cli("sweep-job", "fetch", str(local))
        assert got.returncode == 0, got.stdout + got.stderr
        assert "job RUNNING: fetch again for more" in got.stdout, got.stdout
        fetched = [json.loads(p.read_text())["status"] for p in local.glob("*/run.json")]
        assert fetched and set(fetched) == {"complete"} and f"fetched {len(fetched)} new runs" in got.stdout

        # stop once a running point's collect has its run directory on its node
        wait_until(lambda: list(scratch.glob("hwprof-point-*/yolov8n-*/run.json")), 300)
        stopped = cli("sweep-job", "stop", str(local), timeout=400)
        assert stopped.returncode == 0 and "job STOPPED" in stopped.stdout, stopped.stdout + stopped.stderr
        again = cli("sweep-job", "fetch", str(local))
        assert again.returncode == 0 and "job STOPPED" in again.stdout, again.stdout + again.stderr
        runs = {p.parent.name: json.loads(p.read_text())["status"] for p in local.glob("*/run.json")}
        if not {"complete", "interrupted"} <= set(runs.values()):  # a stopped point came back, else why not
            driver = head_dir / "ray_logs" / "driver.log"  # Ray's messages in the driver (a signal's stack dump)
            ray_said = driver.read_text()[-3000:] if driver.is_file() else ""
            raise AssertionError((runs, cli("sweep-job", "logs", str(local)).stdout, ray_said))
        notes = json.loads((local / "sweep.json").read_text())["notes"]
        assert any(n.startswith("interrupted:") and "--resume" in n for n in notes), notes
        assert (local / "sweep.csv").is_file()
        assert not collect_pids(scratch)
        left = sorted(p.name for p in scratch.glob("hwprof-point-*"))
        assert not left, left  # every node's temporary folder (one here: the nodes share this machine)
        print(f"\nsubmitted job: CLI {submitted - t0:.1f} s, first point running {first_point:.1f} s after submit; "
              f"runs fetched: {runs}; point folders left in the nodes' TMPDIR: {left}")  # fmt: skip
    finally:
        shutil.rmtree(head_dir, ignore_errors=True)


def test_sweep_job_commands_refuse_a_folder_without_a_job(tmp_path: Path) -> None:
    done = cli("sweep-job", "status", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("hwprof: error:") and "ray_job.json" in done.stderr
    done = cli("sweep", "--models", "yolov8n", "--submit", "--out", str(tmp_path / "x"))
    assert done.returncode == 2 and "give --ray HOST:PORT too" in done.stderr


def test_nothing_is_left_on_the_nodes_by_a_killed_driver(
    job_cluster: tuple[LocalCluster, Path], tmp_path: Path
) -> None:
    """A driver killed with SIGKILL while its points run (a closed terminal, a laptop that sleeps) leaves no
    collect running and no scratch folder on any node: each point's keeper stops its collect and removes the
    folder once Ray has killed the worker. Two points of one thread (batch 1 and 2), the timing pass alone.
    (A scratch folder left by a point that is gone, removed by the next point on its node: test_sweep_ray's
    per-host sweep.)"""
    cluster, scratch = job_cluster
    more = ["--threads", "1", "--batch", "1,2", "--", "--only", "timing"]
    proc = sweep_cli(cluster.address, tmp_path / "killed", *POINTS[:-4], *more)
    wait_until(lambda: len(collect_pids(scratch)) >= 2, 300)
    assert len(collect_pids(scratch)) == 2
    assert len(list(scratch.glob("hwprof-point-*"))) == 2
    proc.kill()
    proc.wait()
    killed = time.monotonic()
    wait_until(lambda: not (collect_pids(scratch) or list(scratch.glob("hwprof-point-*"))), 120)
    gone_s = time.monotonic() - killed
    assert not collect_pids(scratch)
    assert not list(scratch.glob("hwprof-point-*"))
    print(f"\ndriver killed: the collects stopped and the nodes' scratch folders removed within {gone_s:.1f} s")
