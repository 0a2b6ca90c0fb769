"""One `hwprof collect` per (model, threads, batch) point, then one table over all of them.

Each point is its own `python -P -m hwprof collect ... --out DIR --no-report` child process, so a
point that crashes or hangs leaves the others intact; its log is `<out_root>/<point>.log`. A
point whose run directory already holds a complete run is reused (resume a long sweep by
running the same command again). The table is the seed reports' model comparison, automated:
latency, FPS, params, size, GFLOPs, % of peak, arithmetic intensity, bound, energy per image.
It is written to `<out_root>/sweep.json` and `sweep.csv`.

Unless the extra collect arguments choose collectors themselves (--only / --skip), each point runs
only `--only timing,flops,rapl`: the table needs latency, FLOPs and energy, not the profilers,
and the layers, trace and Scalene passes would multiply the sweep's time by about four.
"""

from __future__ import annotations

import csv
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hwprof.analysis.availability import collector_missing

SWEEP_JSON = "sweep.json"
SWEEP_CSV = "sweep.csv"
FP32_BYTES = 4
DEFAULT_COLLECTORS = "timing,flops,rapl"


@dataclass(frozen=True)
class SweepPlan:
    """The points (models x threads x batches) and what every point's collect shares."""

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

    def validate(self) -> None:
        if not self.models or not self.threads or not self.batches:
            raise ValueError("sweep needs at least one model, one thread count and one batch size")
        if any(t < 1 for t in self.threads) or any(b < 1 for b in self.batches):
            raise ValueError("thread counts and batch sizes must be at least 1")

    def points(self) -> list[tuple[str, int, int]]:
        """(model, threads, batch) in the order they are collected."""
        return list(itertools.product(self.models, self.threads, self.batches))

    def collect_args(self) -> list[str]:
        """The options every point's collect shares, with the default collectors unless chosen."""
        chooses = any(a in ("--only", "--skip") or a.startswith(("--only=", "--skip=")) for a in self.extra_args)
        collectors = [] if chooses else ["--only", DEFAULT_COLLECTORS]
        shared = ["--imgsz", str(self.imgsz), "--iters", str(self.iters), "--warmup", str(self.warmup)]
        return [*shared, *collectors, *self.extra_args]


@dataclass
class SweepRow:
    model: str
    threads: int
    batch: int
    run_dir: str
    status: str
    """"complete", "partial", "failed", "timeout" or "reused" (an earlier complete run)."""
    error: str = ""
    imgsz: int | None = None
    forward_ms: float | None = None
    """Forward p50 of one batch, clean timing pass."""
    latency_ms: float | None = None
    """Forward p50 per image (forward_ms / batch), as the seed reports' latency."""
    iteration_ms: float | None = None
    fps: float | None = None
    """End to end: images per second over whole pipeline iterations (p50)."""
    forward_fps: float | None = None
    params_m: float | None = None
    size_mb: float | None = None
    """FP32 parameters in MiB (params x 4 B / 2^20): the in-memory weight size."""
    gflops: float | None = None
    """Per image, torch.utils.flop_counter."""
    pct_peak: float | None = None
    intensity: float | None = None
    bound: str | None = None
    j_per_image: float | None = None
    energy_note: str = ""
    peaks_source: str = ""
    wall_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SweepResult:
    rows: list[SweepRow]
    out_root: Path
    command: list[str] = field(default_factory=list)
    """The collect arguments every point shared (beside --model, --threads, --batch, --out)."""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [r.to_dict() for r in self.rows],
            "out_root": str(self.out_root),
            "command": self.command,
            "notes": self.notes,
        }


@dataclass(frozen=True)
class SweepEvent:
    """One step of a sweep, for progress displays: a point starting (done=False) or finished."""

    index: int
    """1-based."""
    total: int
    point: str
    done: bool
    message: str

    def __str__(self) -> str:
        return f"[{self.index}/{self.total}] {self.point}: {self.message}"


ProgressFn = Callable[[SweepEvent], None]


def point_name(model: str, threads: int, batch: int) -> str:
    return f"{model}-t{threads}-b{batch}"


def collect_command(model: str, threads: int, batch: int, out: Path, shared: Sequence[str]) -> list[str]:
    return [
        *(sys.executable, "-P", "-m", "hwprof", "collect"),
        *("--model", model, "--threads", str(threads), "--batch", str(batch)),
        *("--out", str(out), "--no-report"),
        *shared,
    ]


def _complete(run_dir: Path) -> bool:
    try:
        return json.loads((run_dir / "run.json").read_text()).get("status") == "complete"
    except (OSError, ValueError):
        return False


def row_from_run(
    run_dir: Path,
    model: str,
    threads: int,
    batch: int,
    status: str,
    peaks: Callable[[int], dict[str, Any]] | None = None,
) -> SweepRow:
    """The sweep row of one finished run directory (pure analysis, plus the peaks fallback)."""
    from hwprof.analysis.run_analysis import analyse
    from hwprof.rundata import RunData

    row = SweepRow(model, threads, batch, str(run_dir), status)
    try:
        data = RunData.load(run_dir)
    except ValueError as exc:
        row.status, row.error = "failed", str(exc)
        return row
    run = data.run
    row.peaks_source = "run.json"
    if "peaks" not in run and peaks is not None:
        run["peaks"] = peaks(threads)
        row.peaks_source = "measured by the sweep (run.json had none)"
    a = analyse(data)
    cfg = run.get("config", {})
    model_info = run.get("model", {})
    row.imgsz = cfg.get("imgsz")
    fwd = a.stages.get("forward")
    whole = a.stages.get("iteration")
    if fwd is not None:
        row.forward_ms = fwd.p50_ms
        row.latency_ms = fwd.p50_ms / batch
        row.forward_fps = batch * 1e3 / fwd.p50_ms if fwd.p50_ms else None
    if whole is not None:
        row.iteration_ms = whole.p50_ms
    row.fps = run.get("fps")
    params = model_info.get("params_fused") or model_info.get("params")
    if params:
        row.params_m = params / 1e6
        row.size_mb = params * FP32_BYTES / 2**20
    flops = model_info.get("flops")
    if not flops:
        layer_flops = [r.flops for r in a.layers.top_level if r.flops is not None]
        flops = sum(layer_flops) if layer_flops else None
    if flops:
        row.gflops = flops / 1e9 / batch
    if a.roofline is not None:
        row.pct_peak = a.roofline.pct_peak
        row.intensity = a.roofline.intensity
        row.bound = a.roofline.bound
    elif "roofline" in a.layers.missing:
        row.peaks_source = a.layers.missing["roofline"].short()
    if a.stages.j_per_image is not None:
        row.j_per_image = a.stages.j_per_image
    else:
        row.energy_note = collector_missing(run, ["rapl"], "energy").short()
    return row


def run_sweep(plan: SweepPlan, progress: ProgressFn | None = None) -> SweepResult:
    """Collect every (model, threads, batch) point under plan.out_root, then build the table."""
    from hwprof.machine import measure_peaks

    plan.validate()
    timeout_s = plan.timeout_s
    shared = plan.collect_args()
    out = Path(plan.out_root)
    out.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda _event: None)
    measured: dict[int, dict[str, Any]] = {}

    def peaks(n: int) -> dict[str, Any]:
        if n not in measured:
            measured[n] = measure_peaks(n).to_dict()
        return measured[n]

    rows: list[SweepRow] = []
    points = plan.points()
    for i, (model, n_threads, batch) in enumerate(points, 1):
        name = point_name(model, n_threads, batch)
        run_dir = out / name
        if plan.reuse and _complete(run_dir):
            say(SweepEvent(i, len(points), name, True, f"reusing the complete run in {run_dir}"))
            rows.append(row_from_run(run_dir, model, n_threads, batch, "reused", peaks))
            continue
        if run_dir.exists() and any(run_dir.iterdir()):
            raise ValueError(f"{run_dir} holds an incomplete run: remove it to collect this point again")
        command = collect_command(model, n_threads, batch, run_dir, shared)
        say(SweepEvent(i, len(points), name, False, " ".join(command[3:])))
        started = time.monotonic()
        with open(out / f"{name}.log", "w") as log:
            try:
                proc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s, check=False)
                code: int | None = proc.returncode
            except subprocess.TimeoutExpired:
                code = None
        wall = time.monotonic() - started
        if code is None:
            row = SweepRow(
                model,
                n_threads,
                batch,
                str(run_dir),
                "timeout",
                f"collect ran past {timeout_s:.0f} s; log {out / f'{name}.log'}",
            )
        elif not (run_dir / "run.json").exists():
            row = SweepRow(
                model,
                n_threads,
                batch,
                str(run_dir),
                "failed",
                f"collect exited {code} with no run.json: {_last_line(out / f'{name}.log')}",
            )
        else:
            status = json.loads((run_dir / "run.json").read_text()).get("status", "failed")
            row = row_from_run(run_dir, model, n_threads, batch, status, peaks)
            if code != 0:
                row.error = f"collect exited {code}: {_last_line(out / f'{name}.log')}"
        row.wall_s = wall
        say(SweepEvent(i, len(points), name, True, f"{row.status} in {wall:.0f} s"))
        rows.append(row)
    result = SweepResult(rows, out, shared)
    if measured:
        result.notes.append(
            "machine peaks measured by the sweep for runs whose run.json had none: "
            + "; ".join(
                f"{n} threads: {p['gflops']:.1f} GFLOP/s, {p['gbps']:.2f} GB/s" for n, p in sorted(measured.items())
            )
        )
    write_sweep(result)
    return result


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def write_sweep(result: SweepResult) -> list[Path]:
    json_path = result.out_root / SWEEP_JSON
    json_path.write_text(json.dumps(result.to_dict(), indent=1) + "\n")
    csv_path = result.out_root / SWEEP_CSV
    fields = list(SweepRow.__dataclass_fields__)
    with open(csv_path, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        for row in result.rows:
            writer.writerow(
                {k: ("" if v is None else f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.to_dict().items()}
            )
    return [json_path, csv_path]


def load_sweep(out_root: Path | str) -> SweepResult:
    path = Path(out_root) / SWEEP_JSON
    if not path.is_file():
        raise ValueError(f"{out_root} has no {SWEEP_JSON}")
    doc = json.loads(path.read_text())
    return SweepResult(
        [SweepRow(**r) for r in doc["rows"]], Path(out_root), doc.get("command", []), doc.get("notes", [])
    )
