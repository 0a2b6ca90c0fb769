"""A finding (title, evidence, kind, weight) and the words findings are written with."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from hwprof.analysis.layer_stats import LayerStat

CAVEAT = "caveat"


@dataclass
class Finding:
    title: str
    evidence: str
    kind: str
    weight: float
    """Share of forward (or of the pipeline) concerned; the ranking key."""
    topic: str = ""
    """What the finding is about, for the changes that answer it (analysis/advice_candidates.py); "" for none."""
    layers: tuple[int, ...] = ()
    """The top-level layers it names, by index: the advice row of a change that answers it shows their times."""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "layers": list(self.layers)}


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
