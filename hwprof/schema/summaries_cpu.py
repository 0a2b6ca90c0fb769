"""What the CPU collectors that count and time write into run.json, under collectors.<name>.summary.

One class per collector, its fields in the order the collector writes them: this is the documentation of
what each collector produces (the collector's own docstring says how it measures). Objects that readers
look into have a record of their own; the rest stay JSON objects (`JsonObject`), read as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from hwprof.schema.bounds import Count, NonNegative, Share
from hwprof.schema.codec import JsonObject, Record
from hwprof.schema.probes import UnavailablePart

RAPL_ENERGY_METRIC = "energy_J"
"""rapl's per-span energy metric in rapl.metrics.json (mean joules between a span's begin and end)."""
RAPL_ENERGY_COLUMN = f"rapl.{RAPL_ENERGY_METRIC}"
"""That metric's column in the joined layer table (layers.csv)."""


@dataclass(kw_only=True)
class Summary(Record):
    """A collector's summary; NAME is the collector (the key under collectors. in run.json)."""

    NAME: ClassVar[str] = ""

    def unavailable_events(self) -> dict[str, UnavailablePart]:
        """Event -> why it could not be counted, and the fix: counter collectors only."""
        return {}


@dataclass(kw_only=True)
class StageLatency(Record):
    """One stage's latency over the measured iterations (run.json stages.<stage>, timing's summary)."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("n", "mean_ms", "stdev_ms", "p50_ms", "p90_ms", "p99_ms")
    n: Count = 0
    mean_ms: NonNegative = 0.0
    stdev_ms: NonNegative = 0.0
    p50_ms: NonNegative = 0.0
    p90_ms: NonNegative = 0.0
    p99_ms: NonNegative = 0.0
    min_ms: NonNegative | None = None
    max_ms: NonNegative | None = None


@dataclass(kw_only=True)
class TaskClockCheck(Record):
    """The forward's task-clock against the counted threads' CPU time (hwprof.perf.counting)."""

    event_ns: NonNegative | None = None
    process_cpu_ns: NonNegative | None = None
    ratio: NonNegative | None = None
    iterations: Count | None = None
    host_steal_irq_ns: NonNegative | None = None
    context_switches: NonNegative | None = None
    band: list[Any] | None = None
    ratio_band: list[Any] | None = None
    consistent: bool | None = None
    method: str | None = None


@dataclass(kw_only=True)
class CounterChecks(Record):
    """A counter collector's cross-checks (hwprof.perf.metric_tables.summary_checks)."""

    task_clock_vs_process_cpu: TaskClockCheck | None = None
    layers_plus_gap_vs_forward: JsonObject | None = None
    """event -> {sum_layers, gap, forward, ratio}: the layers plus the gap add up to the forward."""


@dataclass(kw_only=True)
class TimingSummary(Summary):
    """timing: the clean latency of every stage (the report's headline figures)."""

    NAME: ClassVar[str] = "timing"
    stages: dict[str, StageLatency] | None = None
    """stage -> latency statistics (n, mean_ms, p50_ms, ...)."""
    fps: NonNegative | None = None
    forward_reference: StageLatency | None = None
    forward_vs_reference: NonNegative | None = None
    forward_reference_unavailable: str | None = None
    """Why no plain model(x) reference was timed (a user's program: it would run inside the program's call)."""


@dataclass(kw_only=True)
class FlopsSummary(Summary):
    """flops: FLOPs of one forward (torch's FlopCounterMode)."""

    NAME: ClassVar[str] = "flops"
    total_flops: NonNegative | None = None
    gflops: NonNegative | None = None
    gflops_per_image: NonNegative | None = None
    input_shape: list[Any] | None = None
    by_op: JsonObject | None = None
    layers_sum_flops: NonNegative | None = None
    method: str | None = None
    flops_by_shape: JsonObject | None = None
    """Input shape ("1x3x320x256") -> the forward's FLOPs at it, where a program's forwards had several shapes
    (the per-layer tables are at input_shape)."""
    layer_flops_by_shape: JsonObject | None = None
    """Input shape -> top-level layer ("model.7") -> its FLOPs at that shape, beside flops_by_shape."""


@dataclass(kw_only=True)
class RaplPerInference(Record):
    """rapl's energy of one inference: one pipeline iteration's energy / batch."""

    J_per_inference: NonNegative | None = None
    inferences_per_J: NonNegative | None = None
    avg_W: NonNegative | None = None
    iterations: Count | None = None
    batch: Count | None = None
    domains_J_per_inference: JsonObject | None = None
    method: str | None = None


@dataclass(kw_only=True)
class RaplPerLayer(Record):
    """rapl's note on per-layer energy: how many layers it reports, and why the others are withheld."""

    method: str | None = None
    reported: Count | None = None
    withheld: Count | None = None
    reason: str | None = None
    iterations_needed_median: Count | None = None


@dataclass(kw_only=True)
class RaplStillCounters(Record):
    """Energy counters that never moved (a VM's stub RAPL), and were left out."""

    domains: list[Any] | None = None
    reads: Count | None = None
    iterations: Count | None = None
    seconds: NonNegative | None = None
    reason: str | None = None


@dataclass(kw_only=True)
class RaplSpan(Record):
    """rapl's energy of one stage (or the whole iteration) over the measured iterations."""

    n: Count | None = None
    mean: NonNegative | None = None
    std: NonNegative | None = None
    min: NonNegative | None = None
    max: NonNegative | None = None
    median: NonNegative | None = None
    sem: NonNegative | None = None
    rel_sem: NonNegative | None = None
    iterations_for_5pct: Count | None = None
    unit: str | None = None
    dur_ms_mean: NonNegative | None = None
    avg_W: NonNegative | None = None
    domains: JsonObject | None = None
    quantization_rel: NonNegative | None = None
    """2 x the counter's update step / the span's mean duration: the share of its energy the step can hide."""


@dataclass(kw_only=True)
class RaplUpdateInterval(Record):
    """How often the energy counter moves (probed before the pass); None with the reason when it never did."""

    value_ms: NonNegative | None = None
    reason: str | None = None
    changes: Count | None = None
    polls: Count | None = None
    method: str | None = None


@dataclass(kw_only=True)
class RaplSummary(Summary):
    """rapl: the socket's energy per inference, per stage and per layer (RAPL counters)."""

    NAME: ClassVar[str] = "rapl"
    source: str | None = None
    where: str | None = None
    domains: list[Any] | None = None
    skipped: JsonObject | None = None
    update_interval: RaplUpdateInterval | None = None
    marker_reads: Count | None = None
    read_cost_us: JsonObject | None = None
    sampler_error: str | None = None
    still_counters: RaplStillCounters | None = None
    energy_J_is: str | None = None
    power_series: JsonObject | None = None
    per_inference: RaplPerInference | None = None
    stages: dict[str, RaplSpan] | None = None
    per_layer: RaplPerLayer | None = None


@dataclass(kw_only=True)
class SysstatSummary(Summary):
    """sysstat: memory, CPU time, threads, context switches and clock frequency of the pass process."""

    NAME: ClassVar[str] = "sysstat"
    interval_ms: NonNegative | None = None
    samples: Count | None = None
    window_s: NonNegative | None = None
    rss_bytes: JsonObject | None = None
    peak_rss_bytes: NonNegative | None = None
    peak_rss_before_measure_bytes: NonNegative | None = None
    stage_peak_method: str | None = None
    cpu: JsonObject | None = None
    threads: list[Any] | None = None
    threads_busy: Count | None = None
    context_switches: JsonObject | None = None
    stages: JsonObject | None = None
    sampler: JsonObject | None = None
    stage_peak_note: str | None = None
    marker_cost_us: float | None = None
    cpu_freq: JsonObject | None = None


@dataclass(kw_only=True)
class CounterSummary(Summary):
    """What the two counter collectors (perf_events, papi) both write first: how and what they counted."""

    engine: str | None = None
    counted: str | None = None
    counter_threads: str | None = None
    """perf_events: "all" (every thread of the pass) or "model" (the model's thread alone): --counter-threads."""
    threads: Count | None = None
    events_requested: list[Any] | None = None
    events_opened: list[Any] | None = None
    unavailable: JsonObject | None = None

    def unavailable_events(self) -> dict[str, UnavailablePart]:
        """`unavailable` read: each entry {"reason", "fix"} or a sentence (UnavailablePart.told)."""
        return {event: UnavailablePart.told(why) for event, why in (self.unavailable or {}).items()}

    @property
    def model_thread_only(self) -> bool:
        """The counts are the model's thread's alone (--counter-threads model): its CPUs utilized is that thread's,
        at most 1, and says nothing of the intra-op threads."""
        return self.counter_threads == "model"


@dataclass(kw_only=True)
class LayerReads(Record):
    """Which layers each measured iteration read the counters at (--counter-reads, hwprof.perf.layer_reads)."""

    method: str | None = None
    """rotate or every (--counter-reads)."""
    every: Count | None = None
    """Each layer read in 1 of this many measured iterations (1: in all of them)."""
    share: Share | None = None
    reason: str | None = None
    read_us: NonNegative | None = None
    """What one read adds to the forward, measured in the pass, that the plan was made from: the probing
    iteration's forward less the timing pass's, per read, and at least a read's own time
    (hwprof.perf.layer_reads.ReadProbe.cost_ns)."""
    forward_ms: NonNegative | None = None
    layer_reads_per_forward: Count | None = None
    compare: str | None = None
    """Set where even measured iterations read every layer and odd ones rotate (tests, benchmarks)."""
    iterations_asked: Count | None = None
    """The measured iterations the pass asked for to carry the plan out: 64 on a GPU run; on a CPU run with
    several threads, from the timing pass's forward and a read's cost."""
    visits_min: Count | None = None
    """The fewest visits of any layer (each layer's row in the metrics says its own `visits`)."""
    visits_max: Count | None = None
    iterations: Count | None = None
    """The measured iterations the visits are out of."""

    @property
    def rotated(self) -> bool:
        return self.every is not None and self.every > 1


@dataclass(kw_only=True)
class CounterGroupDoc(Record):
    """One perf_events group (hwprof.perf.engine.Counters.describe): its events, and the iterations it measured."""

    index: Count | None = None
    events: list[Any] | None = None
    always_on: bool | None = None
    iterations: str | list[Any] | None = None
    """"all" for a group always on, else the measured iterations it was enabled in."""
    note: str | None = None
    """Why a rotating group measured nothing."""


@dataclass(kw_only=True)
class PerfEventsSummary(CounterSummary):
    """perf_events: hardware counters per stage and layer (perf_event_open in the pass process)."""

    NAME: ClassVar[str] = "perf_events"
    fallback: str | None = None
    perf_event_paranoid: int | None = None
    groups: list[CounterGroupDoc] | None = None
    rotation: bool | None = None
    layer_reads: LayerReads | None = None
    iterations_measured: Count | None = None
    running_fraction: JsonObject | None = None
    multiplexed: JsonObject | None = None
    never_scheduled: JsonObject | None = None
    read_cost: JsonObject | None = None
    totals: JsonObject | None = None
    units: JsonObject | None = None
    checks: CounterChecks | None = None
    sampler_cpu_ms: NonNegative | None = None
    interval_ms: NonNegative | None = None
    interval_samples: Count | None = None
    interval_note: str | None = None
    """How the counter tracks were sampled where the sampler did not run (the forward of a measured iteration)."""
    counter_records: Count | None = None
    cache_line_bytes: Count | None = None
    cache_line_source: str | None = None
    gap: str | None = None


@dataclass(kw_only=True)
class PapiSummary(CounterSummary):
    """papi: hardware counters through PAPI (the main thread's share only)."""

    NAME: ClassVar[str] = "papi"
    iterations_measured: Count | None = None
    totals: JsonObject | None = None
    checks: CounterChecks | None = None
    read_cost: JsonObject | None = None
    interval_samples: Count | None = None
    interval_note: str | None = None
    failed: dict[str, str] | None = None
    """Preset -> PAPI's error: the only key of a pass where PAPI could not start (status unavailable)."""


@dataclass(kw_only=True)
class MarkerFloor(Record):
    """callgrind's cost of a marker itself: the instructions between two consecutive markers with no model code."""

    min_instructions: Count | None = None
    p10_instructions: NonNegative | None = None
    method: str | None = None


@dataclass(kw_only=True)
class CallgrindSummary(Summary):
    """callgrind: simulated instruction counts per stage and layer (under Valgrind)."""

    NAME: ClassVar[str] = "callgrind"
    under_valgrind: bool | None = None
    label: str | None = None
    avx2_note: str | None = None
    events: list[Any] | None = None
    iterations: Count | None = None
    instructions_per_iteration: NonNegative | None = None
    instructions_forward: NonNegative | None = None
    marker_floor: MarkerFloor | None = None
    checks: CounterChecks | None = None
    cycles: str | None = None
