"""Energy per stage and layer from counter readings taken at the markers: the spans' energies, their spread over
iterations, the power series.
"""

from __future__ import annotations

import itertools
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from hwprof.collectors.rapl.sources import Domain, delta_uj

from hwprof.core.spans import MarkerReading, pair_begin_end
from hwprof.schema.codec import need
from hwprof.schema.records import CounterSample, MetricTables
from hwprof.schema.summaries_cpu import RaplPerInference, RaplPerLayer, RaplSpan

STABLE_REL_ERROR = 0.05
Z95 = 1.96
LAYER_MAX_REL_SEM = 0.10
LAYER_MIN_ITERATIONS = 5


def headline_indices(domains: Sequence[Domain]) -> list[int]:
    """Domains summed into "energy_J": packages and their DRAM, which do not overlap.

    core and uncore lie inside their package, psys covers the platform (package included), and
    mmio zones repeat a package through another interface. Without a package: psys alone.
    """
    chosen = [
        i
        for i, d in enumerate(domains)
        if not d.label.startswith("mmio:")
        and (re.fullmatch(r"package-\d+", d.label) or re.fullmatch(r"package-\d+/dram", d.label))
    ]
    if chosen:
        return chosen
    psys = [i for i, d in enumerate(domains) if d.label == "psys"]
    return psys or [i for i, d in enumerate(domains) if d.top_level]


@dataclass(frozen=True)
class Reading(MarkerReading):
    uj: tuple[float, ...]


@dataclass(frozen=True)
class SpanEnergy:
    kind: str
    name: str
    iteration: int
    dur_ns: int
    joules: tuple[float, ...]
    """Per domain."""


def span_energies(readings: Sequence[Reading], domains: Sequence[Domain]) -> list[SpanEnergy]:
    """Pair begin and end readings per (kind, name) (innermost first) into per-span energies."""
    out: list[SpanEnergy] = []
    for b, r in pair_begin_end(readings):
        joules = tuple(delta_uj(x, y, d.max_range_uj) / 1e6 for x, y, d in zip(b.uj, r.uj, domains, strict=True))
        out.append(SpanEnergy(r.kind, r.name, b.iteration, r.t_ns - b.t_ns, joules))
    return out


@dataclass
class Spread:
    """Mean and spread of a span's energy over its visits, and the iterations needed for +-5% at 95%."""

    n: int
    mean: float
    std: float
    min: float
    max: float
    median: float
    sem: float
    rel_sem: float | None
    iterations_for_5pct: int | None


def spread(values: Sequence[float]) -> Spread:
    """Mean, spread and the iterations needed for +-5% at 95% (see the module docstring)."""
    n = len(values)
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if n > 1 else 0.0
    sem = std / math.sqrt(n)
    return Spread(
        n,
        mean,
        std,
        min(values),
        max(values),
        statistics.median(values),
        sem,
        sem / mean if mean > 0 else None,
        max(1, math.ceil((Z95 * std / (STABLE_REL_ERROR * mean)) ** 2)) if mean > 0 and n > 1 else None,
    )


@dataclass
class EnergyReport:
    per_inference: RaplPerInference
    stages: dict[str, RaplSpan]
    layers: dict[str, RaplSpan]
    layer_note: RaplPerLayer
    tables: MetricTables


def _span_block(spans: Sequence[SpanEnergy], domains: Sequence[Domain], head: Sequence[int]) -> RaplSpan:
    totals = [sum(s.joules[i] for i in head) for s in spans]
    seconds = sum(s.dur_ns for s in spans) / 1e9
    return RaplSpan.of(
        **asdict(spread(totals)),
        unit="J",
        dur_ms_mean=seconds * 1e3 / len(spans),
        avg_W=sum(totals) / seconds if seconds > 0 else None,
        domains={
            d.label: {
                "mean_J": statistics.fmean(s.joules[i] for s in spans),
                "avg_W": sum(s.joules[i] for s in spans) / seconds if seconds > 0 else None,
            }
            for i, d in enumerate(domains)
        },
    )


def energy_report(
    readings: Sequence[Reading],
    domains: Sequence[Domain],
    batch: int,
    update_interval_ms: float | None = None,
) -> EnergyReport:
    """Per-inference, per-stage and (where it bears it) per-layer energy from marker readings."""
    head = headline_indices(domains)
    by: dict[tuple[str, str], list[SpanEnergy]] = defaultdict(list)
    for s in span_energies(readings, domains):
        by[(s.kind, s.name)].append(s)
    tables = _tables(domains, head)
    stages: dict[str, RaplSpan] = {}
    for (kind, name), group in sorted(by.items()):
        if kind not in ("stage", "iteration"):
            continue
        block = _span_block(group, domains, head)
        if update_interval_ms is not None and need(block.dur_ms_mean) > 0:
            block.quantization_rel = 2 * update_interval_ms / need(block.dur_ms_mean)
        stages[name] = block
        tables.stages[name] = _metric_row(block, domains)
    layers = _layer_blocks(by, domains, head)
    tables.layers.update({name: _metric_row(block, domains) for name, block in layers.reported.items()})
    return EnergyReport(_per_inference(stages.get("iteration"), batch), stages, layers.reported, layers.note(), tables)


def _tables(domains: Sequence[Domain], head: Sequence[int]) -> MetricTables:
    """The metric tables' units and methods; the rows come from the stage and layer blocks."""
    return MetricTables(
        units={
            "energy_J": "J",
            "energy_J_std": "J",
            "energy_J_sem": "J",
            "power_W": "W",
            "iterations_for_5pct": "iterations",
            **{f"energy_J:{d.label}": "J" for d in domains},
        },
        methods={
            "energy_J": "mean over the measured iterations of the RAPL energy ("
            + " + ".join(domains[i].label for i in head)
            + ") between the span's begin and end markers; whole socket, not only this process",
            "energy_J_sem": "standard error of that mean (std / sqrt(n)); includes the ~1 ms RAPL step",
            "iterations_for_5pct": "ceil((1.96 std / (0.05 mean))^2): iterations for a 95% interval of +-5%",
        },
    )


def _per_inference(whole: RaplSpan | None, batch: int) -> RaplPerInference:
    """Energy of one inference: a whole iteration's mean over the batch."""
    if whole is None:
        return RaplPerInference()
    joules = need(whole.mean) / batch
    return RaplPerInference.of(
        J_per_inference=joules,
        inferences_per_J=1 / joules if joules > 0 else None,
        avg_W=whole.avg_W,
        iterations=whole.n,
        batch=batch,
        domains_J_per_inference={k: v["mean_J"] / batch for k, v in need(whole.domains).items()},
        method="mean energy of one pipeline iteration (load..postprocess) / batch size",
    )


@dataclass
class _LayerBlocks:
    """Layer energies: those reported (enough iterations, a small spread) and those withheld."""

    reported: dict[str, RaplSpan] = field(default_factory=dict)
    withheld: dict[str, float | None] = field(default_factory=dict)
    """Layer -> its relative standard error."""
    needed: list[int] = field(default_factory=list)
    """Per withheld layer with a spread: the iterations its standard error would need to reach the limit."""

    def note(self) -> RaplPerLayer:
        note = RaplPerLayer.of(
            method=f"layer span energy as for stages; listed only with n >= {LAYER_MIN_ITERATIONS} and "
            f"standard error <= {LAYER_MAX_REL_SEM:.0%} of the mean",
            reported=len(self.reported),
            withheld=len(self.withheld),
        )
        if self.withheld:
            note.reason = (
                f"{len(self.withheld)} layers have a standard error above {LAYER_MAX_REL_SEM:.0%} of their mean "
                "energy (spans of a few RAPL update steps or less)"
            )
            if self.needed:
                note.iterations_needed_median = int(statistics.median(self.needed))
        elif not self.reported:
            note.reason = "no layer readings (layer markers absent, or rapl_layer_reads is off)"
        return note


def _layer_blocks(
    by: dict[tuple[str, str], list[SpanEnergy]], domains: Sequence[Domain], head: Sequence[int]
) -> _LayerBlocks:
    out = _LayerBlocks()
    for (kind, name), group in by.items():
        if kind != "layer":
            continue
        block = _span_block(group, domains, head)
        rel, mean, std = block.rel_sem, need(block.mean), need(block.std)
        if need(block.n) >= LAYER_MIN_ITERATIONS and rel is not None and rel <= LAYER_MAX_REL_SEM:
            out.reported[name] = block
        else:
            out.withheld[name] = rel
            if mean > 0 and std > 0:
                out.needed.append(math.ceil((std / (LAYER_MAX_REL_SEM * mean)) ** 2))
    return out


def _metric_row(block: RaplSpan, domains: Sequence[Domain]) -> dict[str, float]:
    row = {"energy_J": need(block.mean), "energy_J_std": need(block.std), "energy_J_sem": need(block.sem)}
    if block.avg_W is not None:
        row["power_W"] = block.avg_W
    if block.iterations_for_5pct is not None:
        row["iterations_for_5pct"] = float(block.iterations_for_5pct)
    for d in domains:
        row[f"energy_J:{d.label}"] = need(block.domains)[d.label]["mean_J"]
    return row


def power_series(samples: Sequence[tuple[int, Sequence[float]]], domains: Sequence[Domain]) -> list[CounterSample]:
    """W per domain over each sampling interval, stamped at the interval's start."""
    out: list[CounterSample] = []
    for (t0, v0), (t1, v1) in itertools.pairwise(samples):
        if t1 <= t0:
            continue
        for d, a, b in zip(domains, v0, v1, strict=True):
            watts = delta_uj(a, b, d.max_range_uj) * 1e3 / (t1 - t0)
            out.append(CounterSample(track_name(d), t0, watts, "W"))
    return out


def track_name(domain: Domain) -> str:
    return f"RAPL {domain.label} (W)"
