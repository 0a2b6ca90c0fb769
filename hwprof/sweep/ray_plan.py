"""Which points go where on a Ray cluster: the sweep's Ray options, one Job per point (per kind of machine with
--per-host), and the nodes, as a label selector, that each may run on."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hwprof.analysis.sweep.rows import SweepPoint
from hwprof.core.host_kinds import HostKind, select_kinds
from hwprof.sweep.points import SweepPlan
from hwprof.sweep.ray_connect import NODE_ID_LABEL, Cluster


@dataclass(frozen=True)
class RayOptions:
    address: str
    per_host: bool = False
    hosts: tuple[str, ...] = ()
    """--hosts: the kinds to run on (slug, or part of the CPU model); empty: every kind."""
    max_retries: int = 2
    """Ray re-runs a point whose worker or node died this many times (on another node of its kind)."""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "hosts": list(self.hosts)}


@dataclass(frozen=True)
class Job:
    index: int
    """1-based, in the table's order."""
    point: SweepPoint
    kind: HostKind | None
    """--per-host: the kind of machine it must run on; None: any node that declares the resource."""
    run_dir: Path

    @property
    def name(self) -> str:
        return f"{self.kind.slug}/{self.point.name}" if self.kind else self.point.name


def plan_jobs(plan: SweepPlan, cluster: Cluster, options: RayOptions) -> list[Job]:
    out = Path(plan.out_root)
    if not options.per_host:
        select_kinds(list(cluster.kinds), options.hosts)
        return [Job(i, p, None, out / p.name) for i, p in enumerate(plan.points(), 1)]
    kinds = select_kinds(list(cluster.kinds), options.hosts)
    pairs = [(k, p) for k in kinds for p in plan.points()]
    return [Job(i, p, k, out / k.slug / p.name) for i, (k, p) in enumerate(pairs, 1)]


def allowed_nodes(job: Job, cluster: Cluster, options: RayOptions) -> list[str]:
    """The nodes a job may run on: its kind's, or those of the --hosts kinds, or every measuring node."""
    if job.kind is not None:
        return cluster.kinds[job.kind]
    if options.hosts:
        return [n for k in select_kinds(list(cluster.kinds), options.hosts) for n in cluster.kinds[k]]
    return list(cluster.nodes)


def selector(job: Job, cluster: Cluster, options: RayOptions) -> dict[str, str]:
    """A label selector on node ids where the job is restricted (any node that holds the resource otherwise,
    except those left out because they cannot run hwprof)."""
    if job.kind is None and not options.hosts:
        left_out = [n.node_id for n in cluster.left_out]
        return {NODE_ID_LABEL: f"!in({','.join(left_out)})"} if left_out else {}
    nodes = allowed_nodes(job, cluster, options)
    return {NODE_ID_LABEL: nodes[0] if len(nodes) == 1 else f"in({','.join(nodes)})"}


def stranded(job: Job) -> str:
    return f"every node that could run it ({job.kind.label if job.kind else 'any kind'}) has left the cluster"
