"""Why a column or a table of a run is empty, and the unit of each column.

The analysis keeps, for each family of figures no layer has (time, FLOPs, roofline, counters, cache misses,
measured traffic, energy, kernels, frames, native samples), the collector's reason and fix
(LayerReport.missing), and the same for the stages' energy and memory figures. Here each column of the tables
is tied to the families it is made from, so that `Run.why("energy_j")` gives the reason the report writes under
its table, and a null is never left without one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hwprof.analysis.availability import Missing
from hwprof.rundir.names import ADVICE_JSON

if TYPE_CHECKING:
    from hwprof.analysis.run_analysis import Analysis

LAYER_FAMILIES: dict[str, tuple[str, ...]] = {
    "flops": ("flops",),
    "min_bytes": ("flops",),
    "intensity": ("flops",),
    "time_raw_ms": ("time",),
    "time_ms": ("time",),
    "time_incl_ms": ("time",),
    "share": ("time",),
    "gflops_s": ("time", "flops"),
    "gbps": ("time", "flops"),
    "pct_peak": ("roofline", "time", "flops"),
    "attainable_gflops": ("roofline", "flops"),
    "pct_roof": ("roofline", "time", "flops"),
    "bound": ("roofline", "flops"),
    "measured_bytes": ("traffic",),
    "measured_intensity": ("traffic", "flops"),
    "bound_measured": ("roofline", "traffic", "flops"),
    "cpi": ("counters",),
    "ipc": ("counters",),
    "cycles": ("counters",),
    "instructions": ("counters",),
    "llc_mpki": ("mpki",),
    "l1_mpki": ("mpki",),
    "energy_j": ("energy",),
    "top_kernel": ("kernels",),
    "top_kernel_label": ("kernels",),
    "top_kernel_share": ("kernels",),
    "top_frame": ("frames",),
    "top_frame_share": ("frames",),
    "top_native_kernel": ("native",),
    "top_native_kernel_kind": ("native",),
    "top_native_kernel_share": ("native",),
}
"""A layer column -> the families of figures it needs (analysis/layers/report.missing_reasons' keys)."""

TABLE_FAMILIES: dict[str, tuple[str, ...]] = {
    "layers": ("layers",),
    "types": ("layers",),
    "kernels": ("layers", "native"),
    "model_kernels": ("native",),
    "aten_kernels": ("layers", "kernels"),
    "roofline": ("layers", "roofline"),
}

UNITS: dict[str, str] = {
    "params": "parameters",
    "flops": "FLOP",
    "in_bytes": "B",
    "out_bytes": "B",
    "weight_bytes": "B",
    "min_bytes": "B",
    "measured_bytes": "B",
    "intensity": "FLOP/B",
    "measured_intensity": "FLOP/B",
    "share": "fraction",
    "gflops_s": "GFLOP/s",
    "attainable_gflops": "GFLOP/s",
    "gbps": "GB/s",
    "pct_peak": "%",
    "pct_roof": "%",
    "cpi": "cycles/instruction",
    "ipc": "instructions/cycle",
    "llc_mpki": "misses/1000 instructions",
    "l1_mpki": "misses/1000 instructions",
    "cpus": "CPUs",
    "cycles": "cycles",
    "instructions": "instructions",
    "weight": "fraction",
    "samples": "samples",
    "calls": "calls/iteration",
    "fps": "images/s",
    "cores_busy": "CPUs",
}
"""Units of the columns whose name does not end in one (`_ms`, `_s`, `_j`, `_bytes`, `_share`, ...)."""

SUFFIX_UNITS = (
    ("_ms", "ms"),
    ("_s", "s"),
    ("_ns", "ns"),
    ("_j", "J"),
    ("_J", "J"),
    ("_W", "W"),
    ("_bytes", "B"),
    ("_share", "fraction"),
    ("_ratio", "ratio"),
    ("_shares", "fraction"),
    ("_share_of_forward", "fraction"),
    ("_samples", "samples"),
)


def unit(column: str) -> str:
    """The unit of a column ("" for a name, a label or a count of things named by the column)."""
    metric = column.rpartition(".")[2]
    if metric in UNITS:
        return UNITS[metric]
    return next((u for suffix, u in SUFFIX_UNITS if metric.endswith(suffix)), "")


def _first(a: Analysis, families: tuple[str, ...]) -> Missing | None:
    missing = a.layers.missing
    return next((missing[f] for f in families if f in missing), None)


STAGE_FIGURES = {
    "energy_j": "energy",
    "energy_j_per_image": "energy",
    "rss_peak_bytes": "process",
    "cores_busy": "process",
}
"""The stage columns that come from a collector of the layers pass (rapl, sysstat) rather than the timing pass."""


def table_reason(a: Analysis, name: str) -> Missing | None:
    """Why the table `name` has no rows (None: it has them, or there is no reason recorded)."""
    if name == "stages" and not a.stages.rows:
        return Missing(f"no stage timings in run.json (run {a.doc.status})")
    if name == "advice" and a.advice is None:
        unreadable = next((w for w in a.warnings if ADVICE_JSON in w and "could not be read" in w), None)
        if unreadable is not None:
            return Missing(unreadable)
        return Missing(
            "the run was not advised (no advice.json)",
            "hwprof.advise(run) runs the changes its findings point to (`hwprof advise RUN_DIR`)",
        )
    if name == "detections" and not a.doc.detections:
        return Missing(
            "run.json records no detections (a run from before hwprof recorded them, a program's run, or no pass "
            "finished a measured iteration)",
            "collect again with this hwprof",
        )
    if name == "memory" and not any(r.alloc_bytes is not None or r.faults is not None for r in a.memory.layers):
        return Missing(
            a.memory.unavailable or "no memory figure per layer",
            "collect with the layers pass: --only torch_memory,perf_events (allocator bytes and page faults)",
        )
    if name == "pass_costs" and not a.overheads.passes:
        return Missing("run.json records no pass")
    return _first(a, TABLE_FAMILIES.get(name, ()))


def column_reason(a: Analysis, table: str, column: str) -> Missing | None:
    """Why `column` of `table` holds nulls where a figure could be: the first family it needs that the run
    lacks, or for a `<collector>.<metric>` column its collector's state; None when nothing is missing."""
    if table == "stages":
        kind = STAGE_FIGURES.get(column)
        return a.stages.energy_missing if kind == "energy" else a.stages.process_missing if kind else None
    found = _first(a, LAYER_FAMILIES.get(column, ()))
    if found is not None:
        return found
    collector = column.partition(".")[0] if "." in column else ""
    entry = a.unavailable.get(collector)
    if entry is not None:
        return Missing(f"{collector} {entry['status']}: {entry['reason']}", entry["fix"])
    return None
