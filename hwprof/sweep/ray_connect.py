"""Reaching a Ray cluster for a sweep: Ray imported with the fix when it is missing, the address checked
before ray.init can wait on it, this hwprof shipped to every node (hwprof.sweep.ray_env), and every node able to
take a point described by a probe task pinned to it; a node that cannot run hwprof is left out with the reason.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass, field
from typing import Any

from hwprof.host_kinds import HostKind, group_by_kind
from hwprof.sweep.ray_env import driver_runtime_env, install_fix, probe_failure, requirements
from hwprof.sweep.ray_point import describe_node

RESOURCE = "hwprof"
NODE_ID_LABEL = "ray.io/node-id"
PROBE_TIMEOUT_S = 180.0
INSTALL_FIX = "pip install 'hwprof[ray]'"


@dataclass(frozen=True)
class LeftOut:
    """A node that cannot run hwprof: it gets no point (a label selector keeps it out)."""

    node_id: str
    host: str
    why: str
    """The reason and the fix, one line."""

    def __str__(self) -> str:
        return f"node {self.host} ({self.node_id}) left out: {self.why}"


@dataclass
class Cluster:
    nodes: dict[str, dict[str, Any]]
    """Node id -> host_info() of every alive node that declares the resource."""
    kinds: dict[HostKind, list[str]] = field(default_factory=dict)
    left_out: list[LeftOut] = field(default_factory=list)


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ValueError(f"--ray needs Ray, which is not installed: {INSTALL_FIX}") from None
    return ray


def _check_reachable(address: str) -> None:
    """ray.init waits minutes on an address where nothing listens: refuse it in seconds instead."""
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--ray {address!r}: give HOST:PORT of the cluster's head (or auto)")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise ValueError(
            f"no Ray cluster at {address}: {exc.strerror or exc}; start one with `ray start --head --port {port} "
            f"--resources '{{\"{RESOURCE}\": 1}}'`"
        ) from None


def connect(address: str) -> Any:
    ray = import_ray()
    _check_reachable(address)
    try:
        runtime_env = driver_runtime_env()
    except OSError as exc:
        raise ValueError(f"cannot prepare hwprof for the cluster's nodes: {exc}") from None
    try:
        ray.init(
            address=address,
            runtime_env=runtime_env,
            log_to_driver=False,
            logging_level=logging.WARNING,
            configure_logging=False,
        )
    except (ConnectionError, RuntimeError) as exc:
        raise ValueError(f"no Ray cluster at {address}: {exc}") from None
    return ray


def alive_nodes(ray: Any) -> list[str]:
    return [n["NodeID"] for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(RESOURCE, 0) >= 1]


def discover(ray: Any, address: str) -> Cluster:
    """Every node able to take a point, described by a probe task pinned to it (which runs in the job's
    runtime_env: hwprof as shipped). A node that cannot run hwprof (a dependency missing or at another version
    than the driver's, the runtime_env not set up, no answer) is left out with the reason and the fix; only
    when no node is left is the sweep refused."""
    if ray.cluster_resources().get(RESOURCE, 0) < 1:
        raise ValueError(
            f"no node of the cluster at {address} can take a point: none declares the resource {RESOURCE!r}; "
            f"start each measuring node with `ray start ... --resources '{{\"{RESOURCE}\": 1}}'`"
        )
    wanted = requirements()
    probe = ray.remote(num_cpus=0, max_retries=0)(describe_node)
    ids = alive_nodes(ray)
    refs = [probe.options(label_selector={NODE_ID_LABEL: node}).remote(wanted) for node in ids]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=PROBE_TIMEOUT_S)
    nodes: dict[str, dict[str, Any]] = {}
    excluded: dict[str, str] = {}
    for node, ref in zip(ids, refs, strict=True):
        if ref not in ready:
            ray.cancel(ref, force=True)
            excluded[node] = f"it did not describe itself within {PROBE_TIMEOUT_S:.0f} s"
            continue
        try:
            described = ray.get(ref)
        except ray.exceptions.RayError as exc:
            excluded[node] = probe_failure(exc, wanted)
            continue
        missing = described.get("missing")
        if missing:
            excluded[node] = f"it lacks {', '.join(missing)}; fix: on that node, `{install_fix(missing, wanted)}`"
        else:
            nodes[node] = described
    hosts = {n["NodeID"]: str(n.get("NodeManagerHostname", "?")) for n in ray.nodes()}
    left_out = [LeftOut(node, hosts.get(node, "?"), why) for node, why in excluded.items()]
    if not nodes:
        raise ValueError(f"no node of the cluster at {address} can run hwprof: " + "; ".join(map(str, left_out)))
    return Cluster(nodes, group_by_kind(nodes), left_out)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
