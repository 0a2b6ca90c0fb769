"""Figures of a run.json that no run could hold, given another figure of the same run.

The schema checks each number alone (hwprof.schema.bounds: finite, not negative, a share within 0-1). Some
values pass that and are still impossible: a forward p50 longer than the whole pass that measured it, a
p50 above the stage's max, more iterations of the stage's shortest time than fit in the pass, more samples
than the sampling rate allows in the pass's wall time. Each is named the way a wrong type is: the file, the
field, what it must be (and the field that bounds it), the value found.

A pass's wall_s (what the session timed around its worker) is the longest any figure of that pass can be;
a run without it (an imported GPU run) is not checked against it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from hwprof.schema.check import RunDirError, found
from hwprof.schema.run import RunDoc
from hwprof.schema.summaries_cpu import StageLatency, SysstatSummary, TimingSummary
from hwprof.schema.summaries_tools import PerfSamplingSummary, PyspySummary, ScaleneSummary

SLACK = 1e-9
"""Relative rounding allowed between figures computed from the same numbers (a p99 interpolated next to the max)."""
ITERATION = "iteration"
"""The stage that holds the others: a whole iteration."""
SAMPLE_SLACK = 1.5
"""How far a sampler may run ahead of its nominal rate before its count is impossible (timer jitter, a
sample at each end of the window)."""


@dataclass(frozen=True)
class Limit:
    """A figure and the most (or least) it can be: `value` must be <= `limit` (>= when `at_least`)."""

    field: str
    value: float
    limit: float
    words: str
    """What the figure must be, naming the figure that bounds it."""
    at_least: bool = False

    def broken(self) -> bool:
        slack = SLACK * max(abs(self.limit), 1.0)
        return self.value < self.limit - slack if self.at_least else self.value > self.limit + slack


def check_magnitudes(doc: RunDoc, where: str) -> None:
    """RunDirError naming `where` and the first figure of `doc` beyond what its run could have produced."""
    for limit in _limits(doc):
        if limit.broken():
            raise RunDirError(f'{where}: field "{limit.field}" must be {limit.words}, found {found(limit.value)}')


def _wall_ms(doc: RunDoc, pass_name: str | None) -> tuple[float, str] | None:
    """A pass's wall time in ms and its words, None when the run does not record it."""
    entry = doc.passes.get(pass_name or "")
    if entry is None or entry.wall_s is None:
        return None
    return entry.wall_s * 1e3, f"the {pass_name} pass's wall time ({entry.wall_s:g} s, passes.{pass_name}.wall_s)"


def _limits(doc: RunDoc) -> Iterator[Limit]:
    for name, entry in doc.passes.items():
        wall = _wall_ms(doc, name)
        if wall is None:
            continue
        ms, words = wall
        figures = {"forward_p50_ms": entry.forward_p50_ms}
        for cost_key, cost in (("overhead", entry.overhead), ("overhead_pass_level", entry.overhead_pass_level)):
            if cost is not None:
                figures[f"{cost_key}.forward_on_ms"] = cost.forward_on_ms
                figures[f"{cost_key}.forward_off_ms"] = cost.forward_off_ms
        for key, value in figures.items():
            if value is not None:
                yield Limit(f"passes.{name}.{key}", value, ms, f"at most {words}")
    source = (doc.stages_source or "").split(" ")[0] or None
    for stage, latency in doc.stages.items():
        yield from _latency_limits(f"stages.{stage}", latency, _wall_ms(doc, source))
    yield from _part_limits("stages", doc.stages)
    timing = doc.entry(TimingSummary.NAME)
    if isinstance(timing.summary, TimingSummary):
        wall = _wall_ms(doc, timing.pass_name)
        prefix = f"collectors.{TimingSummary.NAME}.summary"
        for stage, latency in (timing.summary.stages or {}).items():
            yield from _latency_limits(f"{prefix}.stages.{stage}", latency, wall)
        yield from _part_limits(f"{prefix}.stages", timing.summary.stages or {})
        if timing.summary.forward_reference is not None:
            yield from _latency_limits(f"{prefix}.forward_reference", timing.summary.forward_reference, wall)
    yield from _sampler_limits(doc)


def _latency_limits(field: str, s: StageLatency, wall: tuple[float, str] | None) -> Iterator[Limit]:
    """A stage's figures within the pass's wall time (its n iterations too: n x mean_ms is their total), in
    order (min <= p50 <= p90 <= p99 <= max, the mean within min-max), and its max within the n iterations'
    total (the max is one of n durations, none negative)."""
    order = [("min_ms", s.min_ms), ("p50_ms", s.p50_ms), ("p90_ms", s.p90_ms), ("p99_ms", s.p99_ms)]
    known = [(k, v) for k, v in [*order, ("max_ms", s.max_ms)] if v is not None]
    total = s.n * s.mean_ms
    if wall is not None:
        ms, words = wall
        for key, value in (*known, ("mean_ms", s.mean_ms), ("stdev_ms", s.stdev_ms)):
            yield Limit(f"{field}.{key}", value, ms, f"at most {words}")
        if s.n:
            yield Limit(f"{field}.mean_ms", s.mean_ms, ms / s.n, f"at most {words} / n ({s.n} iterations)")
    for (key, value), (high_key, high) in itertools.pairwise(known):
        yield Limit(f"{field}.{key}", value, high, f"at most {field}.{high_key} ({high:g})")
    if s.min_ms is not None:
        yield Limit(f"{field}.mean_ms", s.mean_ms, s.min_ms, f"at least {field}.min_ms ({s.min_ms:g})", True)
    if s.max_ms is not None:
        yield Limit(f"{field}.mean_ms", s.mean_ms, s.max_ms, f"at most {field}.max_ms ({s.max_ms:g})")
        if s.n:
            words_total = f"at most n x mean_ms ({s.n} x {s.mean_ms:g}: the iterations' total)"
            yield Limit(f"{field}.max_ms", s.max_ms, total, words_total)


def _part_limits(field: str, stages: dict[str, StageLatency]) -> Iterator[Limit]:
    """Stages are parts of an iteration, none overlapping another: their total time is at most the iterations'
    total, and a stage timed in every iteration is no longer than the iteration at each of its order statistics
    (part <= whole in each iteration bounds the sorted values one by one)."""
    whole = stages.get(ITERATION)
    if whole is None:
        return
    parts = {name: s for name, s in stages.items() if name != ITERATION}
    total = whole.n * whole.mean_ms
    words_total = f"at most {field}.{ITERATION}'s total, n x mean_ms ({whole.n} x {whole.mean_ms:g})"
    yield Limit(f"{field} (the stages' total, sum of n x mean_ms)", sum(s.n * s.mean_ms for s in parts.values()),
                total, words_total)  # fmt: skip
    for name, part in parts.items():
        if part.n != whole.n:
            continue
        for key in ("min_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms", "mean_ms"):
            value, limit = getattr(part, key), getattr(whole, key)
            if value is not None and limit is not None:
                words = f"at most {field}.{ITERATION}.{key} ({limit:g}): a stage is a part of its iteration"
                yield Limit(f"{field}.{name}.{key}", value, limit, words)


def _sampler_limits(doc: RunDoc) -> Iterator[Limit]:
    """Samplers' counts and windows within their pass's wall time."""
    cpus = max(doc.host.logical_cpus or 1, 1)
    for name, entry in doc.collectors.items():
        wall = _wall_ms(doc, entry.pass_name)
        summary = entry.summary
        if wall is None or summary is None:
            continue
        ms, words = wall
        field = f"collectors.{name}.summary"
        if isinstance(summary, SysstatSummary):
            if summary.window_s is not None:
                yield Limit(f"{field}.window_s", summary.window_s, ms / 1e3, f"at most {words}")
            if summary.samples is not None and summary.interval_ms:
                most = SAMPLE_SLACK * ms / summary.interval_ms + 2
                words_samples = f"at most {words} / interval_ms x {SAMPLE_SLACK}"
                yield Limit(f"{field}.samples", summary.samples, most, words_samples)
        elif isinstance(summary, PerfSamplingSummary):
            total, measured = summary.samples_total, summary.samples_measured
            if total is not None and summary.rate_hz:
                threads = max(summary.threads or 1, cpus)
                most = SAMPLE_SLACK * summary.rate_hz * ms / 1e3 * threads
                yield Limit(f"{field}.samples_total", total, most, f"at most rate_hz x {words} x {threads} CPUs")
            if total is not None and measured is not None:
                yield Limit(f"{field}.samples_measured", measured, total, f"at most {field}.samples_total")
            if measured is not None and summary.samples_forward is not None:
                limit_words = f"at most {field}.samples_measured"
                yield Limit(f"{field}.samples_forward", summary.samples_forward, measured, limit_words)
        elif isinstance(summary, PyspySummary):
            if summary.measured_ms is not None:
                yield Limit(f"{field}.measured_ms", summary.measured_ms, ms, f"at most {words}")
        elif isinstance(summary, ScaleneSummary) and summary.elapsed_s is not None:
            yield Limit(f"{field}.elapsed_s", summary.elapsed_s, ms / 1e3, f"at most {words}")
