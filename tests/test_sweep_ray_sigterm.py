"""A sweep's driver stopped by SIGTERM must live to finish its stop. Joining a cluster starts Ray's core
worker in the driver, which installs absl's failure-signal handler for SIGTERM: it aborts the process 3 s after
the signal, whatever Python's handler does (found when `hwprof sweep-job stop` lost its running points' runs
under load: the driver died 3-4 s into the stop). hwprof.sweep.ray_connect.connect gives SIGTERM back to Python."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402
from ray_nodes import nodes_env  # noqa: E402

pytestmark = pytest.mark.slow

DRIVER = textwrap.dedent(
    """
    import os, signal, sys, time
    from hwprof.sweep.ray_connect import connect
    handled = []
    signal.signal(signal.SIGTERM, lambda signum, frame: handled.append(signum))
    ray = connect(sys.argv[1])
    t0 = time.monotonic()
    os.kill(os.getpid(), signal.SIGTERM)
    while time.monotonic() - t0 < 6.0:
        time.sleep(0.2)
    print(f"alive 6 s after SIGTERM, handled {len(handled)}", flush=True)
    ray.shutdown()
    """
)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    scratch = Path(tempfile.mkdtemp(prefix="hws", dir="/tmp"))
    with nodes_env(scratch):
        c = Cluster(initialize_head=True, connect=False, head_node_args={"num_cpus": 1})
        c.wait_for_nodes()
    try:
        yield c
    finally:
        c.shutdown()


def test_a_connected_driver_outlives_sigterm_and_handles_it_in_python(cluster: Cluster) -> None:
    got = subprocess.run(
        [sys.executable, "-P", "-c", DRIVER, cluster.address], capture_output=True, text=True, timeout=120
    )
    assert got.returncode == 0, (got.returncode, got.stdout, got.stderr[-2000:])
    assert "alive 6 s after SIGTERM, handled 1" in got.stdout, got.stdout
