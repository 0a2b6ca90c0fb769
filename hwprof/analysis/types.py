"""Aggregates of the layer table by layer type (Conv, C2f, Concat, SPPCSPC, RepConv, Detect, ...).

Over the top-level layers only, with time including nested layers: with `--depth 2` the nested
rows would otherwise count a parent's FLOPs and time twice.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from hwprof.analysis.layers.stats import LayerReport, LayerStat
from hwprof.analysis.roofline import Roof


@dataclass
class TypeStat:
    type: str
    count: int
    params: int | None
    flops: float | None
    min_bytes: float | None
    time_ms: float | None
    share: float | None
    gflops_s: float | None
    intensity: float | None
    bound: str | None
    pct_peak: float | None
    cpi: float | None
    """Sum of cycles / sum of instructions over the type's layers, where both were counted."""
    energy_j: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _sum(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def aggregate(rows: list[LayerStat], roof: Roof | None, forward_ms: float | None) -> TypeStat:
    flops = _sum([r.flops for r in rows])
    nbytes = _sum([r.min_bytes for r in rows])
    time_ms = _sum([r.time_incl_ms for r in rows])
    gflops = flops / time_ms / 1e6 if (flops is not None and time_ms) else None
    ai = flops / nbytes if (flops is not None and nbytes) else None
    cycles = _sum([r.cycles for r in rows])
    instructions = _sum([r.instructions for r in rows])
    return TypeStat(
        type=rows[0].type,
        count=len(rows),
        params=None if any(r.params is None for r in rows) else sum(r.params or 0 for r in rows),
        flops=flops,
        min_bytes=nbytes,
        time_ms=time_ms,
        share=time_ms / forward_ms if (time_ms is not None and forward_ms) else None,
        gflops_s=gflops,
        intensity=ai,
        bound=roof.bound(ai) if (roof is not None and ai is not None) else None,
        pct_peak=100 * gflops / roof.peak_gflops if (roof is not None and gflops is not None) else None,
        cpi=cycles / instructions if (cycles is not None and instructions) else None,
        energy_j=_sum([r.energy_j for r in rows]),
    )


def by_type(report: LayerReport) -> list[TypeStat]:
    """One row per layer type, by time (or FLOPs when there is no time), largest first."""
    groups: dict[str, list[LayerStat]] = {}
    for row in report.top_level:
        groups.setdefault(row.type, []).append(row)
    stats = [aggregate(rows, report.roof.roof, report.forward_ms) for rows in groups.values()]
    stats.sort(key=lambda s: (-(s.time_ms if s.time_ms is not None else -1.0), -(s.flops or 0.0), s.type))
    return stats
