"""`hwprof sweep --ray ADDRESS`: every point a Ray task that runs the ordinary `hwprof collect` on a worker node.

Ray schedules; hwprof only asks. A point holds a whole node through the custom resource `hwprof: 1`, which
the operator declares once on each node that may measure (`ray start ... --resources '{"hwprof": 1}'`):
one point per node at a time whatever the node's core count, and nodes without it (a head node that runs
the driver, say) never measure. Asking for the node's whole CPU count instead would pin a point to nodes
with at least that many CPUs and leave the rest of a larger node free for a second point.

With --per-host every point runs once on each kind of machine (hwprof.host_kinds), restricted by a label
selector to the nodes of that kind, so that Ray's own retry after a node dies (max_retries) lands on another
node of the same kind. Each finished point's run directory comes back through the object store as a
tar.gz and is written under the sweep's folder at once (ray.wait loop), with its collect log.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hwprof.analysis.sweep_rows import SweepPoint, SweepResult, SweepRow, point_row, row_from_run, set_host, write_sweep
from hwprof.atomic import atomic_write_bytes, atomic_write_text
from hwprof.host_kinds import HostKind, select_kinds
from hwprof.sweep.ray_connect import (
    NODE_ID_LABEL,
    RESOURCE,
    Cluster,
    alive_nodes,
    connect,
    discover,
    first_line,
)
from hwprof.sweep.ray_point import PointReturn, PointStarted, run_point, unpack
from hwprof.sweep.resume import write_plan
from hwprof.sweep.run import ProgressFn, SweepEvent, SweepPlan, claim_point_dir, finished_row

CHECK_NODES_S = 5.0
TRANSFER_JSON = "ray_transfer.json"
WRITE_EVERY_S = 10.0
"""sweep.json is rewritten at most this often while points arrive (each point's run directory at once): a
table of 2,000 rows rewritten after every point would write gigabytes."""


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


@dataclass
class Transfer:
    """Per point: what moving its run directory back cost (the closing figures of a cluster sweep)."""

    point: str
    node: str
    node_id: str
    archive_bytes: int
    run_bytes: int
    files: int
    collect_s: float
    pack_s: float
    fetch_s: float
    unpack_s: float
    row_s: float = 0.0
    """The driver's analysis of the run into its table row."""


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


def _selector(job: Job, cluster: Cluster, options: RayOptions) -> dict[str, str]:
    """A label selector on node ids where the job is restricted (any node that holds the resource otherwise,
    except those left out because they cannot run hwprof)."""
    if job.kind is None and not options.hosts:
        left_out = [n.node_id for n in cluster.left_out]
        return {NODE_ID_LABEL: f"!in({','.join(left_out)})"} if left_out else {}
    nodes = allowed_nodes(job, cluster, options)
    return {NODE_ID_LABEL: nodes[0] if len(nodes) == 1 else f"in({','.join(nodes)})"}


def _stranded(job: Job) -> str:
    return f"every node that could run it ({job.kind.label if job.kind else 'any kind'}) has left the cluster"


class RaySweep:
    """One sweep on a connected cluster: submit every point, receive each as it finishes."""

    def __init__(self, ray: Any, plan: SweepPlan, options: RayOptions, cluster: Cluster, say: ProgressFn) -> None:
        self.ray, self.plan, self.options, self.cluster, self.say = ray, plan, options, cluster, say
        self.out = Path(plan.out_root)
        self.shared = plan.collect_args()
        self.jobs = plan_jobs(plan, cluster, options)
        self.rows: dict[int, SweepRow] = {}
        self.transfers: list[Transfer] = []
        self.running_on: dict[int, str] = {}
        self.fetch_s = 0.0
        self.written = time.monotonic()

    def run(self) -> SweepResult:
        from ray.util.queue import Queue

        started = Queue(actor_options={"num_cpus": 0, "label_selector": {NODE_ID_LABEL: self._driver_node()}})
        task = self.ray.remote(run_point)
        pending: dict[Any, Job] = {}
        for job in self.jobs:
            if claim_point_dir(job.run_dir, self.plan):
                self.rows[job.index] = row_from_run(job.run_dir, job.point, "reused")
                self._event(job, True, f"reusing the complete run in {job.run_dir}")
                continue
            ref = task.options(
                num_cpus=0,
                resources={RESOURCE: 1},
                max_retries=self.options.max_retries,
                retry_exceptions=False,
                label_selector=_selector(job, self.cluster, self.options),
                name=f"hwprof {job.name}",
            ).remote(job.index, job.point, self.shared, self.plan.timeout_s, started)
            pending[ref] = job
        try:
            self._receive_all(pending, started)
        except KeyboardInterrupt:
            for ref in pending:
                self.ray.cancel(ref)
            self._write(interrupted=len(pending))
            raise
        return self._write()

    def _receive_all(self, pending: dict[Any, Job], started: Any) -> None:
        checked = time.monotonic()
        while pending:
            ready, _ = self.ray.wait(list(pending), num_returns=1, timeout=0.5)
            self._show_started(started)
            for ref in ready:
                self._receive(ref, pending.pop(ref))
            if time.monotonic() - checked > CHECK_NODES_S:
                self._fail_stranded(pending)
                checked = time.monotonic()

    def _show_started(self, started: Any) -> None:
        by_index = {j.index: j for j in self.jobs}
        while started.qsize():
            begun: PointStarted = started.get_nowait()
            again = " again" if begun.key in self.running_on else ""
            self.running_on[begun.key] = f"{begun.hostname} ({begun.node_id[:8]})"
            self._event(by_index[begun.key], False, f"running{again} on node {self.running_on[begun.key]}")

    def _receive(self, ref: Any, job: Job) -> None:
        t0 = time.monotonic()
        try:
            back: PointReturn = self.ray.get(ref)
        except self.ray.exceptions.TaskUnschedulableError as exc:
            self._done(job, point_row(job.point, job.run_dir, "failed", f"{_stranded(job)} ({first_line(exc)})"))
            return
        except self.ray.exceptions.RayError as exc:
            node = self.running_on.get(job.index, "no node")
            why = f"{first_line(exc)} (last on {node}; Ray retried it up to {self.options.max_retries} times)"
            self._done(job, point_row(job.point, job.run_dir, "failed", why))
            return
        fetch_s = time.monotonic() - t0
        t1 = time.monotonic()
        job.run_dir.parent.mkdir(parents=True, exist_ok=True)
        log_path = job.run_dir.with_name(job.run_dir.name + ".log")
        atomic_write_bytes(log_path, back.log)
        if back.archive:
            unpack(back.archive, job.run_dir)
        unpack_s = time.monotonic() - t1
        self.fetch_s += fetch_s + unpack_s
        sizes = (len(back.archive), back.run_bytes, back.files)
        times = (back.collect_s, back.pack_s, fetch_s, unpack_s)
        self.transfers.append(Transfer(job.name, back.hostname, back.node_id, *sizes, *times))
        t2 = time.monotonic()
        row = finished_row(job.point, job.run_dir, back.code, log_path, self.plan.timeout_s, None)
        self.transfers[-1].row_s = time.monotonic() - t2
        row.wall_s = back.collect_s
        if not row.host:
            row.host = back.hostname
            set_host(row, self.cluster.nodes.get(back.node_id, {}))
        self._done(job, row)

    def _done(self, job: Job, row: SweepRow) -> None:
        self.rows[job.index] = row
        where = f" on {row.host}" if row.host else ""
        took = f" in {row.wall_s:.0f} s" if row.wall_s is not None else ""
        self._event(job, True, f"{row.status}{where}{took}" + (f": {row.error}" if row.error else ""))
        if time.monotonic() - self.written > WRITE_EVERY_S:
            self._write()

    def _fail_stranded(self, pending: dict[Any, Job]) -> None:
        """A point whose every allowed node has left the cluster would wait forever: fail it with the reason."""
        alive = set(alive_nodes(self.ray))
        for ref, job in list(pending.items()):
            if not alive.intersection(allowed_nodes(job, self.cluster, self.options)):
                self.ray.cancel(ref, force=True)
                del pending[ref]
                self._done(job, point_row(job.point, job.run_dir, "failed", _stranded(job)))

    def _event(self, job: Job, done: bool, message: str) -> None:
        self.say(SweepEvent(job.index, len(self.jobs), job.name, done, message))

    def _driver_node(self) -> str:
        return str(self.ray.get_runtime_context().get_node_id())

    def _write(self, interrupted: int = 0) -> SweepResult:
        rows = [self.rows[i] for i in sorted(self.rows)]
        result = SweepResult(rows, self.out, self.shared, self.plan.skipped())
        kinds = ", ".join(f"{k.label} x{len(n)}" for k, n in self.cluster.kinds.items())
        result.notes.append(f"Ray cluster {self.options.address}: {len(self.cluster.nodes)} nodes ({kinds})")
        result.notes.extend(map(str, self.cluster.left_out))
        if self.transfers:
            shipped = sum(t.archive_bytes for t in self.transfers)
            result.notes.append(
                f"run directories shipped back: {len(self.transfers)}, {shipped / 1e6:.2f} MB as tar.gz "
                f"(of {sum(t.run_bytes for t in self.transfers) / 1e6:.2f} MB), "
                f"{self.fetch_s:.2f} s fetching and writing on the driver; nothing left out"
            )
        if interrupted:
            result.notes.append(
                f"interrupted: {interrupted} points cancelled; `hwprof sweep --resume {self.out}` runs them"
            )
        write_sweep(result)
        self.written = time.monotonic()
        atomic_write_text(self.out / TRANSFER_JSON, json.dumps([asdict(t) for t in self.transfers], indent=1) + "\n")
        return result


def run_ray_sweep(plan: SweepPlan, options: RayOptions, progress: ProgressFn | None = None) -> SweepResult:
    """Collect every point of the plan on the cluster at options.address, then build the table."""
    return connect_runner(plan, options)(plan, progress or (lambda _e: None))


def connect_runner(
    plan: SweepPlan, options: RayOptions, notice: Callable[[str], None] = lambda _line: None
) -> Callable[[SweepPlan, ProgressFn], SweepResult]:
    """Connect and check everything a cluster sweep needs before the first point (Ray, the cluster, a node
    able to take a point, the --hosts kinds); the runner returned runs the sweep and disconnects. notice: each
    node left out, as one line, before the first point."""
    plan.validate()
    ray = connect(options.address)
    try:
        cluster = discover(ray, options.address)
        plan_jobs(plan, cluster, options)
        for left_out in cluster.left_out:
            notice(str(left_out))
    except BaseException:
        ray.shutdown()
        raise

    def run(plan: SweepPlan, progress: ProgressFn) -> SweepResult:
        try:
            Path(plan.out_root).mkdir(parents=True, exist_ok=True)
            sweep = RaySweep(ray, plan, options, cluster, progress)
            write_plan(Path(plan.out_root), plan.to_dict(), options.to_dict())
            return sweep.run()
        finally:
            ray.shutdown()

    return run


def ray_runner(
    args: Any, recorded: dict[str, Any] | None, plan: SweepPlan, notice: Callable[[str], None] = lambda _line: None
) -> Callable[[SweepPlan, ProgressFn], SweepResult]:
    """The sweep runner for `hwprof sweep --ray ...` (or --resume of a sweep that ran on Ray), connected: the
    command line's cluster options, else the ones the sweep recorded."""
    rec = recorded or {}
    options = RayOptions(
        args.ray or rec.get("address") or "auto",
        per_host=args.per_host or bool(rec.get("per_host")),
        hosts=tuple(args.hosts or rec.get("hosts") or ()),
        max_retries=int(rec.get("max_retries", RayOptions.max_retries)),
    )
    return connect_runner(plan, options, notice)
