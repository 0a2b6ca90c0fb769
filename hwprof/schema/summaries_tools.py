"""What the sampling and tracing collectors (external tools) write into run.json, under
collectors.<name>.summary: perf record, py-spy, Scalene and the torch profiler. See summaries_cpu.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from hwprof.schema.bounds import Count, NonNegative, Share
from hwprof.schema.codec import JsonObject, Record
from hwprof.schema.summaries_cpu import Summary


@dataclass(kw_only=True)
class CpiPerKernel(Record):
    """perf_sampling's cycles/instructions group: why it is unavailable and how to get it."""

    status: str | None = None
    reason: str | None = None
    fix: str | None = None


@dataclass(kw_only=True)
class ModuleLayers(Record):
    """torch_profiler: a TorchScript model's layer spans, made from the ops' module hierarchy (with_modules) and
    replayed into the pass's markers after it (hwprof.workload.script_scopes)."""

    method: str | None = None
    hierarchy_from: str | None = None
    """Where the measured ops' hierarchies come from: the last warm-up forward's ops, one for one, or their own."""
    forwards_unmatched: Count | None = None
    """Measured forwards with no op in common with the warm-up forward's: no hierarchy, no layer span."""
    forwards_aligned: Count | None = None
    """Measured forwards whose op sequence was not the warm-up forward's (another input shape, TorchScript's
    unoptimised graph at a shape's first call): their ops aligned with the warm-up's by name."""
    ops_unaligned: Count | None = None
    """Ops of the aligned forwards with no counterpart in the warm-up forward."""
    layer_spans: Count | None = None
    """Replayed layer spans (depth 1 and 2) over the measured iterations."""
    forward_ops: Count | None = None
    ops_in_layers: Count | None = None
    hierarchies: Count | None = None
    """Distinct module hierarchies among the forward's ops."""
    unresolved: list[str] | None = None
    """Hierarchies of forward ops that name no layer of the table (the model's own ops between layers), at
    most a few."""


@dataclass(kw_only=True)
class PerfSamplingSummary(Summary):
    """perf_sampling: native kernels per layer on every thread (perf record in the pass)."""

    NAME: ClassVar[str] = "perf_sampling"
    samples_total: Count | None = None
    samples_measured: Count | None = None
    samples_forward: Count | None = None
    samples_outside_measured: NonNegative | None = None
    iterations: Count | None = None
    threads: Count | None = None
    sampling_event: str | None = None
    group_events: list[Any] | None = None
    forward_named_share: Share | None = None
    forward_labelled_share: Share | None = None
    forward_named_share_outside_openmp: Share | None = None
    """The forward's named samples outside the OpenMP runtime, over its samples outside it."""
    forward_shares: JsonObject | None = None
    top_kernels: list[Any] | None = None
    layer_samples_min: Count | None = None
    layer_samples_median: Count | None = None
    layers_at_1pct: Count | None = None
    layers_with_too_few_samples: list[Any] | None = None
    convert_s: NonNegative | None = None
    command: str | None = None
    returncode: int | None = None
    rate_hz: Count | None = None
    rate_chosen: str | None = None
    events: list[Any] | None = None
    version: str | None = None
    jit_perf_map: bool | None = None
    attach_ms: NonNegative | None = None
    kernel_space: str | None = None
    cpi_per_kernel: CpiPerKernel | None = None
    callchains: bool | None = None
    """perf recorded callchains (--call-graph fp), so kernel time is charged to its cause by them."""
    forward_kernel_causes: JsonObject | None = None
    """Cause of kernel-space time (hwprof.core.kernel_causes) -> its share of forward's sampled time."""
    perf_data_bytes: int | None = None


@dataclass(kw_only=True)
class PyspySummary(Summary):
    """pyspy: Python (and native) stacks sampled from outside the pass process."""

    NAME: ClassVar[str] = "pyspy"
    format: str | None = None
    segments: Count | None = None
    samples: Count | None = None
    sampled_ms: NonNegative | None = None
    threads: Count | None = None
    estimated_samples_measured: Count | None = None
    measured_ms: NonNegative | None = None
    shares_measured: JsonObject | None = None
    shares_whole_process: JsonObject | None = None
    top_libraries: JsonObject | None = None
    clock: JsonObject | None = None
    command: str | None = None
    returncode: int | None = None
    native: bool | None = None
    errors: Count | None = None
    samples_reported: Count | None = None
    max_behind_s: NonNegative | None = None
    native_off: str | None = None
    paused_switches: Count | None = None
    """Clean iterations of the paired trace pass in which the worker stopped py-spy (SIGSTOP) and then
    continued it (SIGCONT), so that the pass's paired cost covers py-spy (collectors/pyspy/switch.py)."""
    paused_ms: NonNegative | None = None
    """Time py-spy spent stopped, in all."""
    paused_samples_deferred: Count | None = None
    """Samples py-spy would have taken while stopped (paused_ms x the rate): its timer keeps its schedule,
    so it takes them back to back right after each continue, with next to no sampled time each."""
    paused_samples_deferred_per_switch: list[Any] | None = None
    """The same, per stop, in order."""
    paused_missed: Count | None = None
    """Clean iterations in which py-spy could not be stopped (its pid not yet written, or it had exited):
    their forwards carry py-spy's sampling."""


@dataclass(kw_only=True)
class ScaleneTopLine(Record):
    """One of the lines with the most CPU time (collectors/scalene/convert.py)."""

    where: str | None = None
    """file:line, the file shortened."""
    code: str | None = None
    stage: str | None = None
    python_s: NonNegative | None = None
    native_s: NonNegative | None = None
    system_s: NonNegative | None = None

    @property
    def cpu_s(self) -> float:
        return (self.python_s or 0.0) + (self.native_s or 0.0) + (self.system_s or 0.0)


@dataclass(kw_only=True)
class ScaleneSummary(Summary):
    """scalene: Python, native and system time per line (the pass runs under Scalene)."""

    NAME: ClassVar[str] = "scalene"
    elapsed_s: NonNegative | None = None
    memory: bool | None = None
    files: Count | None = None
    lines: Count | None = None
    functions: Count | None = None
    iterations: Count | None = None
    top_lines: list[ScaleneTopLine] | None = None
    clock: JsonObject | None = None
    max_footprint_mb: NonNegative | None = None
    memory_points: Count | None = None


@dataclass(kw_only=True)
class TopOp(Record):
    """One of the aten ops with the most self time inside layers (collectors/torch_profiler/kernel_doc.py)."""

    name: str | None = None
    self_ms_per_iter: NonNegative | None = None
    share: Share | None = None
    """Of the self time of every op inside a layer."""


@dataclass(kw_only=True)
class TorchProfilerSummary(Summary):
    """torch_profiler: aten ops and oneDNN kernels per layer (torch.profiler)."""

    NAME: ClassVar[str] = "torch_profiler"
    events: Count | None = None
    aten_ops: Count | None = None
    iterations: Count | None = None
    onednn: JsonObject | None = None
    forward_ops_outside_layers: Count | None = None
    top_kernels: list[TopOp] | None = None
    clock: JsonObject | None = None
    shapes: JsonObject | None = None
    """How the ops' input dims were recorded (method; matched and unmatched where they come from a warm-up)."""
    module_layers: ModuleLayers | None = None
    """A TorchScript model's layers, from the module hierarchy (None for an eager model: live ranges)."""


@dataclass(kw_only=True)
class TorchMemorySummary(Summary):
    """torch_memory: torch's allocator per layer (torch.profiler profile_memory with no op recorded)."""

    NAME: ClassVar[str] = "torch_memory"
    events: Count | None = None
    """The allocator's events in the measured iterations' profiling sessions."""
    sessions: Count | None = None
    """Profiling sessions: one per stretch of measured iterations (ended for the clean ones)."""
    iterations: Count | None = None
    memory_peak_layer: str | None = None
    """The top-level layer in which the CPU allocator's live bytes were highest in the first measured forward."""
    sync_uncertainty_ns: NonNegative | None = None
    """The worst half-width of the clock syncs that put the events on the run's clock."""
