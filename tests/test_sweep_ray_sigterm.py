"""A sweep's driver stopped by SIGTERM must live to finish its stop. Joining a cluster starts Ray's core
worker in the driver, which installs absl's failure-signal handler for SIGTERM: it aborts the process 3 s after
the signal, whatever Python's handler does (found when `hwprof sweep-job stop` lost its running points' runs
under load: the driver died 3-4 s into the stop). hwprof.sweep.ray_connect.connect gives SIGTERM back to Python.
The driver here waits 4 s after its SIGTERM: absl's abort is an alarm of 3 s (a kernel timer, which load does not
delay), so 1 s more tells it apart."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest

ray = pytest.importorskip("ray")

if TYPE_CHECKING:
    from ray_cluster import LocalCluster

pytest_plugins = ("ray_cluster",)  # the session's cluster
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
    while time.monotonic() - t0 < 4.0:
        time.sleep(0.2)
    print(f"alive 4 s after SIGTERM, handled {len(handled)}", flush=True)
    ray.shutdown()
    """
)


def test_a_connected_driver_outlives_sigterm_and_handles_it_in_python(ray_cluster: LocalCluster) -> None:
    """The session's cluster (tests/ray_cluster.py): the driver joins it; no task runs."""
    got = subprocess.run(
        [sys.executable, "-P", "-c", DRIVER, ray_cluster.address], capture_output=True, text=True, timeout=120
    )
    assert got.returncode == 0, (got.returncode, got.stdout, got.stderr[-2000:])
    assert "alive 4 s after SIGTERM, handled 1" in got.stdout, got.stdout
