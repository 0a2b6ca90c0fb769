"""The live Nsight Compute passes (`--counters ncu`, opt-in, where `ncu` exists), kept as close as
possible to the commands that worked on the H100 (recordings/h100-2026-11-22: gpu_experiments.py
ncu and gpu_ncu_probe.sh):

    ncu --target-processes all --clock-control none --nvtx --nvtx-include "measured/" \
        --metrics <KERNEL_METRICS> --export <out>/ncu.kernel -f <worker command>
    ncu --target-processes all --clock-control none --replay-mode app-range --nvtx \
        --nvtx-include "regex:layer .*/" --metrics <RANGE_METRICS> --export <out>/ncu.range -f <worker command>

The worker runs its warm-up, then one measured iteration in which the collector pushes the NVTX
range "measured" around the forward stage and "layer <i> <Type>" around each top-level layer (from
the layer markers; the hooks that emit them return None, as NVTX hooks must). After the worker
exits, the parent converts the report with `ncu --import <rep> --csv --page raw --print-units base`
(without it ncu scales units per column: "Mbyte", "us") and parses that
CSV with the functions tested on the recordings (csv_report.py, layers.py).

The kernel pass also asks for the tensor-core math counters (layers.TENSOR_MATH), which the recording
lacks. GMMA exists on Hopper only and an unknown metric makes ncu refuse the whole run, so those
optional metrics are kept only where `ncu --query-metrics` lists them (all of them where the query
cannot be read: the names are GH100's).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import TYPE_CHECKING, Any, ClassVar

from hwprof.collectors.base import AttachedTool, Capability, Collector, CollectorResult, PassContext

from hwprof.core.atomic import atomic_path, atomic_write_text
from hwprof.core.markers import layer_types
from hwprof.schema.summaries_gpu import NcuSummary

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig
    from hwprof.core.markers import Marker

FIX = "install Nsight Compute (ncu on PATH, e.g. /usr/local/cuda/bin) and run with --device cuda"
MEASURED = "measured"


def ncu_binary() -> str | None:
    return shutil.which("ncu")


def device_metrics(ncu: str, timeout_s: float = 120.0) -> set[str] | None:
    """Base metric names `ncu --query-metrics` lists for this machine's GPU; None where it cannot say."""
    try:
        done = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return parse_query_metrics(done.stdout)


def parse_query_metrics(text: str) -> set[str] | None:
    """The first word of every line that names a metric (`unit__counter...`); None if no line does."""
    names = {line.split()[0] for line in text.splitlines() if line.strip() and "__" in line.split()[0]}
    return names or None


def metrics_for(metrics: tuple[str, ...], optional: tuple[str, ...], listed: set[str] | None) -> list[str]:
    """`metrics` as they are, then each optional metric whose base name (before the first dot) the device
    lists, or every optional metric where the list is unknown."""
    keep = [m for m in optional if listed is None or m.split(".")[0] in listed]
    return [*metrics, *(m for m in keep if m not in metrics)]


class NcuPassCollector(Collector):
    """Common to the kernel-replay and the application-range collector."""

    replay_args: ClassVar[tuple[str, ...]]
    metrics: ClassVar[tuple[str, ...]]
    optional_metrics: ClassVar[tuple[str, ...]] = ()
    """Asked for only where the device's ncu lists them (metrics_for)."""
    report_stem: ClassVar[str]
    needs_cuda = True
    cannot_attach = "Nsight Compute starts the process it profiles: it cannot join a running service"
    subscribes = True
    needs_layer_markers = True
    order = 45
    clean_iterations = False
    """Under replay the one measured forward takes 170-2,200x a clean one (H100, yolov8n): a clean
    iteration beside it is a second forward under ncu, and a 1-block "paired" ratio no cost."""

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self._nvtx: Any = None
        self._types: dict[str, str] = {}
        self._depth = 0

    @classmethod
    def wanted(cls, config: RunConfig) -> bool:
        return config.counters == "ncu" and (not config.only or cls.name in config.only)

    @classmethod
    def probe(cls, config: RunConfig) -> Capability:
        if config.device == "cpu":
            return Capability.unavailable("the run is on the CPU (--device cpu)", FIX)
        if ncu_binary() is None:
            return Capability.unavailable("ncu (Nsight Compute) is not on PATH", FIX)
        return Capability.ok()

    def iteration_limit(self, ctx: PassContext) -> int | None:
        return 1

    def wrap_command(self, command: list[str], ctx: PassContext) -> list[str]:
        ncu = ncu_binary()
        if ncu is None:
            raise FileNotFoundError(f"ncu not found; fix: {FIX}")
        report = (ctx.out_dir / self.report_stem).resolve()
        return [
            ncu,
            "--target-processes",
            "all",
            "--clock-control",
            "none",
            *self.replay_args,
            "--metrics",
            ",".join(metrics_for(self.metrics, self.optional_metrics, device_metrics(ncu))),
            "--export",
            str(report),
            "-f",
            *command,
        ]

    def prepare(self, ctx: PassContext) -> None:
        import torch

        assert ctx.pipeline is not None
        self._nvtx = torch.cuda.nvtx
        self._types = layer_types(ctx.pipeline.model)

    def on_marker(self, marker: Marker) -> None:
        if self._nvtx is None or marker.warmup:
            return
        if marker.kind == "stage" and marker.name == "forward":
            label = MEASURED
        elif marker.kind == "layer" and marker.index >= 0 and marker.name in self._types:
            label = f"layer {marker.index} {self._types[marker.name]}"
        else:
            return
        if marker.phase == "B":
            self._nvtx.range_push(label)
            self._depth += 1
        elif self._depth:
            self._nvtx.range_pop()
            self._depth -= 1

    def close(self, ctx: PassContext) -> CollectorResult:
        return CollectorResult(
            "skipped",
            reason="ncu writes its report after this process exits: its result is the one attach().finish() returns",
        )

    def attach(self, pid: int, ctx: PassContext) -> AttachedTool | None:
        return NcuReportTool(ctx, self.name, self.report_stem)


class NcuReportTool(AttachedTool):
    """After the worker exits: `ncu --import report --csv --page raw --print-units base`, kept beside
    the report, then parsed."""

    def __init__(self, ctx: PassContext, name: str, stem: str) -> None:
        self.ctx, self.name = ctx, name
        self.report = ctx.out_dir / f"{stem}.ncu-rep"
        self.csv = ctx.out_dir / f"{stem}.csv"

    def finish(self, worker_returncode: int | None, timeout_s: float = 30.0) -> CollectorResult:
        from hwprof.collectors.gpu.ncu.csv_report import load_ncu_csv
        from hwprof.collectors.gpu.ncu.per_layer import layer_tables

        from hwprof.schema.records import metrics_path

        ncu = ncu_binary()
        if not self.report.exists() or ncu is None:
            return CollectorResult(
                "failed", reason=f"ncu wrote no report (worker exit status {worker_returncode})", fix=FIX
            )
        with atomic_path(self.csv) as tmp, open(tmp, "w") as out:
            done = subprocess.run(
                [ncu, "--import", str(self.report), "--csv", "--page", "raw", "--print-units", "base"],
                stdout=out,
                stderr=subprocess.PIPE,
                text=True,
                timeout=max(timeout_s, 300),
            )
        if done.returncode != 0:
            return CollectorResult("failed", reason=f"ncu --import failed: {done.stderr.strip()[-300:]}")
        report = load_ncu_csv(self.csv)
        kernel = report if report.replay == "kernel" else None
        app_range = report if report.replay == "app-range" else None
        tables, kernels = layer_tables(kernel, app_range)
        met = metrics_path(self.ctx.out_dir, self.name)
        tables.save(met)
        artifacts = [self.ctx.relpath(p) for p in (self.report, self.csv, met)]
        if kernels:
            path = self.ctx.out_dir / f"{self.name}.kernels.json"
            atomic_write_text(path, json.dumps({"layers": kernels}, indent=1))
            artifacts.append(self.ctx.relpath(path))
        unlabelled = sum(1 for r in report.rows if r.layer is None)
        summary = NcuSummary.of(
            replay=report.replay, rows=len(report.rows), rows_without_layer=unlabelled, layers=len(tables.layers)
        )
        return CollectorResult("ok" if tables.layers else "failed", summary=summary, artifacts=artifacts)
