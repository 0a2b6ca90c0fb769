"""Reaching a Ray cluster for a sweep: Ray imported with the fix when it is missing, the address checked
before ray.init can wait on it, this hwprof shipped to every node (hwprof.sweep.ray_env), and every node able to
take a point described by a probe task pinned to it; a node that cannot run hwprof is left out with the reason.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from dataclasses import dataclass, field
from typing import Any

from hwprof.core.host_kinds import HostKind, group_by_kind
from hwprof.schema.codec import JsonObject
from hwprof.schema.host import HostDoc
from hwprof.sweep.ray_env import driver_runtime_env, install_fix, one_line, probe_failure, requirements
from hwprof.sweep.ray_point import describe_node

RESOURCE = "hwprof"
NODE_ID_LABEL = "ray.io/node-id"
PROBE_TIMEOUT_S = 180.0
INSTALL_FIX = "pip install -c constraints.txt '.[ray]' in hwprof's checkout"
GCS_CHECK_S = 4.0
"""How long the address has to answer as a Ray GCS."""
INIT_TIMEOUT_S = 60.0
"""How long ray.init has, once the address answered as a GCS (about 2 s on a local cluster)."""


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
    nodes: dict[str, HostDoc]
    """Node id -> the host record of every alive node that declares the resource (its host_info(), as run.json's
    "host" holds it: hwprof.sweep.ray_point.describe_node)."""
    kinds: dict[HostKind, list[str]] = field(default_factory=dict)
    left_out: list[LeftOut] = field(default_factory=list)


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ValueError(f"--ray needs Ray, which is not installed: {INSTALL_FIX}") from None
    return ray


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--ray {address!r}: give HOST:PORT of the cluster's head (or auto)")
    return host, int(port)


def _import_grpc() -> Any:
    try:
        import grpc
    except ImportError:
        raise ValueError(f"--ray needs grpcio to check the cluster's address: {INSTALL_FIX}") from None
    return grpc


def _refusal(address: str, code: str, details: str) -> str:
    """Why the other end is not a Ray GCS, in words, from the gRPC status of the check."""
    port = address.rpartition(":")[2]
    start = f"start one with `ray start --head --port {port} --resources '{{\"{RESOURCE}\": 1}}'`"
    if code == "DEADLINE_EXCEEDED":
        return f"something accepts connections there but did not answer as a Ray GCS within {GCS_CHECK_S:.0f} s"
    if code == "UNIMPLEMENTED":
        return "a gRPC server answered, but not Ray's GCS (no NodeInfoGcsService)"
    if "Connection refused" in details:
        return f"nothing listens there (connection refused); {start}"
    if "HTTP/2" in details or "Socket closed" in details or "reset by peer" in details:
        return f"what listens there is not a Ray GCS ({_last_error(details)})"
    return _last_error(details) or code


def _last_error(details: str) -> str:
    """grpc's "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:1.2.3.4:5: WHY": WHY."""
    return details.rsplit(": ", 1)[-1].strip() if "last error" in details else details.strip()


def check_gcs(address: str, timeout_s: float = GCS_CHECK_S) -> str:
    """The Ray version of the GCS at HOST:PORT, asked with one gRPC call under a deadline (NodeInfoGcsService
    .CheckAlive, the call Ray's own health check uses). ray.init would retry an address that is not a GCS for
    minutes (each GcsClient attempt 35 s, 20 attempts), whatever listens there: an HTTP server, a server that
    never answers, one that closes at once. ValueError says which, and a Ray version other than the driver's."""
    ray = import_ray()
    grpc = _import_grpc()
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    host, port = split_address(address)
    with grpc.insecure_channel(f"{host}:{port}") as channel:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        try:
            reply = stub.CheckAlive(gcs_service_pb2.CheckAliveRequest(), timeout=timeout_s)  # type: ignore[attr-defined]
        except grpc.RpcError as exc:
            code = exc.code().name if exc.code() else "UNKNOWN"
            raise ValueError(f"no Ray cluster at {address}: {_refusal(address, code, exc.details() or '')}") from None
    if reply.status.code != 0:
        raise ValueError(f"no Ray cluster at {address}: its GCS answered {reply.status.message or reply.status.code}")
    if reply.ray_version != ray.__version__:
        raise ValueError(
            f"the Ray cluster at {address} runs Ray {reply.ray_version or '(unknown)'} and this driver Ray "
            f"{ray.__version__}: install ray=={reply.ray_version} here (Ray needs the same version on both ends)"
        )
    return str(reply.ray_version)


class JoinError(ValueError):
    """ray.init failed or did not finish after the address answered as a GCS: Ray's messages say why."""


def _init_within(ray: Any, address: str, timeout_s: float, runtime_env: JsonObject | None) -> None:
    """ray.init in a helper thread, waited for timeout_s: it can block for minutes inside Ray's C++ GCS client,
    where no signal reaches it, even after the address answered the check (a GCS that goes away, a node
    address the driver cannot reach). The thread not being the main one also keeps hwprof's SIGTERM
    handler: ray.init would replace it with sys.exit, and a sweep stopped by SIGTERM would lose its table."""
    failed: list[BaseException] = []

    def init() -> None:
        try:
            ray.init(
                address=address,
                runtime_env=runtime_env,
                log_to_driver=False,
                logging_level=logging.WARNING,
                configure_logging=False,
            )
        except BaseException as exc:  # handed to the caller's thread
            failed.append(exc)

    thread = threading.Thread(target=init, name="hwprof-ray-init", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise JoinError(
            f"the Ray cluster at {address} answered, but joining it (ray.init) did not finish within {timeout_s:.0f} s"
        )
    if failed:
        exc = failed[0]
        if isinstance(exc, (ConnectionError, RuntimeError)):
            raise JoinError(f"no Ray cluster at {address}: {first_line(exc)}") from None
        raise exc
    keep_python_sigterm()


def keep_python_sigterm() -> None:
    """Give SIGTERM back to Python's handler. Joining a cluster starts Ray's core worker in this process, which
    installs absl's failure-signal handler for SIGTERM: it prints a stack dump, passes the signal on, and arms
    alarm(3), so the driver is aborted (SIGABRT) 3 s after any SIGTERM whatever Python does with it. A sweep
    stopped by SIGTERM (`hwprof sweep-job stop`, a scheduler's kill) then died before its running points came
    back as interrupted runs. Re-installing Python's own handler removes absl's (main thread only)."""
    if threading.current_thread() is threading.main_thread():
        handler = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, signal.SIG_DFL if handler is None else handler)


def connect(address: str, init_timeout_s: float = INIT_TIMEOUT_S) -> Any:
    ray = import_ray()
    if address == "auto":  # inside a Ray Job: RAY_ADDRESS, the job's own cluster (not the newest on the machine)
        address = _resolve_auto(address)
    if "://" not in address:  # ray:// (Ray Client) speaks to a proxy, not to the GCS
        check_gcs(address)
    try:
        runtime_env = driver_runtime_env()
    except OSError as exc:
        raise ValueError(f"cannot prepare hwprof for the cluster's nodes: {exc}") from None
    _init_within(ray, address, init_timeout_s, runtime_env)
    return ray


def _resolve_auto(address: str) -> str:
    """--ray auto: the address of the cluster Ray finds on this machine (RAY_ADDRESS, the last `ray start`),
    as ray.init resolves it, so that it is checked too (the recorded cluster may be gone)."""
    from ray._private.services import canonicalize_bootstrap_address_or_die

    try:
        return str(canonicalize_bootstrap_address_or_die(os.environ.get("RAY_ADDRESS") or address))
    except ConnectionError as exc:
        raise ValueError(f"--ray auto: {first_line(exc).split(': ', 1)[-1]}") from None


def alive_hosts(ray: Any) -> dict[str, str]:
    """Node id -> hostname of every alive node that declares the resource."""
    return {
        n["NodeID"]: str(n.get("NodeManagerHostname") or "")
        for n in ray.nodes()
        if n.get("Alive") and n.get("Resources", {}).get(RESOURCE, 0) >= 1
    }


def alive_nodes(ray: Any) -> list[str]:
    return list(alive_hosts(ray))


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
    nodes: dict[str, HostDoc] = {}
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
            nodes[node] = HostDoc.from_json(described, f"node {node}'s description")
    hosts = {n["NodeID"]: str(n.get("NodeManagerHostname", "?")) for n in ray.nodes()}
    left_out = [LeftOut(node, hosts.get(node, "?"), why) for node, why in excluded.items()]
    if not nodes:
        raise ValueError(f"no node of the cluster at {address} can run hwprof: " + "; ".join(map(str, left_out)))
    return Cluster(nodes, group_by_kind({node: host.to_json() for node, host in nodes.items()}), left_out)


def first_line(exc: BaseException) -> str:
    """Ray's error as one console line: its type and its first line, without Ray's ANSI colour codes."""
    return f"{type(exc).__name__}: {one_line(str(exc))}"
