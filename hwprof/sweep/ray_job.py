"""Detached sweeps: `hwprof sweep ... --ray ADDRESS --submit` hands the sweep to the cluster as a Ray Job and
returns; `hwprof sweep-job status|logs|stop|fetch DIR` follow it from any machine that reaches the cluster.

The job's entrypoint is the ordinary attached sweep (`hwprof sweep ... --ray auto`), run by Ray's job server on
the head node, writing into ~/hwprof-sweeps/<job id> there; so the job does exactly what an attached sweep does,
and closing the submitting terminal changes nothing. DIR (the --out of the submit) holds ray_job.json, the
record that the other commands read, and receives what `fetch` brings back: the tables, the logs and every
finished point's run directory, packed on the job's node by a task pinned to it (fetch can run again as more
points finish; a run it holds already is not sent again).

`stop` is Ray's stop_job: the job's driver gets SIGTERM and stops the sweep as Ctrl-C does (every running
point's collect gets SIGINT and its run, finalised as interrupted, comes back to the head); Ray's job server is
told to wait STOP_WAIT_S for that before SIGKILL (RAY_JOB_STOP_WAIT_TIME_S in the job's environment).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hwprof.analysis.sweep.rows import NODE_THREADS
from hwprof.core.atomic import atomic_write_bytes, atomic_write_text
from hwprof.schema.check import Field, check_fields, read_json, read_json_object
from hwprof.sweep.points import SweepPlan
from hwprof.sweep.ray_connect import NODE_ID_LABEL, connect, discover
from hwprof.sweep.ray_env import hwprof_runtime_env
from hwprof.sweep.ray_logs import RayLogs
from hwprof.sweep.ray_point import pack, unpack

JOB_FILE = "ray_job.json"
JOB_ROOT = "~/hwprof-sweeps"
"""Where a submitted sweep writes on the job's node (the head): ~ is the home of the user Ray runs as."""
STOP_WAIT_S = 240
"""How long Ray's job server lets a stopped sweep finalise its running points before SIGKILL."""
ENDED = ("SUCCEEDED", "FAILED", "STOPPED")
AGENT_WAIT_S = 180.0
"""How long submit retries while the head's job agent is not up yet ("No available agent")."""
JOB_FIELDS = (
    Field("submission_id", (str,), "a job id", required=True),
    Field("address", (str,), "HOST:PORT", required=True),
    Field("dashboard", (str,), "a URL", required=True),
    Field("head_dir", (str,), "a path", required=True),
)
RUN_FILE = "run.json"


@dataclass(frozen=True)
class JobRecord:
    """DIR/ray_job.json: the submitted job, for status, logs, stop and fetch."""

    submission_id: str
    address: str
    """The cluster's GCS address (HOST:PORT), as given to --ray."""
    dashboard: str
    """The job server's URL (the dashboard's port on the head)."""
    head_dir: str
    """Where the sweep writes on the job's node (~ expanded there)."""
    entrypoint: str
    submitted_at: float

    def save(self, local: Path) -> Path:
        local.mkdir(parents=True, exist_ok=True)
        path = local / JOB_FILE
        atomic_write_text(path, json.dumps(asdict(self), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, local: Path) -> JobRecord:
        path = Path(local) / JOB_FILE
        if not path.exists():
            raise ValueError(f"{local}: no {JOB_FILE} there (not the --out of `hwprof sweep ... --submit`)")
        doc = read_json_object(path)
        check_fields(doc, JOB_FIELDS, str(path))
        return cls(
            doc["submission_id"], doc["address"], doc["dashboard"], doc["head_dir"], str(doc.get("entrypoint", "")),
            float(doc.get("submitted_at") or 0.0),
        )  # fmt: skip


def sweep_arguments(plan: SweepPlan, per_host: bool, hosts: tuple[str, ...]) -> list[str]:
    """The `hwprof sweep` options that give this plan (the job's entrypoint runs the same sweep attached)."""
    args = ["--models", ",".join(plan.models), "--runtimes", ",".join(plan.runtimes)]
    args += ["--precisions", ",".join(plan.precisions), "--batch", ",".join(map(str, plan.batches))]
    if list(plan.threads) != [NODE_THREADS]:
        args += ["--threads", ",".join(map(str, plan.threads))]
    args += ["--device", plan.device, "--imgsz", str(plan.imgsz), "--iters", str(plan.iters)]
    args += ["--warmup", str(plan.warmup)]
    if plan.timeout_s is not None:
        args += ["--timeout", str(plan.timeout_s)]
    if plan.advise:
        args.append("--advise")
    if per_host:
        args.append("--per-host")
    if hosts:
        args += ["--hosts", ",".join(hosts)]
    return args + (["--", *plan.extra_args] if plan.extra_args else [])


def _dashboard(ray: Any, address: str) -> str:
    """The job server's URL: the dashboard's port, on the host of the address given (the head's own view of
    its dashboard says 127.0.0.1, which another machine cannot use)."""
    from ray._private.worker import get_dashboard_url

    url = str(get_dashboard_url() or "")
    if not url:
        raise ValueError(
            f"the cluster at {address} runs no dashboard, which Ray Jobs need: start its head with "
            "`ray start --head --include-dashboard=true` (and `pip install 'ray[default]'`)"
        )
    host, _, port = url.rpartition(":")
    hosts = [host]
    if address not in ("auto", "") and "://" not in address:
        hosts.insert(0, address.rpartition(":")[0])
    for candidate in hosts:  # the head's dashboard listens on localhost unless started with --dashboard-host
        with contextlib.suppress(OSError):
            socket.create_connection((candidate, int(port)), timeout=3).close()
            return f"http://{candidate}:{port}"
    raise ValueError(
        f"the cluster's job server (dashboard port {port}) cannot be reached from here at {' or '.join(hosts)}: "
        "start the head with `--dashboard-host 0.0.0.0`, or submit from the head"
    )


JOB_API_WAIT_S = 20.0
"""How long a job server that answers but has no Jobs API yet (its version check a 404) is waited for: the head's
dashboard loads its job module after it starts listening (a fresh clone's suite submitted 10 s after `ray start`
and was refused with 'Version check returned 404')."""


def job_client(dashboard: str) -> Any:
    from ray.job_submission import JobSubmissionClient

    deadline = time.monotonic() + JOB_API_WAIT_S
    while True:
        try:
            return JobSubmissionClient(dashboard)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            starting = "404" in str(exc) and time.monotonic() < deadline
            if not starting:
                raise ValueError(f"no Ray job server at {dashboard}: {str(exc).splitlines()[0]}") from None
            time.sleep(0.5)


def submit(plan: SweepPlan, address: str, per_host: bool, hosts: tuple[str, ...], local: Path) -> JobRecord:
    """Check the cluster as an attached sweep does (nodes, kinds), submit the sweep as a Ray Job, and write
    the record into local."""
    from hwprof.sweep.ray_plan import RayOptions, plan_jobs

    plan.validate()
    if (local / JOB_FILE).exists() or (local / "sweep.json").exists():
        raise ValueError(f"{local} holds a sweep already: give --out a new folder")
    logs = RayLogs().start()
    try:
        ray = connect(address)
        try:
            cluster = discover(ray, address)
            plan_jobs(plan, cluster, RayOptions(address, per_host=per_host, hosts=hosts))
            dashboard = _dashboard(ray, address)
        finally:
            ray.shutdown()
    finally:
        logs.stop(keep=False)
    job_id = f"hwprof-sweep-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    head_dir = f"{JOB_ROOT}/{job_id}"
    command = ["python", "-P", "-m", "hwprof", "sweep", "--ray", "auto", *sweep_arguments(plan, per_host, hosts)]
    # --out unquoted: the job server runs the entrypoint in a shell (with the head's PATH), which expands ~
    entrypoint = f"{shlex.join(command[:7])} --out {head_dir} {shlex.join(command[7:])}"
    client = job_client(dashboard)
    # this exact hwprof for the job's driver on the head and every task it starts (hwprof.sweep.ray_env)
    runtime_env = hwprof_runtime_env()
    env_vars = {"RAY_JOB_STOP_WAIT_TIME_S": str(STOP_WAIT_S), "PYTHONUNBUFFERED": "1", "COLUMNS": "160"}
    end = time.monotonic() + AGENT_WAIT_S
    while True:
        try:
            client.submit_job(
                entrypoint=entrypoint,
                submission_id=job_id,
                runtime_env={**runtime_env, "env_vars": env_vars},
                metadata={"hwprof_out": head_dir},
            )
            break
        except RuntimeError as exc:  # a head just started: its job agent comes up some seconds after the dashboard
            if "No available agent" not in str(exc) or time.monotonic() > end:
                raise ValueError(
                    f"the job server at {dashboard} refused the sweep: {str(exc).splitlines()[0]}"
                ) from None
            time.sleep(2.0)
    record = JobRecord(job_id, address, dashboard, head_dir, entrypoint, time.time())
    record.save(local)
    return record


@dataclass(frozen=True)
class JobProgress:
    """What the job's log says of its points: the last [k/n] line and the points finished."""

    total: int
    finished: int
    last: str


POINT_LINE = re.compile(r"^\[(\d+)/(\d+)\] (\S+): (.*)$")
FINISHED = ("complete", "reused", "failed", "timeout", "interrupted")


def progress_of(log: str) -> JobProgress:
    total, done, last = 0, set(), ""
    for line in log.splitlines():
        m = POINT_LINE.match(line.strip())
        if not m:
            continue
        total, last = int(m.group(2)), line.strip()
        if m.group(4).startswith(FINISHED):
            done.add(m.group(3))
    return JobProgress(total, len(done), last)


def status(local: Path) -> tuple[str, str]:
    """(Ray's status of the job, one line of what it has done)."""
    record = JobRecord.load(local)
    client = job_client(record.dashboard)
    info = client.get_job_info(record.submission_id)
    progress = progress_of(client.get_job_logs(record.submission_id))
    since = (time.time() - info.start_time / 1e3) if info.start_time else 0.0
    took = (info.end_time - info.start_time) / 1e3 if info.end_time and info.start_time else since
    points = f"{progress.finished} of {progress.total} points finished" if progress.total else "no point started yet"
    line = f"job {record.submission_id}: {info.status} after {took:.0f} s; {points}"
    if info.message and info.status in ("FAILED", "STOPPED"):
        line += f" ({info.message.strip().splitlines()[0]})"
    return str(info.status), line + (f"; last: {progress.last}" if progress.last else "")


def logs(local: Path, follow: bool, write: Any) -> None:
    record = JobRecord.load(local)
    client = job_client(record.dashboard)
    if not follow:
        write(client.get_job_logs(record.submission_id))
        return
    import asyncio

    async def tail() -> None:
        async for chunk in client.tail_job_logs(record.submission_id):
            write(chunk)

    asyncio.run(tail())


def stop(local: Path, say: Any, timeout_s: float = STOP_WAIT_S + 30) -> str:
    """Stop the job (its running points are stopped as Ctrl-C stops them and kept as interrupted runs) and
    wait for it to end; returns its final status."""
    record = JobRecord.load(local)
    client = job_client(record.dashboard)
    if (state := str(client.get_job_status(record.submission_id))) in ENDED:
        return state
    client.stop_job(record.submission_id)
    say(f"stopping job {record.submission_id}: its running points finalise their runs as interrupted")
    end = time.monotonic() + timeout_s
    while (state := str(client.get_job_status(record.submission_id))) not in ENDED:
        if time.monotonic() > end:
            raise ValueError(f"job {record.submission_id} is still {state} {timeout_s:.0f} s after the stop")
        time.sleep(1.0)
    return state


@dataclass
class Fetched:
    """What one fetch brought: the sweep's files and the runs the local folder did not hold yet."""

    files: dict[str, bytes]
    """Path relative to the sweep folder -> content, for everything outside a run directory."""
    runs: dict[str, bytes]
    """Run directory relative to the sweep folder -> tar.gz (hwprof.sweep.ray_point.pack)."""
    pending: list[str]
    """Run directories still being written (a point running or arriving)."""


def _final(run_json: Path) -> bool:
    """run.json is there and no longer says running (a point still writing its run directory is pending)."""
    from hwprof.schema.check import RunDirError
    from hwprof.schema.run import RunDoc

    try:
        return RunDoc.read(read_json(run_json), str(run_json)).status != "running"
    except RunDirError:
        return False


def run_dirs(root: Path) -> set[Path]:
    """The run directories of a sweep folder: its points', and its kinds' points' with --per-host."""
    return {p.parent for pattern in ("*/" + RUN_FILE, "*/*/" + RUN_FILE) for p in root.glob(pattern)}


def _runs_in(root: Path, paths: list[Path]) -> set[Path]:
    """run_dirs, from one listing of the folder: the runs are the folders of its run.json files, at the depths
    run_dirs reads."""
    return {p.parent for p in paths if p.name == RUN_FILE and len(p.relative_to(root).parts) in (2, 3)}


def _listing(root: Path) -> list[Path]:
    """Every file under root. os.walk, not rglob: a folder renamed while it is walked (a run landing) is
    skipped, where rglob raises."""
    return sorted(Path(top, name) for top, _, names in os.walk(root) for name in names)


def collect_finished(head_dir: str, have: list[str]) -> Fetched:
    """The Ray task on the job's node: every finished run under head_dir that is not in `have`, and the files
    around them (tables, logs, plan, transfer record).

    One listing decides both what is a run and what is a loose file: a point that lands while the folder is
    read (its run directory renamed into place) is either seen whole as a run or not at all, never as loose
    files without their run (which a later fetch would then take for a run already held)."""
    root = Path(head_dir).expanduser()
    out = Fetched({}, {}, [])
    if not root.is_dir():
        return out
    listing = _listing(root)
    runs = _runs_in(root, listing)
    for run_dir in sorted(runs):
        rel = str(run_dir.relative_to(root))
        if run_dir.name.endswith(".receiving") or not _final(run_dir / RUN_FILE):
            out.pending.append(rel)
        elif rel not in have:
            out.runs[rel] = pack(run_dir)[0]
    for path in listing:
        arriving = any(p.name.endswith(".receiving") for p in path.relative_to(root).parents)
        if arriving or any(d in path.parents for d in runs) or not path.is_file():
            continue
        try:
            out.files[str(path.relative_to(root))] = path.read_bytes()
        except FileNotFoundError:  # replaced while read (an atomic rewrite of the tables): the next fetch has it
            continue
    return out


def fetch(local: Path) -> tuple[Fetched, str]:
    """Copy what the job has finished into local; returns what came and the job's status."""
    record = JobRecord.load(local)
    client = job_client(record.dashboard)
    info = client.get_job_info(record.submission_id)
    node = getattr(info, "driver_node_id", None)
    if not node:
        raise ValueError(f"job {record.submission_id} has no driver node yet ({info.status}): fetch again later")
    have = sorted(str(run_dir.relative_to(local)) for run_dir in run_dirs(local) if _final(run_dir / RUN_FILE))
    logs = RayLogs().start()
    try:
        ray = connect(record.address)
        try:
            task = ray.remote(collect_finished).options(num_cpus=0, label_selector={NODE_ID_LABEL: node})
            got: Fetched = ray.get(task.remote(record.head_dir, have), timeout=600)
        finally:
            ray.shutdown()
    finally:
        logs.stop(keep=False)
    for rel, archive in got.runs.items():
        target = local / rel
        if target.exists():
            shutil.rmtree(target)
        unpack(archive, target)
    for rel, data in got.files.items():
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(local / rel, data)
    return got, str(info.status)
