"""One `hwprof collect` per (model, runtime, precision, threads, batch) point, then one table.

Each point is its own `python -P -m hwprof collect ... --out DIR --no-report` child process, so a
point that crashes or hangs leaves the others intact; its log is `<out_root>/<point>.log`. A
point whose run directory already holds a complete run is reused (resume a long sweep by
running the same command again). The table is the seed reports' model comparison, automated:
latency, FPS, params, size, GFLOPs, % of peak, arithmetic intensity, bound, energy per image,
and for every point not run by torch in fp32, what executed and its output against torch fp32 (the
largest difference of the raw head and the detection counts) beside its speed. It is written to
`<out_root>/sweep.json` and `sweep.csv`.

Runtimes and precisions are dimensions like threads: a (runtime, precision) pair the runtime does
not run (onnxruntime bf16, say) is skipped with a note, and only when no pair is valid is the
sweep refused.

Unless the extra collect arguments choose collectors themselves (--only / --skip), each point runs
only `--only timing,flops,rapl`: the table needs latency, FLOPs and energy, not the profilers,
and the layers, trace and Scalene passes would multiply the sweep's time by about four.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from hwprof.analysis.sweep.advice import ADVISE_FLAG
from hwprof.analysis.sweep.rows import (
    DEFAULT_PRECISION,
    DEFAULT_RUNTIME,
    NODE_THREADS,
    SweepPoint,
    SweepResult,
    SweepRow,
    load_sweep,
    point_name,
    point_row,
    row_from_run,
    sweep_files,
)
from hwprof.core.runtime_names import PRECISIONS, RUNTIME_PRECISIONS, RUNTIMES, runs_on, supported_text
from hwprof.core.uservalue import shown
from hwprof.rundir.logs import child_log, log_lines
from hwprof.rundir.names import SWEEP_CSV, SWEEP_JSON
from hwprof.rundir.writer import write_sweep_files
from hwprof.schema.codec import JsonObject
from hwprof.schema.run import RunDoc
from hwprof.session.stopping import StopSignals
from hwprof.sweep.resume import read_plan_json, set_aside, write_plan_json

if TYPE_CHECKING:
    from hwprof.hardware.machine import Peaks

__all__ = [
    "SWEEP_CSV",
    "SWEEP_JSON",
    "SweepEvent",
    "SweepPlan",
    "SweepPoint",
    "SweepResult",
    "SweepRow",
    "collect_command",
    "load_sweep",
    "point_name",
    "row_from_run",
    "run_sweep",
    "write_sweep",
]


def write_sweep(result: SweepResult) -> list[Path]:
    """sweep.json, sweep.csv (and sweep_advice.csv) of a sweep, through the run directory's writer."""
    return write_sweep_files(result.out_root, sweep_files(result))


DEFAULT_COLLECTORS = "timing,flops,rapl"
GPU_COLLECTORS = "timing,flops,nvml,cuda_graph"
"""A GPU point: CUDA-synchronised timing, FLOPs, NVML energy, and the CUDA-graph forward (launch overhead)."""
POINT_GRACE_S = 60.0
"""How long a point's collect has, after SIGTERM at its time-out, to finalise its run directory."""
OWN_OPTIONS = ("--model", "--threads", "--batch", "--out", "--runtime", "--precision", "--device")
"""collect options the sweep sets per point: not allowed among the extra arguments."""


@dataclass(frozen=True)
class SweepPlan:
    """The points (models x runtimes x precisions x threads x batches) and what every point's collect shares."""

    models: Sequence[str]
    threads: Sequence[int]
    batches: Sequence[int]
    out_root: Path
    imgsz: int = 640
    iters: int = 5
    warmup: int = 1
    extra_args: Sequence[str] = ()
    """More `collect` options for every point."""
    timeout_s: float | None = None
    """Per point."""
    reuse: bool = True
    runtimes: Sequence[str] = (DEFAULT_RUNTIME,)
    precisions: Sequence[str] = (DEFAULT_PRECISION,)
    device: str = "cpu"
    """cpu or cuda[:N], for every point (on a GPU, fp16 joins the torch precisions and only torch runs)."""

    def _runs(self, runtime: str, precision: str) -> bool:
        return runs_on(runtime, precision, self.device)

    resume: bool = False
    """Rename an incomplete point's run directory aside and collect the point again (`sweep --resume`)."""
    advise: bool = False
    """`sweep --advise`: every point's collect runs --advise, so that each run directory has its advice.json
    (recorded in sweep_plan.json, so a resumed sweep advises its remaining points too)."""

    def validate(self) -> None:
        if not self.models or not self.threads or not self.batches:
            raise ValueError("sweep needs at least one model, one thread count and one batch size")
        if not self.runtimes or not self.precisions:
            raise ValueError("sweep needs at least one runtime and one precision")
        if any(t < 1 and t != NODE_THREADS for t in self.threads) or any(b < 1 for b in self.batches):
            raise ValueError("thread counts and batch sizes must be at least 1")
        unknown = [r for r in self.runtimes if r not in RUNTIMES]
        if unknown:
            raise ValueError(f"unknown runtime '{shown(unknown[0])}'; known: {', '.join(RUNTIMES)}")
        unknown = [p for p in self.precisions if p not in PRECISIONS]
        if unknown:
            raise ValueError(f"unknown precision '{shown(unknown[0])}'; known: {', '.join(PRECISIONS)}")
        own = [a.split("=")[0] for a in self.extra_args if a.split("=")[0] in OWN_OPTIONS]
        if own:
            raise ValueError(
                f"{own[0]} is set by the sweep for each point: use --models, --runtimes, --precisions, "
                "--threads, --batch and --out of `hwprof sweep` instead"
            )
        if not self.pairs():
            raise ValueError(
                f"no runtime in {', '.join(self.runtimes)} runs a precision in {', '.join(self.precisions)}; "
                f"supported: {supported_text()}"
            )

    def to_dict(self) -> dict[str, Any]:
        """Every field, as JSON values (sweep_plan.json, read back by plan_from_file)."""
        return {
            k: (str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v)
            for k, v in asdict(self).items()
        }

    def pairs(self) -> list[tuple[str, str]]:
        """The (runtime, precision) pairs the runtimes run, in the order asked."""
        pairs = itertools.product(self.runtimes, self.precisions)
        return [(r, p) for r, p in pairs if self._runs(r, p)]

    def skipped(self) -> list[str]:
        """One line per (runtime, precision) pair asked for that its runtime does not run."""
        return [
            f"skipped {r} {p}: {r} runs "
            + (", ".join(q for q in RUNTIME_PRECISIONS[r] if self._runs(r, q)) or "nothing")
            + ("" if self.device == "cpu" else f" on {self.device}")
            for r, p in itertools.product(self.runtimes, self.precisions)
            if r in RUNTIME_PRECISIONS and not self._runs(r, p)
        ]

    def points(self) -> list[SweepPoint]:
        """Every point in the order they are collected: models x runtimes x precisions x threads x batches."""
        return [
            SweepPoint(model, runtime, precision, threads, batch)
            for model in self.models
            for runtime, precision in self.pairs()
            for threads, batch in itertools.product(self.threads, self.batches)
        ]

    def collect_args(self) -> list[str]:
        """The options every point's collect shares, with the default collectors unless chosen."""
        chooses = any(a in ("--only", "--skip") or a.startswith(("--only=", "--skip=")) for a in self.extra_args)
        collectors = [] if chooses else ["--only", DEFAULT_COLLECTORS if self.device == "cpu" else GPU_COLLECTORS]
        shared = ["--imgsz", str(self.imgsz), "--iters", str(self.iters), "--warmup", str(self.warmup)]
        if self.device != "cpu":
            shared += ["--device", self.device]
        advise = [ADVISE_FLAG] if self.advise and ADVISE_FLAG not in self.extra_args else []
        return [*shared, *collectors, *self.extra_args, *advise]


@dataclass(frozen=True)
class SweepEvent:
    """One step of a sweep, for progress displays: a point starting (done=False) or finished."""

    index: int
    """1-based; 0: an event of the sweep as a whole."""
    total: int
    point: str
    done: bool
    message: str

    def __str__(self) -> str:
        if not self.index:  # about the sweep as a whole (a cluster node that left), no point's
            return f"{self.point}: {self.message}"
        return f"[{self.index}/{self.total}] {self.point}: {self.message}"


ProgressFn = Callable[[SweepEvent], None]


def collect_command(point: SweepPoint, out: Path, shared: Sequence[str]) -> list[str]:
    return [
        *(sys.executable, "-P", "-m", "hwprof", "collect"),
        *("--model", point.model, "--runtime", point.runtime, "--precision", point.precision),
        *(("--threads", str(point.threads)) if point.threads != NODE_THREADS else ()),
        *("--batch", str(point.batch)),
        *("--out", str(out), "--no-report"),
        *shared,
    ]


def plan_from_file(out_root: Path) -> tuple[SweepPlan, JsonObject | None]:
    """The plan of the sweep in out_root, to resume it there (its incomplete points run again), and its Ray options."""
    stored, ray = read_plan_json(out_root)
    known = {f.name for f in fields(SweepPlan)}
    plan = SweepPlan(**{k: v for k, v in stored.items() if k in known})
    return replace(plan, out_root=Path(out_root), reuse=True, resume=True), ray


def _complete(run_dir: Path) -> bool:
    """A complete run that can be reused: a damaged run.json (RunDirError) is not one, and is set aside."""
    try:
        return RunDoc.load(run_dir / "run.json").status == "complete"
    except (OSError, ValueError):
        return False


def claim_point_dir(run_dir: Path, plan: SweepPlan) -> bool:
    """True when the point's complete run is reused; else the folder is free for a new collect. With
    plan.resume an incomplete run (an interrupted point) is renamed aside, never deleted."""
    if plan.reuse and _complete(run_dir):
        return True
    if run_dir.exists() and any(run_dir.iterdir()):
        if not plan.resume:
            raise ValueError(f"{run_dir} holds an incomplete run: remove it to collect this point again")
        set_aside(run_dir)
    return False


def finished_row(
    point: SweepPoint,
    run_dir: Path,
    code: int | None,
    log_path: Path,
    timeout_s: float | None,
    peaks: Callable[[int], JsonObject] | None,
) -> SweepRow:
    """The row of a point whose collect ended with exit status `code` (None: killed at the time-out)."""
    if code is None:
        return point_row(point, run_dir, "timeout", f"collect ran past {timeout_s or 0:.0f} s; log {log_path}")
    if not (run_dir / "run.json").exists():
        return point_row(point, run_dir, "failed", f"collect exited {code} with no run.json: {_last_line(log_path)}")
    try:
        status = RunDoc.load(run_dir / "run.json").status
    except ValueError as exc:
        return point_row(point, run_dir, "failed", f"collect exited {code}: {exc}")
    row = row_from_run(run_dir, point, status, peaks)
    if code != 0:
        row.error = f"collect exited {code}: {_last_line(log_path)}"
    return row


def run_point(command: list[str], log: IO[str], timeout_s: float | None, stop: StopSignals) -> int | None:
    """One point's collect, in a session of its own so that only the sweep signals it: a stop signal
    reaches it once through `stop` (never twice, as a terminal's Ctrl-C to the whole group would), and
    a time-out is a SIGTERM, so that the point finalises its run.json, then SIGKILL after POINT_GRACE_S.
    Returns its exit status, None at the time-out."""
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    with stop.child(proc.pid):
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=POINT_GRACE_S)
                    break
            proc.wait()
            return None
        except KeyboardInterrupt:  # the third signal: everything below was killed
            proc.wait()
            raise


@dataclass
class _SweepPeaks:
    """The machine's peaks the sweep measures, once per thread count, for runs whose run.json has none."""

    measured: dict[int, Peaks] = field(default_factory=dict)

    def __call__(self, n: int) -> JsonObject:
        from hwprof.hardware.machine import measure_peaks

        if n not in self.measured:
            self.measured[n] = measure_peaks(n)
        return self.measured[n].to_dict()

    def note(self) -> str:
        return "machine peaks measured by the sweep for runs whose run.json had none: " + "; ".join(
            f"{n} threads: {p.gflops:.1f} GFLOP/s, {p.gbps:.2f} GB/s" for n, p in sorted(self.measured.items())
        )


@dataclass
class _Collecting:
    """What each point of a local sweep is collected with, and how its progress is told."""

    out: Path
    shared: list[str]
    timeout_s: float | None
    stop: StopSignals
    peaks: _SweepPeaks
    say: ProgressFn
    total: int

    def point(self, i: int, point: SweepPoint) -> SweepRow:
        """Collect point `i` into its run directory and return its row."""
        name = point.name
        run_dir = self.out / name
        command = collect_command(point, run_dir, self.shared)
        self.say(SweepEvent(i, self.total, name, False, " ".join(command[3:])))
        started = time.monotonic()
        log_path = self.out / f"{name}.log"
        with child_log(log_path) as log:
            code = run_point(command, log, self.timeout_s, self.stop)
        row = finished_row(point, run_dir, code, log_path, self.timeout_s, self.peaks)
        row.wall_s = time.monotonic() - started
        self.say(SweepEvent(i, self.total, name, True, f"{row.status} in {row.wall_s:.0f} s"))
        return row


def run_sweep(plan: SweepPlan, progress: ProgressFn | None = None, stop: StopSignals | None = None) -> SweepResult:
    """Collect every point of the plan under plan.out_root, then build the table. A stop signal ends the
    point in flight (its run directory is finalised as interrupted) and the sweep after it, with the table
    of what finished and the --resume command in its notes."""
    stop = stop or StopSignals(forward=None, forward_twice=True)
    plan.validate()
    out = Path(plan.out_root)
    out.mkdir(parents=True, exist_ok=True)
    points = plan.points()
    say = progress or (lambda _event: None)
    run = _Collecting(out, plan.collect_args(), plan.timeout_s, stop, _SweepPeaks(), say, len(points))
    rows: list[SweepRow] = []
    write_plan_json(out, plan.to_dict())
    for i, point in enumerate(points, 1):
        run_dir = out / point.name
        if claim_point_dir(run_dir, plan):
            say(SweepEvent(i, len(points), point.name, True, f"reusing the complete run in {run_dir}"))
            rows.append(row_from_run(run_dir, point, "reused", run.peaks))
            continue
        rows.append(run.point(i, point))
        if stop.requested:
            break
    result = SweepResult(rows, out, run.shared, plan.skipped())
    if stop.requested:
        left = len(points) - len(rows)
        result.resume = resume_command(out)
        result.notes.append(
            f"stopped by {stop.name} after {len(rows)} of {len(points)} points ({left} not run): "
            f"{result.resume} runs the rest"
        )
    if run.peaks.measured:
        result.notes.append(run.peaks.note())
    write_sweep(result)
    return result


def resume_command(out_root: Path) -> str:
    """The exact command that runs the points of the sweep in out_root that did not finish (from any folder)."""
    return f"hwprof sweep --resume {shlex.quote(str(Path(out_root).absolute()))}"


def _last_line(path: Path) -> str:
    """The point's error: its last `hwprof: error:` line (collect prints it unwrapped), else its last line."""
    lines = [line.strip() for line in log_lines(path) if line.strip()]
    errors = [line for line in lines if line.startswith("hwprof: error:")]
    return errors[-1] if errors else (lines[-1] if lines else "")
