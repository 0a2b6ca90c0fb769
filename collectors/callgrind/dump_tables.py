"""After the callgrind pass's worker exits: its combined dump file -> the shared per-layer counter tables."""

from __future__ import annotations

import itertools
import statistics

from hwprof.collectors.base import AttachedTool, CollectorResult, PassContext
from hwprof.collectors.callgrind.parse import Part, events_present, read_parts, readings_at_markers

from hwprof.core.markers import read_markers
from hwprof.perf.counting import Reading
from hwprof.perf.metric_tables import analyse, summary_checks
from hwprof.schema.records import CounterSample, metrics_path, records_path, write_records
from hwprof.schema.summaries_cpu import CallgrindSummary, MarkerFloor

NAME = "callgrind"
OUT_FILE = "callgrind.out"
MARKERS_FILE = "callgrind.markers.jsonl"
LABEL = "simulated (callgrind, AVX2 code path)"
AVX2_NOTE = (
    "valgrind's virtual CPU hides AVX-512, so torch and oneDNN ran their AVX2 code paths: these counts "
    "describe that code, not what this host runs natively (ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 "
    "make a native run comparable)"
)


def marker_floor(parts: list[Part]) -> MarkerFloor:
    """Instructions between two consecutive markers with nothing of the model in between: the dump's own cost
    (an empty record, written {}, without a part between two markers)."""
    counts = [p.totals.get("Ir", 0) for p in parts if p.label.isdigit()]
    if not counts:
        return MarkerFloor.of()
    return MarkerFloor.of(
        min_instructions=min(counts),
        p10_instructions=statistics.quantiles(counts, n=10)[0] if len(counts) >= 10 else min(counts),
        method="the smallest part between two consecutive markers: a client request, the hook and the bus, "
        "with no model code; every layer and gap figure includes about one of these",
    )


TRACKED = {"instructions": "instructions (simulated)", "LLC-load-misses": "LLC load misses (simulated)"}


def counter_samples(readings: list[Reading]) -> list[CounterSample]:
    """Per marker interval, the simulated count of each tracked event, at the interval's end: trace counter tracks."""
    out = []
    for before, after in itertools.pairwise(readings):
        for event, track in TRACKED.items():
            if event in before.counts and event in after.counts:
                value = after.counts[event].value - before.counts[event].value
                out.append(CounterSample(track, after.t_ns, float(value), "count"))
    return out


class CallgrindReport(AttachedTool):
    def __init__(self, ctx: PassContext) -> None:
        self.ctx = ctx

    def finish(self, worker_returncode: int | None, timeout_s: float = 30.0) -> CollectorResult:
        out = self.ctx.out_dir
        path, markers_path = out / OUT_FILE, out / MARKERS_FILE
        artifacts = [self.ctx.relpath(p) for p in (path, markers_path) if p.exists()]
        if not path.exists():
            return CollectorResult("failed", reason=f"callgrind wrote no output (worker exit {worker_returncode})")
        parts = read_parts(path)
        markers = read_markers(markers_path) if markers_path.exists() else []
        readings = readings_at_markers(parts, markers)
        if not readings:
            return CollectorResult(
                "failed", reason="no dump at a measured marker (the worker did not measure)", artifacts=artifacts
            )
        events = events_present(parts)
        analysis = analyse(readings, {e: "count" for e in events}, cpu_event="")
        for event in events:
            analysis.tables.methods[event] = f"{LABEL}: mean self count per measured iteration"
        analysis.tables.save(metrics_path(out, NAME))
        artifacts.append(self.ctx.relpath(metrics_path(out, NAME)))
        write_records(records_path(out, NAME), counter_samples(readings))
        artifacts.append(self.ctx.relpath(records_path(out, NAME)))
        iteration = analysis.tables.stages.get("iteration", {})
        summary = CallgrindSummary.of(
            label=LABEL,
            avx2_note=AVX2_NOTE,
            events=events,
            iterations=analysis.iterations,
            instructions_per_iteration=iteration.get("instructions"),
            instructions_forward=analysis.tables.stages.get("forward", {}).get("instructions"),
            marker_floor=marker_floor(parts),
            checks=summary_checks(analysis),
            cycles="not simulated: no CPI from callgrind",
        )
        status = "ok" if worker_returncode == 0 else "partial"
        reason = "" if status == "ok" else f"worker exit status {worker_returncode}"
        return CollectorResult(status, reason=reason, summary=summary, artifacts=artifacts)
