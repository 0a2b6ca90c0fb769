"""A finding (title, evidence, kind, weight) and the words findings are written with."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from hwprof.analysis.layers.stats import LayerStat

CAVEAT = "caveat"

# What a finding rests on (Finding.sources): each names a measurement, which hwprof.analysis.findings maps to the
# pass that made it in this run, so that the pass's health (hwprof.analysis.health) decides whether it is a fact.
TIMING = "timing"
"""The clean timing pass: the stages, and the forward every layer time is scaled to."""
LAYER_TIME = "layer-time"
"""The pass whose layer markers give the per-layer times and shares (LayerReport.time_pass)."""
COUNTERS = "counters"
"""perf_events' (or PAPI's) per-layer counts: task-clock, CPI, cache misses."""
KERNELS = "kernels"
"""perf's samples: the kernels inside each layer."""
TRACE = "trace"
"""torch.profiler's aten ops."""
GPU = "gpu"
"""The GPU collectors (an imported or live GPU run)."""


@dataclass
class Finding:
    title: str
    evidence: str
    kind: str
    weight: float
    """Share of forward (or of the pipeline) concerned; the ranking key."""
    topic: str = ""
    """What the finding is about, for the changes that answer it (analysis/advice/candidates.py); "" for none."""
    layers: tuple[int, ...] = ()
    """The top-level layers it names, by index: the advice row of a change that answers it shows their times."""
    sources: tuple[str, ...] = ()
    """The measurements it rests on (TIMING, LAYER_TIME, ...); stamped by hwprof.analysis.findings."""
    unconfirmed: str = ""
    """Why it is not a measured fact ("" for one): a pass it rests on was disturbed or ran at another speed
    (hwprof.analysis.health). Such a finding is listed after the ranked ones, never on the first screen."""
    unfit: tuple[str, ...] = ()
    """The passes it rests on that were unfit (the ones `unconfirmed` gives the reasons of): the text report names
    each pass's reason once, above the findings, and these passes under each."""

    @property
    def ranked(self) -> bool:
        """A measured fact that the report numbers: not a caveat, not unconfirmed."""
        return self.kind != CAVEAT and not self.unconfirmed

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "layers": list(self.layers), "sources": list(self.sources), "unfit": list(self.unfit)}


def labelled(findings: Iterable[Finding]) -> list[tuple[str, Finding]]:
    """Each finding with the label every renderer shows: "1.", "2." for the ranked ones, "unconfirmed" and
    "note" (a caveat) for the others."""
    out, n = [], 0
    for f in findings:
        if f.ranked:
            n += 1
        out.append((f"{n}." if f.ranked else "note" if f.kind == CAVEAT else "unconfirmed", f))
    return out


def pct(x: float) -> str:
    return f"{100 * x:.1f}%" if x < 0.1 else f"{100 * x:.0f}%"


def index_ranges(indices: Iterable[int]) -> str:
    """[0, 1, 2, 3, 7, 9, 10] -> "0-3, 7, 9-10"."""
    values = sorted(set(indices))
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(parts)


def layers_of(indices: Iterable[int]) -> str:
    """ "layer 3" or "layers 0-2, 7"."""
    values = list(indices)
    return f"layer {values[0]}" if len(values) == 1 else f"layers {index_ranges(values)}"


def verb(items: list[Any], singular: str, plural: str) -> str:
    return singular if len(items) == 1 else plural


def layer_label(layer: LayerStat) -> str:
    return f"{layer.index} ({layer.type})"
