"""Native kernels per stage and layer, on every thread: pure functions over samples and markers.

A sample (from `perf record` in the kernels pass) carries a thread, a CLOCK_MONOTONIC time and
the code it ran (kernel name, kind, library); the markers say which stage and innermost layer the
pipeline's thread was in at that time. A sample of any thread is charged to what the pipeline was
running when it was taken: torch's intra-op threads work only inside the parallel regions the
pipeline thread opens, so their samples belong to the layer that opened them (their OpenMP wait
samples included: a thread idle inside a layer is that layer's lost parallelism). Attribution is
self, as for the counters: the innermost open layer. Weights are the samples' periods (ns of
cpu-clock, or cycles when sampling on cycles), so shares stay right when the kernel adjusts the
period to hold a frequency.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hwprof.core.kernel_causes import CAUSES, KernelCause
from hwprof.core.spans import Piece

BETWEEN_LAYERS = "(forward, between layers)"
KIND_JIT = "oneDNN JIT"
KIND_ONEDNN = "oneDNN"
KIND_ATEN = "aten"
KIND_BLAS = "MKL BLAS"
KIND_OPENMP = "OpenMP runtime"
KIND_KERNEL = "kernel"
KIND_PYTHON = "Python"
KIND_CODEC = "FFmpeg"
"""FFmpeg's libraries inside OpenCV (libavcodec, libavformat, libswscale, ...): a video's decode and encode."""
KIND_OPENCV = "OpenCV"
KIND_OTHER = "other"
KINDS = (
    KIND_JIT,
    KIND_ONEDNN,
    KIND_BLAS,
    KIND_ATEN,
    KIND_OPENMP,
    KIND_KERNEL,
    KIND_PYTHON,
    KIND_CODEC,
    KIND_OPENCV,
    KIND_OTHER,
)
"""What a sample ran, by its code (collectors.perf_sampling.script.classify assigns them)."""
MIN_LAYER_SAMPLES = 50
"""Samples a layer above MIN_LAYER_SHARE of forward should get, so that a kernel at 10% of it is
seen about 5 times and shares have a binomial error of at most about 7 points."""
MIN_LAYER_SHARE = 0.01
RANKED_LAYERS = 15
"""The layers the report ranks by time (its top 15: `hwprof report --top`'s default): those at or above
MIN_LAYER_SHARE among them are what the kernels pass sizes its samples for (collectors.perf_sampling.rate)."""
LIVE_SAMPLES_MARGIN = 1.3
"""The margin on MIN_LAYER_SAMPLES where a pass counts a layer's samples from its own spans as it runs
(hwprof.session.pass_stop): only the sampler's own count varies from that figure (samples per thread-second of a
window, 1.0-1.13 here; Poisson's spread, 14% at 50), where a plan sized from the other passes' shares needs 1.6
(collectors.perf_sampling.rate.SHARE_MARGIN)."""


@dataclass(frozen=True)
class SampleRate:
    """A sampler's rate as a stopping rule counts its samples in a layer's windows: per second of each thread."""

    hz: float
    threads: int

    def expected(self, window_ns: float) -> float:
        """Samples expected in windows of this many ns of wall time on every thread."""
        return window_ns * 1e-9 * self.hz * self.threads


TOP_KERNELS = 8
CAUSE_PARTS = 4
"""Parts of a kernel cause kept per table (the syscalls, what the faults did)."""


class CodeLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def library(self) -> str: ...


class SampleLike(Protocol):
    @property
    def tid(self) -> int: ...
    @property
    def t_ns(self) -> int: ...
    @property
    def period(self) -> int: ...
    @property
    def counts(self) -> dict[str, int]: ...


@dataclass
class Bucket:
    """Samples of one stage, layer or thread: weights by kernel, kind and thread; group counts by kernel."""

    samples: int = 0
    weight: float = 0.0
    kernels: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    kernel_samples: Counter[str] = field(default_factory=Counter)
    kinds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    kernel_kind: dict[str, str] = field(default_factory=dict)
    """Each kernel's kind (the first seen: a name belongs to one library)."""
    threads: Counter[int] = field(default_factory=Counter)
    counts: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    layers: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    """For a kernel's bucket: its weight in each layer."""
    causes: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    """Kernel-space weight by cause (hwprof.core.kernel_causes)."""
    cause_samples: Counter[str] = field(default_factory=Counter)
    cause_parts: defaultdict[str, defaultdict[str, float]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(float))
    )
    by_leaf: float = 0.0
    """Kernel-space weight whose cause was guessed from the leaf symbol (no callchain)."""

    def add(
        self, code: CodeLike, sample: SampleLike, layer: str | None = None, cause: KernelCause | None = None
    ) -> None:
        w = float(sample.period)
        self.samples += 1
        self.weight += w
        self.kernels[code.name] += w
        self.kernel_samples[code.name] += 1
        self.kinds[code.kind] += w
        self.kernel_kind.setdefault(code.name, code.kind)
        self.threads[sample.tid] += 1
        for event, n in sample.counts.items():
            self.counts[code.name][event] += n
            self.counts[""][event] += n
        if layer is not None:
            self.layers[layer] += w
        if cause is not None:
            self.causes[cause.cause] += w
            self.cause_samples[cause.cause] += 1
            self.cause_parts[cause.cause][cause.part] += w
            self.by_leaf += w if cause.by_leaf else 0.0

    def share(self, kind: str) -> float:
        return self.kinds.get(kind, 0.0) / self.weight if self.weight else 0.0


def most(weights: dict[str, float], n: int | None = None) -> list[tuple[str, float]]:
    """The n heaviest entries, heaviest first (ties in insertion order)."""
    return sorted(weights.items(), key=lambda kv: -kv[1])[:n]


@dataclass
class KernelTables:
    """Everything the report, layers.csv and the trace need about native kernels."""

    layers: dict[str, Bucket]
    stages: dict[str, Bucket]
    kernels: dict[str, Bucket]
    """Over the forward stage: each kernel's weight, with the layers it ran in."""
    threads: dict[int, Bucket]
    codes: dict[str, CodeLike]
    forward: Bucket
    outside: int
    """Samples outside the measured iterations (build, warm-up, tear-down)."""
    iterations: int


def attribute(
    samples: Iterable[SampleLike],
    code_of: Callable[[SampleLike], CodeLike],
    pieces: Sequence[Piece],
    cause_of: Callable[[SampleLike, CodeLike], KernelCause | None] = lambda s, c: None,
) -> KernelTables:
    """The tables; `cause_of` says why a kernel-space sample was in the kernel (None for user space)."""
    starts = [p.start_ns for p in pieces]
    layers: dict[str, Bucket] = defaultdict(Bucket)
    stages: dict[str, Bucket] = defaultdict(Bucket)
    kernels: dict[str, Bucket] = defaultdict(Bucket)
    threads: dict[int, Bucket] = defaultdict(Bucket)
    codes: dict[str, CodeLike] = {}
    forward = Bucket()
    outside = 0
    for sample in samples:
        i = bisect.bisect_right(starts, sample.t_ns) - 1
        if i < 0 or sample.t_ns >= pieces[i].end_ns:
            outside += 1
            continue
        piece = pieces[i]
        code = code_of(sample)
        cause = cause_of(sample, code)
        codes.setdefault(code.name, code)
        stage = piece.stage or "(between stages)"
        stages[stage].add(code, sample, cause=cause)
        threads[sample.tid].add(code, sample, cause=cause)
        if piece.stage == "forward":
            layer = piece.layer or BETWEEN_LAYERS
            layers[layer].add(code, sample, cause=cause)
            kernels[code.name].add(code, sample, layer)
            forward.add(code, sample, cause=cause)
    return KernelTables(
        dict(layers),
        dict(stages),
        dict(kernels),
        dict(threads),
        codes,
        forward,
        outside,
        len({p.iteration for p in pieces}),
    )


def derived(counts: Counter[str] | dict[str, int], events: Sequence[str]) -> dict[str, float]:
    """CPI and MPKI from a group's counts, where the events needed were counted."""
    out: dict[str, float] = {}
    cycles = counts.get("cycles") or counts.get("cpu-cycles")
    instructions = counts.get("instructions")
    if cycles and instructions:
        out["cpi"] = cycles / instructions
    if instructions:
        for event in events:
            if "miss" in event and event in counts:
                out[f"{event.replace('-', '_')}_pki"] = 1000 * counts[event] / instructions
    return out


def _kernel_rows(bucket: Bucket, codes: dict[str, CodeLike], events: Sequence[str], top: int) -> list[dict[str, Any]]:
    rows = []
    for name, w in most(bucket.kernels, top):
        code = codes[name]
        row: dict[str, Any] = {
            "name": name,
            "kind": code.kind,
            "library": code.library,
            "samples": bucket.kernel_samples[name],
            "share": w / bucket.weight if bucket.weight else 0.0,
        }
        row.update(derived(bucket.counts.get(name, {}), events))
        rows.append(row)
    return rows


def _cause_rows(bucket: Bucket) -> list[dict[str, Any]]:
    """The kernel-space time by cause, each with its heaviest parts; shares of the table's sampled time."""
    rows = []
    for cause in CAUSES:
        w = bucket.causes.get(cause)
        if not w:
            continue
        parts = [[part, pw / bucket.weight] for part, pw in most(bucket.cause_parts[cause], CAUSE_PARTS)]
        rows.append(
            {"cause": cause, "share": w / bucket.weight, "samples": bucket.cause_samples[cause], "parts": parts}
        )
    return rows


def bucket_dict(
    bucket: Bucket, codes: dict[str, CodeLike], events: Sequence[str], kinds: Sequence[str], top: int = TOP_KERNELS
) -> dict[str, Any]:
    """One stage's, layer's or thread's table: samples, shares by kind, top kernels (all threads)."""
    return {
        "samples": bucket.samples,
        "threads": {str(t): n for t, n in sorted(bucket.threads.items())},
        "kinds": {k: bucket.share(k) for k in kinds if bucket.kinds.get(k)},
        **({"counts": dict(bucket.counts[""])} if "" in bucket.counts else {}),
        **derived(bucket.counts.get("", {}), events),
        "kernels": _kernel_rows(bucket, codes, events, top),
        **({"kernel_causes": _cause_rows(bucket)} if bucket.causes else {}),
        **({"kernel_by_leaf": bucket.by_leaf / bucket.weight} if bucket.causes else {}),
    }


def tables_dict(
    tables: KernelTables, events: Sequence[str], kinds: Sequence[str], min_samples: int = MIN_LAYER_SAMPLES
) -> dict[str, Any]:
    """The kernels.json document: per layer, stage, thread and kernel (over forward)."""
    fwd = tables.forward.weight or 1.0
    kernels = []
    for name, bucket in sorted(tables.kernels.items(), key=lambda kv: -kv[1].weight):
        code = tables.codes[name]
        row: dict[str, Any] = {
            "name": name,
            "kind": code.kind,
            "library": code.library,
            "samples": bucket.samples,
            "share": bucket.weight / fwd,
            "layers": [[layer, w / bucket.weight] for layer, w in most(bucket.layers)],
        }
        row.update(derived(bucket.counts.get(name, {}), events))
        kernels.append(row)
    layer_share = {name: b.weight / fwd for name, b in tables.layers.items()}
    few = sorted(
        name
        for name, b in tables.layers.items()
        if name != BETWEEN_LAYERS and layer_share[name] >= MIN_LAYER_SHARE and b.samples < min_samples
    )
    return {
        "iterations": tables.iterations,
        "events": list(events),
        "samples_outside_measured": tables.outside,
        "forward": bucket_dict(tables.forward, tables.codes, events, kinds),
        "layers": {
            name: {**bucket_dict(b, tables.codes, events, kinds), "share_of_forward": layer_share[name]}
            for name, b in tables.layers.items()
        },
        "stages": {name: bucket_dict(b, tables.codes, events, kinds) for name, b in tables.stages.items()},
        "threads": {str(t): bucket_dict(b, tables.codes, events, kinds) for t, b in sorted(tables.threads.items())},
        "kernels": kernels,
        "min_samples": min_samples,
        "layers_with_too_few_samples": few,
    }
