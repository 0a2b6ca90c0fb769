"""The invariants of run.json's figures: what each figure must be, given the others of the same run.

The schema checks each number alone (hwprof.schema.bounds, declared once per field: every number finite and
below 2**64, a `NonNegative` duration and a `Count` never below 0, a `Share` within 0-1 wherever a share is
stored: run.json's, a pass's neighbours', a kernels file's tables and causes). Some values pass that and are
still impossible: a forward p50 longer than the whole pass that measured it, a p50 above the stage's p90,
stages whose medians add up to more than their iterations could hold, an FPS that is not the batch over the
iteration's p50. `RULES` is the table of these cross-figure rules; RunData applies every one to run.json
each time a run is loaded, so report, compare, trace, sweep and hwprof.load all refuse the same runs. A
broken rule is named the way a wrong type is: the file, the field, what it must be (and the figure that
bounds it), the value found, then the rule's name.

A pass's wall_s (what the session timed around its worker) is the longest any figure of that pass can be; a
run without it (an imported GPU run) is not checked against it. The stages of a table (run.json's `stages`,
the timing collector's) are disjoint parts of their iteration: hwprof's pipeline runs them one after another
and a program's driver marks only its outermost stage, never inside the forward (a program's "other" is the
iteration's time that no stage claims), so per iteration their times add up to at most the iteration's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from hwprof.core.spans import frames_per_second
from hwprof.schema.check import RunDirError, found
from hwprof.schema.run import RunDoc
from hwprof.schema.summaries_cpu import StageLatency, SysstatSummary, TimingSummary
from hwprof.schema.summaries_tools import PerfSamplingSummary, PyspySummary, ScaleneSummary

SLACK = 1e-9
"""Relative rounding allowed between figures computed from the same numbers (a p99 interpolated next to the max)."""
ITERATION = "iteration"
"""The stage that holds the others: a whole iteration."""
FORWARD = "forward"
"""The model's call: once an iteration."""
SAMPLE_SLACK = 1.5
"""How far a sampler may run ahead of its nominal rate before its count is impossible (timer jitter, a
sample at each end of the window)."""
ORDER = ("min_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms")
"""A stage's order statistics, smallest first."""


@dataclass(frozen=True)
class Limit:
    """A figure and the most (or least, or exact) it can be: `value` must be <= `limit` (>= when `at_least`,
    == when `equal`), within SLACK."""

    field: str
    value: float
    limit: float
    words: str
    """What the figure must be, naming the figure that bounds it."""
    at_least: bool = False
    equal: bool = False

    def broken(self) -> bool:
        slack = SLACK * max(abs(self.limit), 1.0)
        if self.equal:
            return abs(self.value - self.limit) > slack
        return self.value < self.limit - slack if self.at_least else self.value > self.limit + slack


@dataclass(frozen=True)
class Rule:
    """One invariant: its name, the fields it reads, what they must be, and the limits it sets on a run."""

    name: str
    reads: str
    words: str
    limits: Callable[[RunDoc], Iterator[Limit]]


@dataclass(frozen=True)
class Table:
    """One table of stage latencies in run.json: where it is, its stages, and the wall time of its pass."""

    field: str
    stages: dict[str, StageLatency]
    wall: tuple[float, str] | None


def check_invariants(doc: RunDoc, where: str) -> None:
    """RunDirError naming `where` and the first figure of `doc` that breaks a rule of RULES."""
    for rule in RULES:
        for limit in rule.limits(doc):
            if limit.broken():
                raise RunDirError(
                    f'{where}: field "{limit.field}" must be {limit.words}, found {found(limit.value)} '
                    f"(rule {rule.name})"
                )


def _wall_ms(doc: RunDoc, pass_name: str | None) -> tuple[float, str] | None:
    """A pass's wall time in ms and its words, None when the run does not record it."""
    entry = doc.passes.get(pass_name or "")
    if entry is None or entry.wall_s is None:
        return None
    return entry.wall_s * 1e3, f"the {pass_name} pass's wall time ({entry.wall_s:g} s, passes.{pass_name}.wall_s)"


def _timing(doc: RunDoc) -> tuple[TimingSummary, str] | None:
    """The timing collector's summary and its pass, None when the run has none."""
    entry = doc.entry(TimingSummary.NAME)
    return (entry.summary, entry.pass_name or "") if isinstance(entry.summary, TimingSummary) else None


def tables(doc: RunDoc) -> Iterator[Table]:
    """run.json's stage tables: `stages` (from the pass named by stages_source) and the timing collector's."""
    source = (doc.stages_source or "").split(" ")[0] or None
    yield Table("stages", doc.stages, _wall_ms(doc, source))
    timing = _timing(doc)
    if timing is not None:
        summary, pass_name = timing
        yield Table(f"collectors.{TimingSummary.NAME}.summary.stages", summary.stages or {}, _wall_ms(doc, pass_name))


def _latencies(doc: RunDoc) -> Iterator[tuple[str, StageLatency, tuple[float, str] | None]]:
    """Every stage latency of run.json (the timing collector's plain forward reference too), with its pass's wall."""
    for table in tables(doc):
        for stage, latency in table.stages.items():
            yield f"{table.field}.{stage}", latency, table.wall
    timing = _timing(doc)
    if timing is not None and timing[0].forward_reference is not None:
        prefix = f"collectors.{TimingSummary.NAME}.summary"
        yield f"{prefix}.forward_reference", timing[0].forward_reference, _wall_ms(doc, timing[1])


def _known(s: StageLatency) -> list[tuple[str, float]]:
    """A stage's order statistics that the run holds, smallest first."""
    return [(key, value) for key in ORDER if (value := getattr(s, key)) is not None]


def _within_wall(doc: RunDoc) -> Iterator[Limit]:
    """A pass's figures, and each stage's figures (its n iterations' total too), within the pass's wall time."""
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
    for field, s, wall in _latencies(doc):
        if wall is None:
            continue
        ms, words = wall
        for key, value in (*_known(s), ("mean_ms", s.mean_ms), ("stdev_ms", s.stdev_ms)):
            yield Limit(f"{field}.{key}", value, ms, f"at most {words}")
        if s.n:
            yield Limit(f"{field}.mean_ms", s.mean_ms, ms / s.n, f"at most {words} / n ({s.n} iterations)")


def _ordered(doc: RunDoc) -> Iterator[Limit]:
    """min <= p50 <= p90 <= p99 <= max, the mean within min-max, and the max within the n iterations' total
    (the max is one of n durations, none negative)."""
    for field, s, _ in _latencies(doc):
        known = _known(s)
        for (key, value), (high_key, high) in itertools.pairwise(known):
            yield Limit(f"{field}.{key}", value, high, f"at most {field}.{high_key} ({high:g})")
        if s.min_ms is not None:
            yield Limit(f"{field}.mean_ms", s.mean_ms, s.min_ms, f"at least {field}.min_ms ({s.min_ms:g})", True)
        if s.max_ms is not None:
            yield Limit(f"{field}.mean_ms", s.mean_ms, s.max_ms, f"at most {field}.max_ms ({s.max_ms:g})")
            if s.n:
                words_total = f"at most n x mean_ms ({s.n} x {s.mean_ms:g}: the iterations' total)"
                yield Limit(f"{field}.max_ms", s.max_ms, s.n * s.mean_ms, words_total)


def _few_iterations(doc: RunDoc) -> Iterator[Limit]:
    """With one value the median, mean, min and max are that value; with two, numpy's linear median is their
    mean."""
    for field, s, _ in _latencies(doc):
        if s.n == 1:
            for key in ("p50_ms", "min_ms", "max_ms"):
                value = getattr(s, key)
                if value is not None:
                    words = f"equal to {field}.mean_ms ({s.mean_ms:g}): one iteration has one duration"
                    yield Limit(f"{field}.{key}", value, s.mean_ms, words, equal=True)
        elif s.n == 2:
            words = f"equal to {field}.mean_ms ({s.mean_ms:g}): the median of 2 iterations is their mean"
            yield Limit(f"{field}.p50_ms", s.p50_ms, s.mean_ms, words, equal=True)


def _inside_iteration(doc: RunDoc) -> Iterator[Limit]:
    """A stage runs inside an iteration: none of its durations is longer than the longest iteration, and a stage
    timed once in every iteration is no longer than the iteration at each order statistic (part <= whole in
    each iteration bounds the sorted values one by one)."""
    for table in tables(doc):
        whole = table.stages.get(ITERATION)
        if whole is None:
            continue
        for name, part in table.stages.items():
            if name == ITERATION:
                continue
            field = f"{table.field}.{name}"
            if part.n == whole.n:
                for key in (*ORDER, "mean_ms"):
                    value, limit = getattr(part, key), getattr(whole, key)
                    if value is not None and limit is not None:
                        words = (
                            f"at most {table.field}.{ITERATION}.{key} ({limit:g}): a stage is a part of its iteration"
                        )
                        yield Limit(f"{field}.{key}", value, limit, words)
            elif whole.max_ms is not None:
                for key in ("p50_ms", "max_ms"):
                    value = getattr(part, key)
                    if value is not None:
                        words = f"at most {table.field}.{ITERATION}.max_ms ({whole.max_ms:g})"
                        yield Limit(f"{field}.{key}", value, whole.max_ms, f"{words}: a stage is inside an iteration")


def _counts(doc: RunDoc) -> Iterator[Limit]:
    """A stage with figures was timed at least once, and the forward no more often than its iterations: one
    forward an iteration (hwprof's pipeline runs one; a program's iterations are cut at its model's calls). Other
    stages may run more often (a program's decode made twice in some iterations)."""
    for field, s, _ in _latencies(doc):
        words = f"at least 1: {field} holds a p50_ms ({s.p50_ms:g}) and a mean_ms, which no count of 0 has"
        yield Limit(f"{field}.n", s.n, 1, words, at_least=True)
    for table in tables(doc):
        whole, forward = table.stages.get(ITERATION), table.stages.get(FORWARD)
        if whole is not None and forward is not None:
            words = f"at most {table.field}.{ITERATION}.n ({whole.n}): one forward an iteration"
            yield Limit(f"{table.field}.{FORWARD}.n", forward.n, whole.n, words)


def median_weight(n: int) -> int:
    """How many of n durations a median bounds from below, as a sum: the n values add up to at least
    (n // 2 + 1) x numpy's linear median. Odd n: the median and the n // 2 values above it. Even n: the lower
    middle value a and the n / 2 values from the upper middle b, with a + b = 2 x median and b >= median, add
    up to at least a + (n / 2) b >= (n / 2 + 1) x median."""
    return n // 2 + 1


def _add_up(doc: RunDoc) -> Iterator[Limit]:
    """The stages are disjoint parts of the iterations, so their durations add up to at most the iterations'
    total: their n x mean_ms, and (median_weight) their (n // 2 + 1) x p50_ms."""
    for table in tables(doc):
        whole = table.stages.get(ITERATION)
        if whole is None:
            continue
        parts = [s for name, s in table.stages.items() if name != ITERATION]
        total = whole.n * whole.mean_ms
        words = f"at most {table.field}.{ITERATION}'s total, n x mean_ms ({whole.n} x {whole.mean_ms:g})"
        yield Limit(f"{table.field} (the stages' total, sum of n x mean_ms)",
                    sum(s.n * s.mean_ms for s in parts), total, words)  # fmt: skip
        medians = sum(median_weight(s.n) * s.p50_ms for s in parts if s.n)
        yield Limit(f"{table.field} (the stages' medians, sum of (n // 2 + 1) x p50_ms)", medians, total,
                    f"{words}: at least n // 2 + 1 of a stage's n durations add up to its p50 or more")  # fmt: skip


def expected_fps(doc: RunDoc, iteration: StageLatency | None) -> float | None:
    """The FPS a run with this iteration latency must record: batch x 1000 / the iteration's p50_ms (None where
    the run records no batch or no iteration)."""
    batch = doc.batch
    if iteration is None or not batch or not iteration.p50_ms:
        return None
    return frames_per_second(batch, iteration.p50_ms)


def stored_fps(doc: RunDoc) -> Iterator[tuple[str, float | None, str, StageLatency | None]]:
    """Every FPS run.json stores: (its field, its value, the field of the iteration it comes from, that iteration)."""
    yield "fps", doc.fps, f"stages.{ITERATION}", doc.stages.get(ITERATION)
    timing = _timing(doc)
    if timing is not None:
        prefix = f"collectors.{TimingSummary.NAME}.summary"
        iteration = (timing[0].stages or {}).get(ITERATION)
        yield f"{prefix}.fps", timing[0].fps, f"{prefix}.stages.{ITERATION}", iteration


def _fps(doc: RunDoc) -> Iterator[Limit]:
    """Every stored FPS is the batch over the iteration's p50."""
    for field, value, source, iteration in stored_fps(doc):
        fps = expected_fps(doc, iteration)
        if value is None or fps is None or iteration is None:
            continue
        words = f"batch x 1000 / {source}.p50_ms ({doc.batch} x 1000 / {iteration.p50_ms:g} = {fps:g})"
        yield Limit(field, value, fps, words, equal=True)


OLD_FPS_FACTOR = 1000
"""Collects before issue 56 wrote collectors.timing.summary.fps this many times too large (seconds handed to a
function that takes milliseconds)."""


def correct_old_fps(doc: RunDoc) -> list[str]:
    """The timing summary's FPS of a run written before issue 56 (exactly OLD_FPS_FACTOR times the batch over its
    iteration's p50) set to the right value in `doc`; a note for each value corrected. Any other wrong FPS is
    left for its rule to name."""
    timing = _timing(doc)
    if timing is None or timing[0].fps is None:
        return []
    summary = timing[0]
    fps = expected_fps(doc, (summary.stages or {}).get(ITERATION))
    old = summary.fps
    if fps is None or old is None or Limit("", old, fps * OLD_FPS_FACTOR, "", equal=True).broken():
        return []
    summary.fps = fps
    return [
        f"run.json's collectors.{TimingSummary.NAME}.summary.fps ({old:g}) is {OLD_FPS_FACTOR} times the real "
        f"FPS, as every collect before hwprof's issue 56 wrote it: read as {fps:g} (batch / iteration p50)"
    ]


def _samplers(doc: RunDoc) -> Iterator[Limit]:
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


STAGES = "stages.<s> and collectors.timing.summary.stages.<s>"
RULES: tuple[Rule, ...] = (
    Rule("within-wall-time",
         f"passes.<p>.wall_s; passes.<p>.forward_p50_ms, overhead(_pass_level).forward_on_ms/off_ms; {STAGES} "
         "(and timing's forward_reference): every figure, mean_ms x n",
         "at most the pass's wall time (a stage's mean at most the wall time / n)", _within_wall),
    Rule("samples-within-rate",
         "collectors.<sampler>.summary: sysstat samples and window_s, perf_sampling samples_*, pyspy measured_ms, "
         "scalene elapsed_s; passes.<p>.wall_s; host.logical_cpus",
         "at most what the sampler's rate allows in its pass's wall time; a subset at most its whole",
         _samplers),
    Rule("counts-agree", f"{STAGES}: n, p50_ms; the table's iteration n",
         "a stage with figures timed at least once; the forward no more often than its iterations", _counts),
    Rule("percentiles-ordered", f"{STAGES}: min_ms, p50_ms, p90_ms, p99_ms, max_ms, mean_ms, n",
         "min <= p50 <= p90 <= p99 <= max; min <= mean <= max; max <= n x mean", _ordered),
    Rule("few-iterations", f"{STAGES}: n, p50_ms, mean_ms, min_ms, max_ms",
         "n = 1: p50 = min = max = mean; n = 2: p50 = mean (numpy's linear median of two values)",
         _few_iterations),
    Rule("stage-inside-iteration", f"{STAGES}, the table's iteration",
         "a stage's p50 and max at most the iteration's max; a stage timed in every iteration at most the "
         "iteration at each of min, p50, p90, p99, max and mean", _inside_iteration),
    Rule("stages-add-up", f"{STAGES}: n, mean_ms, p50_ms; the table's iteration n, mean_ms",
         "sum over stages of n x mean and of (n // 2 + 1) x p50 each at most the iteration's n x mean", _add_up),
    Rule("fps-is-batch-over-p50",
         "fps, collectors.timing.summary.fps; config.batch (a program's: model.input_shape[0]); its table's "
         "iteration p50_ms", "batch x 1000 / the iteration's p50_ms", _fps),
)  # fmt: skip
"""The rules, in the order they are checked (the first broken one is named)."""
