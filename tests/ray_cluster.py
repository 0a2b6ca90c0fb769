"""The session's Ray cluster, a pytest plugin (a test module that uses it names it in `pytest_plugins`, and
imports it only for type checking: imported by a test module first, pytest warns that it cannot rewrite it): a
head that measures nothing and runs the job server, and as many measuring nodes as a test asks for
(LocalCluster.measuring).

Why one cluster: the tests started their own (six heads, each with Ray's dashboard and its dozen processes,
and ten other nodes): on the suite's 2-CPU host those starts cost more than the points they measured. Every
test leaves no point running and nothing in the nodes' TMPDIR (each asserts it), so the next one finds the
cluster as new; a test that kills a node kills one of the measuring nodes, which the next test that needs it
starts again.

Nothing here assumes that it is the only Ray on the machine (other checkouts' suites run theirs beside it): every
port the head listens on is one the kernel hands it (port 0: no default such as the dashboard agent's 52365, no
port found free a moment before and taken since), and the cluster keeps Ray's files, its address file included,
in a temporary folder of its own, not in /tmp/ray (see own_address_file)."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ray_nodes import STARTED, nodes_env

HEALTH_CHECKS = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}
"""Ray's health checks of the nodes, every 1 s and 3 failures (Ray's defaults: 3 s and 5): a killed node is
known dead, and its point retried or failed, about 7 s after its death instead of 16 (measured here). A live
node still has Ray's 10 s per check to answer, 3 times in a row."""


HEAD_WITHOUT = {"no_monitor": True, "include_log_monitor": False}
"""The head's processes that no test uses: the autoscaler's monitor and the log monitor (workers' output to
drivers; every hwprof driver joins with log_to_driver=False). Ray's measuring nodes of ray.cluster_utils start no
log monitor either (include_log_monitor=False there)."""


class LocalCluster:
    """The session's cluster (ray.cluster_utils.Cluster: real raylets on this machine): a head that measures
    nothing and runs the job server (Ray's dashboard), and the measuring nodes (`hwprof: 1`) that the tests ask
    for, all with TMPDIR=scratch."""

    def __init__(self, cluster: Any, scratch: Path) -> None:
        self.cluster, self.scratch = cluster, scratch

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    @property
    def worker_nodes(self) -> set[Any]:
        return set(self.cluster.worker_nodes)

    def measuring(self, count: int) -> LocalCluster:
        """Exactly `count` measuring nodes: started, or the extra ones stopped."""
        while len(self.cluster.worker_nodes) > count:
            self.cluster.remove_node(next(iter(self.cluster.worker_nodes)))
        if len(self.cluster.worker_nodes) < count:
            with nodes_env(self.scratch):
                while len(self.cluster.worker_nodes) < count:
                    self.cluster.add_node(num_cpus=1, resources={"hwprof": 1})
        self.cluster.wait_for_nodes()
        return self

    def kill_node(self, node: Any) -> None:
        """A measuring node killed as a machine dies (no graceful stop)."""
        self.cluster.remove_node(node, allow_graceful=False)

    def wait_for_job_agent(self, timeout: float = 120) -> None:
        """Until the head's dashboard agent, which runs the jobs that the job server takes, has said where it
        listens (Ray's job server asks the same key). A head whose agent never does fails here, with the agent's
        log, instead of in a submit refused for 180 s ("No available agent to submit job")."""
        from ray._private.ray_constants import KV_NAMESPACE_DASHBOARD
        from ray.dashboard.consts import DASHBOARD_AGENT_ADDR_NODE_ID_PREFIX

        head = self.cluster.head_node
        key = f"{DASHBOARD_AGENT_ADDR_NODE_ID_PREFIX}{head.node_id}".encode()
        gcs = head.get_gcs_client()
        end = time.monotonic() + timeout
        while not (said := gcs.internal_kv_get(key, KV_NAMESPACE_DASHBOARD)):
            if time.monotonic() > end:
                log = Path(head.get_logs_dir_path()) / "dashboard_agent.log"
                tail = log.read_text(errors="replace")[-3000:] if log.is_file() else f"{log}: none"
                raise AssertionError(f"the head's dashboard agent never registered in {timeout:.0f} s:\n{tail}")
            time.sleep(0.5)
        assert json.loads(said)[1] > 0, said  # its HTTP port: -1 where its server could not listen


@contextlib.contextmanager
def own_address_file(ray_temp: Path) -> Iterator[None]:
    """While the head starts and while the cluster stops: ray.cluster_utils writes the head's address into the
    cluster's own temporary folder (ray_temp/ray_current_cluster), and removes it from there, instead of the
    machine's (/tmp/ray/ray_current_cluster).

    Why: Ray's job server gives a job's driver (the submitted sweep's `--ray auto`) the address in that file of
    its head's temporary folder. The machine's file names whichever cluster on the machine started last: a job
    submitted here would join another suite's cluster if that suite's head started after this one; this head,
    written there, would send the other suite's jobs here, and its shutdown removed the other suite's file."""
    import ray._common.utils as common_utils
    import ray._private.utils as ray_utils

    write, reset = ray_utils.write_ray_address, common_utils.reset_ray_address
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ray_utils, "write_ray_address", lambda address, temp_dir=None: write(address, str(ray_temp)))
        patch.setattr(common_utils, "reset_ray_address", lambda temp_dir=None: reset(str(ray_temp)))
        yield


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[LocalCluster]:
    """The session's cluster, started by the first test that asks for it, stopped at the end of the session."""
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    try:
        import aiohttp  # noqa: F401  (ray[default]: the dashboard's job server, which test_sweep_job needs)

        dashboard = {"include_dashboard": True, "dashboard_port": 0}
    except ImportError:
        dashboard = {"include_dashboard": False}
    # short paths: Ray's sockets live under its temporary folder, and a socket's path must fit in 107 bytes
    scratch = Path(tempfile.mkdtemp(prefix="hwr", dir="/tmp"))
    ray_temp = Path(tempfile.mkdtemp(prefix="hwray", dir="/tmp"))
    # port 0 for the dashboard and its agent (Ray's defaults: 8265 and 52365, which another suite's head on this
    # machine may hold; a head whose agent cannot listen takes no job: "No available agent to submit job"); the
    # other ports are 0 in Ray already. The nodes take the head's temporary folder. No autoscaler monitor (the
    # cluster's nodes are the ones the tests add) and no log monitor (hwprof's drivers take no worker output:
    # log_to_driver=False): two Python processes less to start, 1.5-2 s of the head's start here.
    head = {"num_cpus": 1, **dashboard, "dashboard_agent_listen_port": 0, "temp_dir": str(ray_temp),
            "_system_config": HEALTH_CHECKS, **HEAD_WITHOUT}  # fmt: skip
    with nodes_env(scratch), own_address_file(ray_temp):
        cluster = Cluster(initialize_head=True, connect=False, head_node_args=head)
    try:
        yield LocalCluster(cluster, scratch)
    finally:
        with own_address_file(ray_temp):
            cluster.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(ray_temp, ignore_errors=True)


@pytest.fixture(autouse=True)
def _no_sweep_left() -> Iterator[None]:
    """After each test, a sweep CLI that it left running (an assertion failed before the sweep ended) is killed:
    its points would run on into the next test's on the session's cluster."""
    yield
    for proc in STARTED:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    STARTED.clear()
