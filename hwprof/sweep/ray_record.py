"""The record of a cluster sweep: every attempt of every point (node, host, start, end, outcome) and the
nodes that left or joined, as the driver saw them.

Ray retries a point whose worker or node died without telling the driver; what the driver sees is the
task's PointStarted record of each attempt (hwprof/sweep/ray_point.py), the PointReturn of the last one,
Ray's error when it gives up, and the cluster's list of alive nodes. An attempt followed by another start
of the same point was lost; when its node is then seen gone, it is marked as lost with its node.
Pure bookkeeping: times are time.time() values given by the caller, so that it is tested without a cluster.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hwprof.render.fmt import clock

RUNNING = "running"
LOST = "lost: Ray ran the point again (its worker or node died)"
NODE_LEFT = "lost: its node left the cluster"


@dataclass
class Attempt:
    node_id: str
    host: str
    start: float
    """time.time() on the node when the task started."""
    end: float | None = None
    """When it returned (the node's clock), or when the driver saw it end."""
    outcome: str = RUNNING

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class NodeChange:
    node_id: str
    host: str
    at: float
    left: bool
    """True: it left the cluster (died, removed); False: it joined."""
    running: list[str] = field(default_factory=list)
    """The points it was running when it left."""

    def text(self) -> str:
        what = "left" if self.left else "joined"
        during = f" while running {', '.join(self.running)}" if self.running else ""
        return f"node {self.node_id[:8]} ({self.host or 'unknown host'}) {what} at {clock(self.at)}{during}"


class SweepRecord:
    """Attempts per point (by its key) and the cluster's node changes."""

    def __init__(self, nodes: dict[str, str]) -> None:
        """nodes: node id -> hostname of every measuring node at the start."""
        self.hosts = dict(nodes)
        self.at_start = len(nodes)
        self.alive = set(nodes)
        self.changes: list[NodeChange] = []
        self.attempts: dict[int, list[Attempt]] = {}

    def started(self, key: int, node_id: str, host: str, at: float) -> int:
        """A new attempt of point `key`; an attempt still open was lost. Returns the attempt's number."""
        tries = self.attempts.setdefault(key, [])
        for old in tries:
            if old.outcome == RUNNING:
                gone = old.node_id not in self.alive
                old.end, old.outcome = (self._left_at(old.node_id) or at, NODE_LEFT) if gone else (at, LOST)
        tries.append(Attempt(node_id, host, at))
        self.hosts.setdefault(node_id, host)
        return len(tries)

    def returned(self, key: int, node_id: str, host: str, start: float, end: float, outcome: str) -> Attempt:
        """The attempt that returned: the open one on that node, or one the driver never saw start."""
        tries = self.attempts.setdefault(key, [])
        match = [a for a in tries if a.outcome == RUNNING and a.node_id == node_id]
        attempt = match[-1] if match else Attempt(node_id, host, start)
        if not match:
            tries.append(attempt)
        attempt.start, attempt.end, attempt.outcome = start or attempt.start, end, outcome
        return attempt

    def ended(self, key: int, outcome: str, at: float) -> None:
        """Every open attempt of the point ended as the driver saw it (Ray gave up, Ctrl-C, stranded)."""
        for attempt in self.attempts.get(key, []):
            if attempt.outcome == RUNNING:
                attempt.end, attempt.outcome = at, outcome

    def last_node(self, key: int) -> str:
        tries = self.attempts.get(key, [])
        return tries[-1].node_id if tries else ""

    def nodes_now(self, alive: set[str], at: float, names: dict[int, str], hosts: dict[str, str]) -> list[NodeChange]:
        """Compare with the alive nodes now: the nodes that left (their lost attempts marked) and joined.
        names: point key -> name; hosts: hostname of nodes known now."""
        found: list[NodeChange] = []
        for node in sorted(self.alive - alive):
            running = [names[k] for k, tries in self.attempts.items() if tries and tries[-1].node_id == node
                       and tries[-1].outcome == RUNNING]  # fmt: skip
            found.append(NodeChange(node, self.hosts.get(node, ""), at, True, running))
            for tries in self.attempts.values():
                for attempt in tries:
                    if attempt.node_id == node and attempt.outcome == LOST:
                        attempt.outcome = NODE_LEFT
        for node in sorted(alive - self.alive):
            self.hosts.setdefault(node, hosts.get(node, ""))
            found.append(NodeChange(node, self.hosts[node], at, False))
        self.alive = set(alive)
        self.changes += found
        return found

    def _left_at(self, node: str) -> float | None:
        return next((c.at for c in self.changes if c.node_id == node and c.left), None)

    def node_note(self, address: str, kinds: str) -> str:
        """ "Ray cluster ADDRESS: 2 nodes at the start (kinds); node abcd1234 (host) left at HH:MM:SS; 1 at the end"."""
        if not self.changes:
            return f"Ray cluster {address}: {self.at_start} nodes ({kinds})"
        changes = "; ".join(c.text() for c in self.changes)
        start = f"Ray cluster {address}: {self.at_start} nodes at the start ({kinds})"
        return f"{start}; {changes}; {len(self.alive)} at the end"

    def attempts_json(self, key: int) -> list[dict[str, Any]]:
        """The point's attempts as sweep.json keeps them (SweepRow.attempts; read back as SweepAttempt)."""
        return [a.to_dict() for a in self.attempts.get(key, [])]
