"""`hwprof sweep`, typed: SweepRequest is the one description of a sweep, made by the command line from its options
(hwprof.cli.sweep) and by the library from hwprof.run_sweep's keywords (hwprof.api.commands), checked once in
the same way; run_sweep_request runs it for both (hwprof.sweep: the points here or on Ray, the table), and
submit_sweep_request hands it to a Ray cluster as a job (the command line's --submit)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hwprof.analysis.sweep.rows import DEFAULT_PRECISION, DEFAULT_RUNTIME, NODE_THREADS
from hwprof.api.requests import csv_list
from hwprof.core.config import default_threads

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from hwprof.analysis.sweep.rows import SweepResult
    from hwprof.rundir.lock import RunDirLock
    from hwprof.schema.codec import JsonObject
    from hwprof.session.stopping import StopSignals
    from hwprof.sweep.points import ProgressFn, SweepPlan
    from hwprof.sweep.ray_job import JobRecord

SWEEP_FORMATS = ("rich", "markdown", "html")
LISTS = {
    "models": str, "runtimes": str, "precisions": str, "threads": int, "batch": int, "collect_args": str, "hosts": str,
}  # fmt: skip
"""The request's list fields and their items' type."""
COMMA_LISTS = ("models", "runtimes", "precisions", "hosts")
"""The lists the command line takes as one comma list (`--models yolov8n,yolov7`)."""
NODES_NEED_RAY = "--per-host and --hosts choose nodes of a Ray cluster: give --ray ADDRESS too"
"""--per-host or --hosts without a cluster: a new sweep's refusal, or a resumed one's that ran here."""
SCALARS = {"imgsz": int, "iters": int, "warmup": int, "device": str, "format": str}


@dataclass(frozen=True)
class SweepRequest:
    """`hwprof sweep`: the grid (models x runtimes x precisions x threads x batch), what every point's collect
    shares, where the points run (here, or a Ray cluster) and what is printed. Each field is the option of that
    name (`collect_args` the collect options after `--`)."""

    models: tuple[str, ...] = ()
    runtimes: tuple[str, ...] = (DEFAULT_RUNTIME,)
    precisions: tuple[str, ...] = (DEFAULT_PRECISION,)
    threads: tuple[int, ...] = ()
    """Torch thread counts; empty: this machine's CPUs (on Ray: each node's own)."""
    batch: tuple[int, ...] = (1,)
    device: str = "cpu"
    imgsz: int = 640
    iters: int = 5
    warmup: int = 1
    timeout: float | None = None
    """Seconds per point; None: no limit."""
    out: Path = Path("results") / "sweep"
    advise: bool = False
    """Every point's collect runs --advise."""
    collect_args: tuple[str, ...] = ()
    format: str = "rich"
    """The table printed at the end: rich, markdown, or html (only the path of OUT/sweep.html)."""
    ray: str | None = None
    """A Ray cluster's address (HOST:PORT or auto) to run each point on as a task; None: here."""
    per_host: bool = False
    hosts: tuple[str, ...] = ()
    resume: Path | None = None
    """Run the points of the sweep in this folder that are not complete, with its recorded options."""
    local: bool = False
    """With resume: run here even if the sweep used Ray."""
    submit: bool = False
    """With ray: submit the sweep as a Ray Job and return (the command line's; hwprof.run_sweep has none)."""

    def __post_init__(self) -> None:
        _check_types(self)
        if self.format not in SWEEP_FORMATS:
            raise ValueError(f"--format must be one of {', '.join(SWEEP_FORMATS)} (got {self.format!r})")
        if self.resume is not None and self.models:
            raise ValueError("--resume DIR runs the points of the sweep recorded in DIR: give no --models")
        if self.resume is None and not self.models:
            raise ValueError("sweep needs --models (or --resume DIR)")
        if self.submit and not self.ray:
            raise ValueError("--submit sends the sweep to a Ray cluster as a job: give --ray HOST:PORT too")
        if self.submit and self.resume is not None:
            raise ValueError("--submit starts a new sweep: --resume runs attached")
        if (self.per_host or self.hosts) and not self.ray and self.resume is None:
            raise ValueError(NODES_NEED_RAY)
        if self.resume is None:
            self.plan().validate()

    def plan(self) -> SweepPlan:
        """A new sweep's points and what their collects share (a resumed one's: resumed_plan)."""
        from hwprof.sweep.points import SweepPlan

        # on Ray a point without --threads uses the thread count of the node it runs on
        threads = self.threads or ((NODE_THREADS,) if self.ray else (default_threads(),))
        return SweepPlan(
            list(self.models),
            list(threads),
            list(self.batch),
            self.out,
            imgsz=self.imgsz,
            iters=self.iters,
            warmup=self.warmup,
            extra_args=list(self.collect_args),
            timeout_s=self.timeout,
            runtimes=list(self.runtimes),
            precisions=list(self.precisions),
            device=self.device,
            advise=self.advise,
        )


def _check_types(request: SweepRequest) -> None:
    """Each value of the type its option takes (the library's keywords are not converted by the parser): lists as
    tuples (a comma string of names as the command line takes it), paths as Path; ValueError naming the option
    otherwise."""
    for name, kind in LISTS.items():
        values = getattr(request, name)
        if isinstance(values, str) and name in COMMA_LISTS:
            values = csv_list(values)
        if isinstance(values, str) or not all(isinstance(v, kind) and not isinstance(v, bool) for v in values):
            what = "integers" if kind is int else "strings"
            raise ValueError(f"--{_option(name)} is a list of {what} (got {values!r})")
        object.__setattr__(request, name, tuple(values))
    for name, kind in SCALARS.items():
        value = getattr(request, name)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise ValueError(f"--{_option(name)} must be {'an integer' if kind is int else 'a string'} (got {value!r})")
    timeout = request.timeout
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)):
        raise ValueError(f"--timeout must be a number of seconds (got {timeout!r})")
    if request.ray is not None and not isinstance(request.ray, str):
        raise ValueError(f"--ray must be an address, HOST:PORT or auto (got {request.ray!r})")
    object.__setattr__(request, "out", Path(request.out))
    if request.resume is not None:
        object.__setattr__(request, "resume", Path(request.resume))


def _option(name: str) -> str:
    return name.replace("_", "-")


def resumed_plan(request: SweepRequest) -> tuple[SweepPlan, JsonObject | None]:
    """The sweep's plan and its recorded Ray options: those of the sweep in request.resume, else a new plan."""
    from hwprof.sweep.points import plan_from_file

    if request.resume is None:
        return request.plan(), None
    plan, ray = plan_from_file(request.resume)
    if request.advise and not plan.advise:
        raise ValueError(
            f"--resume {request.resume} runs with the sweep's recorded options, which have no --advise: "
            "advise its complete points with `hwprof advise RUN_DIR`, or start a new sweep with --advise"
        )
    return plan, ray


def checked_plan(request: SweepRequest) -> tuple[SweepPlan, JsonObject | None]:
    """resumed_plan, with every model known and the plan's GPU there, before any point runs."""
    from hwprof.workload.zoo import family_of

    plan, ray = resumed_plan(request)
    for model in plan.models:
        family_of(model)
    if plan.device != "cpu":
        from hwprof.hardware.gpu_device import require_cuda

        require_cuda(plan.device)
    return plan, ray


def run_sweep_request(request: SweepRequest, console: Console, stop: StopSignals) -> SweepResult:
    """Collect every point (here or on the Ray cluster), print the table, write sweep.json, sweep.csv,
    sweep.png and sweep.html. A stop signal ends the points in flight and the sweep, with the table of what
    finished (SweepResult.resume: the command that runs the rest)."""
    from hwprof.sweep.command import sweep

    if request.submit:
        raise ValueError("--submit hands the sweep to the cluster as a job: submit_sweep_request runs it")
    plan, ray = checked_plan(request)
    plan.validate()
    stop.forward_twice = True
    runner = _runner(request, plan, ray, console, stop)  # its refusals come before the folder is made
    lock = _claimed(plan.out_root)
    try:
        return sweep(plan, console, runner, format=request.format)
    finally:
        lock.release()


def _claimed(out: Path) -> RunDirLock:
    """The sweep's --out, locked as a collect's run directory is (hwprof.rundir.lock): a second sweep into it
    refuses at once naming the first, instead of both running its points (two sweeps into one folder ended with
    a completed point marked running in sweep.json and a point's log interleaved)."""
    from hwprof.core.folders import make_folder
    from hwprof.rundir.lock import RunDirBusy, RunDirLock

    make_folder(out, "--out")
    try:
        return RunDirLock(out, command="sweep", fix="choose another --out").acquire()
    except RunDirBusy as exc:
        raise ValueError(str(exc)) from None


def _runner(
    request: SweepRequest, plan: SweepPlan, ray: JsonObject | None, console: Console, stop: StopSignals
) -> Callable[[SweepPlan, ProgressFn], SweepResult]:
    """Where the points run: on this machine, or on the Ray cluster of --ray (or of the resumed sweep)."""
    from hwprof.sweep.points import run_sweep

    def local(p: SweepPlan, progress: ProgressFn) -> SweepResult:
        return run_sweep(p, progress, stop)

    if ray and request.local and ray.get("per_host"):
        raise ValueError("--local cannot resume a --per-host sweep: its points belong to kinds of cluster nodes")
    if request.ray or (ray and not request.local):
        from hwprof.sweep.ray import ray_runner

        def notice(line: str) -> None:
            console.print(line, highlight=False, markup=False)

        return ray_runner(plan, ray, notice, address=request.ray, per_host=request.per_host, hosts=request.hosts)
    if request.per_host or request.hosts:
        raise ValueError(NODES_NEED_RAY)
    return local


def submit_sweep_request(request: SweepRequest) -> tuple[JobRecord, int]:
    """`hwprof sweep ... --ray ADDRESS --submit`: the sweep checked as an attached one is, then submitted as a
    Ray Job (its record written into request.out); the record and the number of points."""
    from hwprof.sweep.ray_job import submit

    plan, _ray = checked_plan(request)
    return submit(plan, request.ray or "auto", request.per_host, request.hosts, request.out), len(plan.points())
