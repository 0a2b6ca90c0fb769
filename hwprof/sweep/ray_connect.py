"""Reaching a Ray cluster for a sweep: Ray imported with the fix when it is missing, the address checked
before ray.init can wait on it, and every node able to take a point described by a probe task pinned to it.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

from hwprof.host_kinds import HostKind, group_by_kind
from hwprof.sweep.ray_point import describe_node

RESOURCE = "hwprof"
NODE_ID_LABEL = "ray.io/node-id"
PROBE_TIMEOUT_S = 180.0
INSTALL_FIX = "pip install 'hwprof[ray]'"


@dataclass
class Cluster:
    nodes: dict[str, dict[str, Any]]
    """Node id -> host_info() of every alive node that declares the resource."""
    kinds: dict[HostKind, list[str]] = field(default_factory=dict)


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
    if address == "auto" and os.environ.get("RAY_ADDRESS"):
        # inside a Ray Job (or a shell that names its cluster): the job's own cluster, not the newest one
        # started on this machine, which is what "auto" finds in Ray's temporary folder otherwise
        address = os.environ["RAY_ADDRESS"]
    _check_reachable(address)
    handlers = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING, configure_logging=False)
    except (ConnectionError, RuntimeError) as exc:
        raise ValueError(f"no Ray cluster at {address}: {exc}") from None
    _restore(handlers)
    return ray


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _restore(handlers: dict[signal.Signals, Any]) -> None:
    """ray.init replaces the SIGTERM handler (its own exits at once: sys.exit(15), and a C++ one prints a
    stack): the sweep's handlers (hwprof.stopping) are put back, so that SIGTERM (`hwprof sweep-job stop`, Ray's
    stop_job, a shell's kill) stops the sweep as Ctrl-C does, its running points finalised and kept."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig, handler in handlers.items():
        if callable(handler):
            signal.signal(sig, handler)


def alive_nodes(ray: Any) -> list[str]:
    return [n["NodeID"] for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(RESOURCE, 0) >= 1]


def discover(ray: Any, address: str) -> Cluster:
    """Every node able to take a point, described by a probe task pinned to it."""
    if ray.cluster_resources().get(RESOURCE, 0) < 1:
        raise ValueError(
            f"no node of the cluster at {address} can take a point: none declares the resource {RESOURCE!r}; "
            f"start each measuring node with `ray start ... --resources '{{\"{RESOURCE}\": 1}}'`"
        )
    probe = ray.remote(num_cpus=0, max_retries=0)(describe_node)
    ids = alive_nodes(ray)
    refs = [probe.options(label_selector={NODE_ID_LABEL: node}).remote() for node in ids]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=PROBE_TIMEOUT_S)
    nodes: dict[str, dict[str, Any]] = {}
    for node, ref in zip(ids, refs, strict=True):
        if ref not in ready:
            ray.cancel(ref, force=True)
            raise ValueError(f"node {node} did not describe itself within {PROBE_TIMEOUT_S:.0f} s")
        try:
            nodes[node] = ray.get(ref)
        except ray.exceptions.RayError as exc:
            raise ValueError(
                f"node {node} cannot run hwprof ({first_line(exc)}): install hwprof on every node"
            ) from None
    return Cluster(nodes, group_by_kind(nodes))


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
