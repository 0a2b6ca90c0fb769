"""The session's Ray cluster, a pytest plugin (a test module that uses it names it in `pytest_plugins`, and
imports it only for type checking: imported by a test module first, pytest warns that it cannot rewrite it): a
head that measures nothing and runs the job server, and as many measuring nodes as a test asks for
(LocalCluster.measuring).

Why one cluster: the tests started their own (six heads, each with Ray's dashboard and its dozen processes,
and ten other nodes): on the suite's 2-CPU host those starts cost more than the points they measured. Every
test leaves no point running and nothing in the nodes' TMPDIR (each asserts it), so the next one finds the
cluster as new; a test that kills a node kills one of the measuring nodes, which the next test that needs it
starts again."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ray_nodes import STARTED, free_port, nodes_env

HEALTH_CHECKS = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}
"""Ray's health checks of the nodes, every 1 s and 3 failures (Ray's defaults: 3 s and 5): a killed node is
known dead, and its point retried or failed, about 7 s after its death instead of 16 (measured here). A live
node still has Ray's 10 s per check to answer, 3 times in a row."""


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


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[LocalCluster]:
    """The session's cluster, started by the first test that asks for it, stopped at the end of the session."""
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    try:
        import aiohttp  # noqa: F401  (ray[default]: the dashboard's job server, which test_sweep_job needs)

        dashboard = {"include_dashboard": True, "dashboard_port": free_port()}
    except ImportError:
        dashboard = {"include_dashboard": False}
    scratch = Path(tempfile.mkdtemp(prefix="hwr", dir="/tmp"))  # short: Ray's sockets live under it otherwise
    with nodes_env(scratch):
        # every port the head listens on is free: its dashboard agent's default (52365) is the one another suite's
        # head on this machine took first, and a head whose agent cannot listen takes no job ("No available agent")
        head = {"num_cpus": 1, **dashboard, "dashboard_agent_listen_port": free_port(), "_system_config": HEALTH_CHECKS}
        cluster = Cluster(initialize_head=True, connect=False, head_node_args=head)
    try:
        yield LocalCluster(cluster, scratch)
    finally:
        cluster.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)


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
