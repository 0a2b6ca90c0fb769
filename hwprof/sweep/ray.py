"""`hwprof sweep --ray ADDRESS`: every point a Ray task that runs the ordinary `hwprof collect` on a worker node.

Ray schedules; hwprof only asks. A point holds a whole node through the custom resource `hwprof: 1`, which
the operator declares once on each node that may measure (`ray start ... --resources '{"hwprof": 1}'`):
one point per node at a time whatever the node's core count, and nodes without it (a head node that runs
the driver, say) never measure. Asking for the node's whole CPU count instead would pin a point to nodes
with at least that many CPUs and leave the rest of a larger node free for a second point.

With --per-host every point runs once on each kind of machine (hwprof.core.host_kinds), restricted by a label
selector to the nodes of that kind, so that Ray's own retry after a node dies (max_retries) lands on another
node of the same kind. Each finished point's run directory comes back through the object store as a
tar.gz and is written under the sweep's folder at once (ray.wait loop), with its collect log.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hwprof.analysis.sweep.rows import SweepResult, SweepRow, point_row, row_from_run, set_host
from hwprof.rundir.logs import write_log
from hwprof.rundir.sweep_files import read_transfers, write_transfers
from hwprof.schema.codec import JsonObject
from hwprof.schema.host import HostDoc
from hwprof.sweep.point_keeper import KILL_GRACE_S, STOP_GRACE_S
from hwprof.sweep.points import (
    ProgressFn,
    SweepEvent,
    SweepPlan,
    claim_point_dir,
    finished_row,
    resume_command,
    write_sweep,
)
from hwprof.sweep.ray_connect import (
    NODE_ID_LABEL,
    RESOURCE,
    Cluster,
    JoinError,
    alive_hosts,
    connect,
    discover,
    first_line,
    import_ray,
)
from hwprof.sweep.ray_logs import DRIVER_LOG, RAY_LOGS_DIR, RayLogs
from hwprof.sweep.ray_plan import Job, RayOptions, allowed_nodes, plan_jobs, selector, stranded
from hwprof.sweep.ray_point import PointReturn, PointStarted, SweepControl, run_point, unpack
from hwprof.sweep.ray_record import SweepRecord
from hwprof.sweep.resume import write_plan_json

CHECK_NODES_S = 5.0
STOP_WAIT_S = STOP_GRACE_S + KILL_GRACE_S + 20.0
"""After a stop, how long the driver waits for the running points' interrupted runs to come back."""
COMPLETE = ("complete", "reused")
WRITE_EVERY_S = 10.0
"""sweep.json is rewritten at most this often while points arrive (each point's run directory at once): a
table of 2,000 rows rewritten after every point would write gigabytes."""


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
    received_at: float = 0.0
    """time.time() on the driver when the point came back (a resumed sweep appends to the record)."""


class RaySweep:
    """One sweep on a connected cluster: submit every point, receive each as it finishes."""

    def __init__(self, ray: Any, plan: SweepPlan, options: RayOptions, cluster: Cluster, say: ProgressFn) -> None:
        self.ray, self.plan, self.options, self.cluster, self.say = ray, plan, options, cluster, say
        self.out = Path(plan.out_root)
        self.shared = plan.collect_args()
        self.jobs = plan_jobs(plan, cluster, options)
        self.rows: dict[int, SweepRow] = {}
        self.transfers: list[Transfer] = []
        self.earlier_transfers = read_transfers(self.out) if plan.resume else []
        self.running_on: dict[int, str] = {}
        self.record = SweepRecord({n: str(host.hostname or "") for n, host in cluster.nodes.items()})
        self.fetch_s = 0.0
        self.cleaned: list[str] = []
        """host:folder of every scratch folder of a gone point that a point of this sweep removed."""
        self.written = time.monotonic()

    def run(self) -> SweepResult:
        control_actor = self.ray.remote(SweepControl).options(
            num_cpus=0, label_selector={NODE_ID_LABEL: self._driver_node()}
        )
        control = control_actor.remote()
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
                label_selector=selector(job, self.cluster, self.options),
                name=f"hwprof {job.name}",
            ).remote(job.index, job.point, self.shared, self.plan.timeout_s, control)
            pending[ref] = job
        try:
            self._receive_all(pending, control)
        except KeyboardInterrupt:
            return self._interrupted(self._stop_points(pending, control))
        return self._write()

    def _stop_points(self, pending: dict[Any, Job], control: Any) -> list[Job]:
        """A stop (Ctrl-C, SIGTERM, `hwprof sweep-job stop`): points not started are cancelled, running points
        are told to stop through the control actor and their runs, finalised as interrupted, are received; a
        second stop signal, or STOP_WAIT_S, cancels what is left (its keeper removes its scratch folder).
        Returns the points cancelled."""
        control.stop.remote()
        self._show_started(control)
        cancelled = []
        for ref, job in list(pending.items()):
            if job.index not in self.running_on:
                self.ray.cancel(ref)
                cancelled.append(pending.pop(ref))
        if pending:
            self.say(SweepEvent(0, len(self.jobs), "sweep", False, f"stopping {len(pending)} running points"))
        with contextlib.suppress(KeyboardInterrupt):
            self._receive_all(pending, control, deadline=time.monotonic() + STOP_WAIT_S)
        for ref in pending:
            self.ray.cancel(ref, force=True)
        return cancelled + list(pending.values())

    def _interrupted(self, cancelled: list[Job]) -> SweepResult:
        """Ctrl-C (or SIGTERM, SIGHUP): the table of what finished, a row for each point that had started
        (with its attempts), and the command that runs the rest."""
        now = time.time()
        for job in cancelled:
            self.record.ended(job.index, "cancelled: the sweep was stopped", now)
            if self.record.attempts.get(job.index):
                self.rows[job.index] = self._with_attempts(
                    job, point_row(job.point, job.run_dir, "interrupted", "cancelled when the sweep was stopped")
                )
        done = {j.index for j in self.jobs if j.index in self.rows and self.rows[j.index].status in COMPLETE}
        return self._write(interrupted=len(self.jobs) - len(done))

    def _receive_all(self, pending: dict[Any, Job], control: Any, deadline: float | None = None) -> None:
        checked = time.monotonic()
        while pending and (deadline is None or time.monotonic() < deadline):
            ready, _ = self.ray.wait(list(pending), num_returns=1, timeout=0.5)
            self._show_started(control)
            for ref in ready:
                self._receive(ref, pending.pop(ref))
            if time.monotonic() - checked > CHECK_NODES_S:
                self._failstranded(pending, self._check_nodes())
                checked = time.monotonic()

    def _show_started(self, control: Any) -> None:
        by_index = {j.index: j for j in self.jobs}
        begun: PointStarted
        for begun in self.ray.get(control.take.remote()):
            again = " again" if begun.key in self.running_on else ""
            if again:  # the earlier attempt was lost: is its node gone?
                self._check_nodes()
            n = self.record.started(begun.key, begun.node_id, begun.hostname, begun.at)
            self.running_on[begun.key] = f"{begun.hostname} ({begun.node_id[:8]})"
            attempt = f" (attempt {n})" if n > 1 else ""
            self._event(by_index[begun.key], False, f"running{again} on node {self.running_on[begun.key]}{attempt}")

    def _receive(self, ref: Any, job: Job) -> None:
        t0 = time.monotonic()
        try:
            back: PointReturn = self.ray.get(ref)
        except self.ray.exceptions.TaskUnschedulableError as exc:
            self.record.ended(job.index, f"failed: {first_line(exc)}", time.time())
            self._done(job, point_row(job.point, job.run_dir, "failed", f"{stranded(job)} ({first_line(exc)})"))
            return
        except self.ray.exceptions.RayError as exc:
            self._check_nodes()
            self.record.ended(job.index, f"failed: {first_line(exc)}", time.time())
            node = self.running_on.get(job.index, "no node")
            why = f"{first_line(exc)} (last on {node}; Ray retried it up to {self.options.max_retries} times)"
            self._done(job, point_row(job.point, job.run_dir, "failed", why))
            return
        fetch_s = time.monotonic() - t0
        t1 = time.monotonic()
        job.run_dir.parent.mkdir(parents=True, exist_ok=True)
        log_path = job.run_dir.with_name(job.run_dir.name + ".log")
        write_log(log_path, back.log)
        if back.archive:
            unpack(back.archive, job.run_dir)
        unpack_s = time.monotonic() - t1
        self.fetch_s += fetch_s + unpack_s
        sizes = (len(back.archive), back.run_bytes, back.files)
        times = (back.collect_s, back.pack_s, fetch_s, unpack_s)
        self.transfers.append(Transfer(job.name, back.hostname, back.node_id, *sizes, *times, received_at=time.time()))
        self.cleaned.extend(f"{back.hostname}:{name}" for name in back.cleaned)
        outcome = (
            "stopped by the sweep" if back.stopped
            else "finished" if back.code == 0
            else "timed out" if back.code is None
            else f"collect exited {back.code}"
        )  # fmt: skip
        self.record.returned(job.index, back.node_id, back.hostname, back.started_at, back.ended_at, outcome)
        t2 = time.monotonic()
        if back.stopped and not (job.run_dir / "run.json").is_file():
            when = (
                f"{back.collect_s:.0f} s into its collect, before it wrote" if back.collect_s else "before its collect"
            )
            row = point_row(job.point, job.run_dir, "interrupted", f"the sweep stopped {when} a run directory")
        else:
            row = finished_row(job.point, job.run_dir, back.code, log_path, self.plan.timeout_s, None)
        self.transfers[-1].row_s = time.monotonic() - t2
        row.wall_s = back.collect_s
        if not row.host:
            row.host = back.hostname
            set_host(row, self.cluster.nodes.get(back.node_id) or HostDoc())
        self._done(job, row)

    def _with_attempts(self, job: Job, row: SweepRow) -> SweepRow:
        """The row's attempts and node; a row without a run (failed, interrupted) gets that node's host."""
        row.node_id = self.record.last_node(job.index)
        row.attempts = self.record.attempts_json(job.index)
        if not row.host and row.node_id in self.cluster.nodes:
            set_host(row, self.cluster.nodes[row.node_id])
        return row

    def _done(self, job: Job, row: SweepRow) -> None:
        self.rows[job.index] = self._with_attempts(job, row)
        where = f" on {row.host}" if row.host else ""
        took = f" in {row.wall_s:.0f} s" if row.wall_s is not None else ""
        tries = f" (attempt {len(row.attempts)}; see the notes)" if len(row.attempts) > 1 else ""
        self._event(job, True, f"{row.status}{where}{took}{tries}" + (f": {row.error}" if row.error else ""))
        if time.monotonic() - self.written > WRITE_EVERY_S:
            self._write()

    def _check_nodes(self) -> set[str]:
        """The measuring nodes alive now; a node that left or joined goes in the record (and the notes)."""
        hosts = alive_hosts(self.ray)
        names = {j.index: j.name for j in self.jobs}
        for change in self.record.nodes_now(set(hosts), time.time(), names, hosts):
            self.say(SweepEvent(0, len(self.jobs), "cluster", False, change.text()))
        return set(hosts)

    def _failstranded(self, pending: dict[Any, Job], alive: set[str]) -> None:
        """A point whose every allowed node has left the cluster would wait forever: fail it with the reason."""
        for ref, job in list(pending.items()):
            if not alive.intersection(allowed_nodes(job, self.cluster, self.options)):
                self.ray.cancel(ref, force=True)
                del pending[ref]
                self.record.ended(job.index, "cancelled: every node that could run it left", time.time())
                self._done(job, point_row(job.point, job.run_dir, "failed", stranded(job)))

    def _event(self, job: Job, done: bool, message: str) -> None:
        self.say(SweepEvent(job.index, len(self.jobs), job.name, done, message))

    def _driver_node(self) -> str:
        return str(self.ray.get_runtime_context().get_node_id())

    def _write(self, interrupted: int = 0) -> SweepResult:
        self._check_nodes()
        rows = [self.rows[i] for i in sorted(self.rows)]
        result = SweepResult(rows, self.out, self.shared, self.plan.skipped())
        kinds = ", ".join(f"{k.label} x{len(n)}" for k, n in self.cluster.kinds.items())
        result.notes.append(self.record.node_note(self.options.address, kinds))
        result.notes.extend(map(str, self.cluster.left_out))
        result.notes.append(f"Ray's own messages on the driver: {self.out / RAY_LOGS_DIR / DRIVER_LOG}")
        if self.transfers:
            shipped = sum(t.archive_bytes for t in self.transfers)
            result.notes.append(
                f"run directories shipped back: {len(self.transfers)}, {shipped / 1e6:.2f} MB as tar.gz "
                f"(of {sum(t.run_bytes for t in self.transfers) / 1e6:.2f} MB), "
                f"{self.fetch_s:.2f} s fetching and writing on the driver; nothing left out"
            )
        if self.cleaned:
            result.notes.append(
                f"removed {len(self.cleaned)} scratch folders left on nodes by points that are gone: "
                + ", ".join(self.cleaned)
            )
        if interrupted:
            result.resume = resume_command(self.out)
            result.notes.append(
                f"interrupted: {interrupted} points did not complete (a running point was stopped and its run kept "
                f"as interrupted); `{result.resume}` runs them"
            )
        write_sweep(result)
        self.written = time.monotonic()
        transfers = self.earlier_transfers + [asdict(t) for t in self.transfers]
        write_transfers(self.out, transfers)
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
    import_ray()
    logs = RayLogs().start()
    ray = None
    try:
        ray = connect(options.address)
        cluster = discover(ray, options.address)
        plan_jobs(plan, cluster, options)
        for left_out in cluster.left_out:
            notice(str(left_out))
    except BaseException as exc:
        if ray is not None:
            ray.shutdown()
        kept = logs.stop(keep=isinstance(exc, JoinError))
        if kept is not None and isinstance(exc, JoinError):
            raise ValueError(f"{exc} (Ray's messages: {kept})") from None
        raise

    def run(plan: SweepPlan, progress: ProgressFn) -> SweepResult:
        try:
            Path(plan.out_root).mkdir(parents=True, exist_ok=True)
            logs.move_to(Path(plan.out_root))
            sweep = RaySweep(ray, plan, options, cluster, progress)
            write_plan_json(Path(plan.out_root), plan.to_dict(), options.to_dict())
            return sweep.run()
        finally:
            ray.shutdown()
            logs.stop()

    return run


def ray_runner(
    plan: SweepPlan,
    recorded: JsonObject | None,
    notice: Callable[[str], None] = lambda _line: None,
    *,
    address: str | None = None,
    per_host: bool = False,
    hosts: Sequence[str] = (),
) -> Callable[[SweepPlan, ProgressFn], SweepResult]:
    """The sweep runner for `hwprof sweep --ray ADDRESS` (or --resume of a sweep that ran on Ray), connected: the
    cluster options asked for (address, per_host, hosts), else the ones the sweep recorded."""
    rec = recorded or {}
    options = RayOptions(
        address or rec.get("address") or "auto",
        per_host=per_host or bool(rec.get("per_host")),
        hosts=tuple(hosts or rec.get("hosts") or ()),
        max_retries=int(rec.get("max_retries", RayOptions.max_retries)),
    )
    return connect_runner(plan, options, notice)
