"""The kernels pass's tables as the report reads them (perf_sampling.kernels.json, hwprof.schema.kernels_file):
per layer and over the forward, the native kernels by share with their kinds and the kernel-space causes. The
tables are made in the kernels pass by hwprof.core.kernels."""

from __future__ import annotations

from dataclasses import dataclass, field

from hwprof.core.kernel_causes import NativeCause, causes_by_leaf
from hwprof.core.kernels import KIND_KERNEL, KIND_OPENMP, MIN_LAYER_SAMPLES
from hwprof.schema.kernels_file import KernelCauseRow, KernelRow, KernelsFile, KernelTable

KERNELS_FILE = "perf_sampling.kernels.json"


@dataclass
class NativeKernel:
    name: str
    kind: str
    library: str
    share: float
    """Of the layer's (or forward's) sampled time over all threads."""
    samples: int
    cpi: float | None = None
    layers: list[tuple[str, float]] = field(default_factory=list)
    """Model-wide rows only: the layers it ran in, with the share of its samples in each."""


@dataclass
class NativeLayer:
    samples: int
    share_of_forward: float
    kinds: dict[str, float]
    kernels: list[NativeKernel]
    threads: int
    cpi: float | None = None
    too_few: bool = False
    causes: list[NativeCause] = field(default_factory=list)
    """The kernel-space share by cause, heaviest first."""
    by_leaf: float = 0.0
    """Share of the layer's sampled time in the kernel charged to a cause by its leaf symbol (no callchain)."""

    def cause_share(self, cause: str) -> float:
        return sum(c.share for c in self.causes if c.cause == cause)

    @property
    def openmp_share(self) -> float:
        return self.kinds.get(KIND_OPENMP, 0.0)

    @property
    def kernel_space_share(self) -> float:
        return self.kinds.get(KIND_KERNEL, 0.0)


@dataclass
class NativeView:
    """The kernels pass's tables as the report reads them."""

    layers: dict[str, NativeLayer]
    kernels: list[NativeKernel]
    forward: NativeLayer
    rate_hz: float
    iterations: int
    min_samples: int
    sampling_event: str
    events: list[str]
    callchains: bool = False
    """Whether perf recorded callchains, so that kernel time is charged to causes by them."""
    stages: dict[str, NativeLayer] = field(default_factory=dict)
    """Per pipeline stage: its samples over all threads, shares by kind and top kernels."""


def _native_kernel(row: KernelRow) -> NativeKernel:
    return NativeKernel(
        row.name,
        row.kind or "",
        row.library or "",
        float(row.share or 0.0),
        row.samples or 0,
        row.cpi,
        [(str(name), float(share)) for name, share in row.layers or []],
    )


def _native_cause(row: KernelCauseRow) -> NativeCause:
    parts = [(str(part), float(share)) for part, share in row.parts or []]
    return NativeCause(row.cause, float(row.share or 0.0), row.samples or 0, parts)


def _native_layer(table: KernelTable, few: set[str], name: str) -> NativeLayer:
    kinds = {str(k): float(v) for k, v in (table.kinds or {}).items()}
    kernels = [_native_kernel(k) for k in table.kernels]
    if table.kernel_causes:
        causes = sorted((_native_cause(c) for c in table.kernel_causes), key=lambda c: -c.share)
        by_leaf = float(table.kernel_by_leaf or 0.0)
    else:
        rows = [(k.name, k.share, k.samples) for k in kernels if k.kind == KIND_KERNEL]
        causes = causes_by_leaf(rows, kinds.get(KIND_KERNEL, 0.0), table.samples or 0)
        by_leaf = kinds.get(KIND_KERNEL, 0.0)
    return NativeLayer(
        table.samples or 0,
        float(table.share_of_forward if table.share_of_forward is not None else 1.0),
        kinds,
        kernels,
        len(table.threads or {}),
        table.cpi,
        name in few,
        causes,
        by_leaf,
    )


def native_view(doc: KernelsFile) -> NativeView:
    few = set(doc.layers_with_too_few_samples or [])
    return NativeView(
        layers={name: _native_layer(table, few, name) for name, table in doc.layers.items()},
        kernels=[_native_kernel(row) for row in doc.kernels],
        forward=_native_layer(doc.forward, few, ""),
        rate_hz=float(doc.rate_hz or 0.0),
        iterations=doc.iterations or 0,
        min_samples=doc.min_samples if doc.min_samples is not None else MIN_LAYER_SAMPLES,
        sampling_event=doc.sampling_event or "",
        events=list(doc.events or []),
        callchains=bool(doc.callchains),
        stages={name: _native_layer(table, set(), name) for name, table in doc.stages.items()},
    )
