"""perf_sampling.kernels.json, the kernels pass's tables (hwprof.core.kernels.tables_dict, with the sampling
rate and event the collector adds): per layer, stage and thread the samples, shares by kind of code and the
top kernels; the model-wide kernel rows with the layers each ran in.

Read as records (codec.py) for hwprof.core.native_view.native_view: a damaged field gives one line naming the file
and the field. The derived figures (cpi, the *_pki of each miss event) and the counts a table holds besides
the fields here are kept as they were read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from hwprof.schema.bounds import Count, NonNegative, Share
from hwprof.schema.codec import JsonObject, Record


@dataclass(kw_only=True)
class KernelRow(Record):
    """One kernel: its name, kind of code and library, its samples and share (of the table's sampled time,
    or of the forward's in the model-wide rows), and model-wide the layers it ran in."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("name",)
    name: str = ""
    kind: str | None = None
    library: str | None = None
    samples: Count | None = None
    share: Share | None = None
    layers: list[Any] | None = None
    """Model-wide rows only: [layer, share of the kernel's samples in it] pairs."""
    cpi: NonNegative | None = None


@dataclass(kw_only=True)
class KernelCauseRow(Record):
    """Why the table's threads were in the kernel (hwprof.core.kernel_causes): one cause, its share of the
    table's sampled time, its samples and its heaviest parts as [part, share of the table] pairs (the
    syscalls by name, what the page faults did)."""

    REQUIRED: ClassVar[tuple[str, ...]] = ("cause",)
    cause: str = ""
    share: Share | None = None
    samples: Count | None = None
    parts: list[Any] | None = None


@dataclass(kw_only=True)
class KernelTable(Record):
    """One stage's, layer's or thread's table (hwprof.core.kernels.bucket_dict)."""

    samples: Count | None = None
    threads: JsonObject | None = None
    """Thread id -> its samples in the table."""
    kinds: dict[str, Share] | None = None
    """Kind of code -> its share of the table's sampled time."""
    cpi: NonNegative | None = None
    kernels: list[KernelRow] = field(default_factory=list)
    share_of_forward: Share | None = None
    """Layers only."""
    kernel_causes: list[KernelCauseRow] = field(default_factory=list)
    """The kernel-space share split by cause; absent in files written before callchains were read."""
    kernel_by_leaf: Share | None = None
    """Share of the table's sampled time in the kernel whose cause came from the leaf symbol alone
    (no callchain recorded)."""


@dataclass(kw_only=True)
class KernelsFile(Record):
    """The whole document: the tables, the model-wide kernel rows and how the samples were taken."""

    iterations: Count | None = None
    events: list[Any] | None = None
    forward: KernelTable = field(default_factory=KernelTable)
    layers: dict[str, KernelTable] = field(default_factory=dict)
    stages: dict[str, KernelTable] = field(default_factory=dict)
    """Per pipeline stage (decode, preprocess, forward, ..., encode): its samples over all threads; a program
    without a model has one, its whole run ("program")."""
    kernels: list[KernelRow] = field(default_factory=list)
    min_samples: Count | None = None
    layers_with_too_few_samples: list[Any] | None = None
    """Layers with a share of the forward worth reading but fewer samples than min_samples."""
    rate_hz: NonNegative | None = None
    sampling_event: str | None = None
    callchains: bool | None = None
    """Whether perf recorded callchains (the kernel causes read from them); None in older files."""
