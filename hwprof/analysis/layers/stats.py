"""The layer table's types: one layer's figures from every source, the report over all layers, and the layer
times per iteration.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from hwprof.analysis.availability import Missing
from hwprof.analysis.layers.sources import Frame, Kernel
from hwprof.analysis.roofline import RoofStatus
from hwprof.core.native_view import NativeLayer, NativeView
from hwprof.core.spans import SpanTime, layer_self_ns, measured_spans

if TYPE_CHECKING:
    from hwprof.rundir.reader import RunData


COUNTER_COLLECTORS = ("perf_events", "papi", "callgrind")
"""Their per-layer derived metrics have the same names (hwprof.perf.derived.derived_metrics)."""
COUNTER_METRICS = {
    "cpi": "CPI",
    "ipc": "IPC",
    "llc_mpki": "LLC MPKI",
    "l1_mpki": "L1D MPKI",
    "measured_bytes": "memory traffic (estimate)",
    "cpus": "CPUs utilized",
    "cycles": "cycles",
    "instructions": "instructions",
}


@dataclass
class LayerStat:
    index: int
    name: str
    type: str
    depth: int
    params: int | None
    """None where the model's structure was not recorded (a run imported from a GPU trace)."""
    out_shape: str
    from_edges: str = ""
    in_bytes: int | None = 0
    out_bytes: int | None = 0
    """None where the layer table does not know them (a TorchScript model's layer, an imported GPU run)."""
    weight_bytes: int = 0
    flops: float | None = None
    min_bytes: float | None = None
    intensity: float | None = None
    time_raw_ms: float | None = None
    time_ms: float | None = None
    time_incl_ms: float | None = None
    share: float | None = None
    gflops_s: float | None = None
    pct_peak: float | None = None
    attainable_gflops: float | None = None
    pct_roof: float | None = None
    gbps: float | None = None
    bound: str | None = None
    measured_bytes: float | None = None
    measured_intensity: float | None = None
    bound_measured: str | None = None
    cpi: float | None = None
    ipc: float | None = None
    llc_mpki: float | None = None
    l1_mpki: float | None = None
    cpus: float | None = None
    cycles: float | None = None
    instructions: float | None = None
    energy_j: float | None = None
    kernels: list[Kernel] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    frame_shares: dict[str, float] = field(default_factory=dict)
    """py-spy leaf-frame shares of the layer's sampled time: python / native / waiting."""
    native: NativeLayer | None = None
    """Native kernels on every thread (perf sampling in the kernels pass)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Every other `<collector>.<metric>` of the joined layer table (layers.csv), unchanged."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def bound_shown(self) -> str | None:
        """What the report's bound column says: the roofline's side, unless most of the layer's samples are in the
        OS kernel (page faults, syscalls), which no roof bounds: then "kernel: <its main cause>" (a layer labelled
        compute-bound at 7% of its roof while 69% of its samples were in the kernel, 92% of them page faults)."""
        native = self.native
        if native is not None and native.kernel_space_share >= KERNEL_BOUND and native.causes:
            return f"kernel: {native.causes[0].cause}"
        return self.bound


KERNEL_BOUND = 0.5
"""The share of a layer's samples in the OS kernel from which the kernel, not the roofline, bounds it."""


@dataclass
class LayerReport:
    layers: list[LayerStat]
    roof: RoofStatus
    time_pass: str | None
    time_iterations: int
    scale: float | None
    time_note: str
    forward_ms: float | None
    """The clean forward the shares are of: the time pass's forward p50 / its paired cost; else (no
    clean iterations in it) the timing pass's forward p50; else the time pass's own."""
    source_forward_ms: float | None
    outside_ms: float | None
    """Forward time not inside any top-level layer (scaled like the layers)."""
    missing: dict[str, Missing]
    """Metric family -> why it is absent (time, flops, roofline, counters, mpki, traffic, energy,
    kernels, frames, native)."""
    methods: dict[str, str]
    native: NativeView | None = None
    scale_paired: bool = False
    """The scale is the time pass's own paired cost (no timing pass), else the timing pass against it."""
    process_ratio: float | None = None
    """The time pass's own clean forward (hooks taken out, paired in it) over the timing pass's forward: how
    differently fast the two processes ran (TimeScale.process_ratio); None where not measured."""
    pass_ratio: float | None = None
    """The time pass's forward p50 over the timing pass's (hooks included); None without both."""

    def top(self, n: int, key: str = "time_ms") -> list[LayerStat]:
        rows = [r for r in self.layers if getattr(r, key) is not None]
        rows.sort(key=lambda r: (-getattr(r, key), r.index))
        return rows[:n]

    @property
    def top_level(self) -> list[LayerStat]:
        return [r for r in self.layers if r.depth == 1]

    def has(self, attr: str) -> bool:
        return any(getattr(r, attr) is not None for r in self.layers)


def time_pass(data: RunData) -> tuple[str | None, list[SpanTime]]:
    """The pass whose layer markers give per-layer times (layers, else trace, else any), and its spans."""
    candidates: list[str] = [p for p in ("layers", "trace") if p in data.pass_names]
    # the callgrind pass runs 50-150x slower under a simulator: its wall times are no layer times
    candidates += [p for p in data.pass_names if p not in candidates and p not in ("timing", "callgrind")]
    for name in candidates:
        markers = data.markers(name)
        if any(m.kind == "layer" for m in markers):
            return name, measured_spans(markers)
    return None, []


@dataclass
class IterationTimes:
    """Per measured iteration: forward ns, layer self ns and ns inside no top-level layer."""

    forward_ns: dict[int, int] = field(default_factory=dict)
    self_ns: dict[int, dict[str, int]] = field(default_factory=dict)
    outside_ns: dict[int, int] = field(default_factory=dict)

    @property
    def iterations(self) -> list[int]:
        return sorted(i for i in self.forward_ns if self.forward_ns[i] > 0 and i in self.self_ns)


def iteration_times(spans: list[SpanTime]) -> IterationTimes:
    out = IterationTimes()
    by_iter: dict[int, list[SpanTime]] = defaultdict(list)
    for s in spans:
        if s.kind == "stage" and s.name == "forward":
            out.forward_ns[s.iteration] = out.forward_ns.get(s.iteration, 0) + s.dur_ns
        elif s.kind == "layer":
            by_iter[s.iteration].append(s)
    for iteration, layers in by_iter.items():
        layers.sort(key=lambda s: (s.start_ns, -s.end_ns))
        out.self_ns[iteration] = {name: sum(vals) for name, vals in layer_self_ns(layers).items()}
        covered, reach = 0, None
        for s in layers:
            if reach is not None and s.end_ns <= reach:
                continue
            covered += s.end_ns - (s.start_ns if reach is None else max(s.start_ns, reach))
            reach = s.end_ns
        if iteration in out.forward_ns:
            out.outside_ns[iteration] = max(out.forward_ns[iteration] - covered, 0)
    return out
