"""Which layers of several runs are the same layer, as a user means it: by name, else by position.

What `hwprof compare` does with the runs' layer tables (issue 45):
- every run has the same layer names: every layer is matched, in run A's order;
- the names differ in part (another --depth, a layer only one model has): the names every run has are matched,
  in run A's order, and the others are listed in one line (`unmatched`), never compared;
- no name in common but the same number of layers: matched by position, and the line says so;
- no name in common and different counts: nothing is matched (`refused` says why).
A matched layer's class may differ between runs (the built-in yolov7's `Detect`, the official code's `IDetect`
for model.105): the row shows each run's class ("105 Detect / IDetect") and is compared all the same.
A matched layer whose nested layers differ between runs (one run has model.1.cv1, the other only model.1) is
compared by inclusive time: its self time in one run would leave out what the other run counts in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hwprof.analysis.layers.stats import LayerStat

NAMES_SHOWN = 8
"""Unmatched layers named in the one line; the rest are counted."""


@dataclass
class MatchedLayer:
    stats: list[LayerStat]
    """One per run, in the runs' order."""
    label: str
    """Run A's "index type" (a nested layer: "name type"), each run's class where they differ, "(incl.)"
    where the row compares inclusive times."""
    inclusive: bool = False


@dataclass
class LayerMatch:
    layers: list[MatchedLayer]
    unmatched: str | None = None
    """One line: the layers not in every run (not compared), or that the layers were matched by position."""
    refused: str | None = None
    """Why no layer could be matched; None when some were."""
    types_differ: int = 0
    """Matched layers whose class differs between runs."""


def letter(i: int) -> str:
    return chr(ord("A") + i) if i < 26 else f"R{i + 1}"


def match_layers(tables: Sequence[Sequence[LayerStat]]) -> LayerMatch:
    """The runs' layers matched by name (then by position), run A's order first."""
    names = [[s.name for s in table] for table in tables]
    common = set(names[0]).intersection(*names[1:])
    if common:
        by_name = [{s.name: s for s in table} for table in tables]
        groups = [[lookup[n] for lookup in by_name] for n in names[0] if n in common]
        return _match(groups, tables, _unmatched_line(names, common))
    if len({len(t) for t in tables}) == 1:
        counts = len(tables[0])
        line = f"no layer name is in every run: the {counts} layers are matched by position"
        return _match([list(group) for group in zip(*tables, strict=True)], tables, line)
    sizes = ", ".join(f"{letter(i)} {len(t)}" for i, t in enumerate(tables))
    return LayerMatch([], refused=f"no layer name is in every run and their counts differ ({sizes})")


def _match(groups: list[list[LayerStat]], tables: Sequence[Sequence[LayerStat]], line: str | None) -> LayerMatch:
    children = [_children(table) for table in tables]
    layers = []
    differ = 0
    for stats in groups:
        nested = [children[i].get(s.name, frozenset()) for i, s in enumerate(stats)]
        inclusive = len(set(nested)) > 1
        first = stats[0]
        types = [s.type for s in stats]
        differ += len(set(types)) > 1
        kind = " / ".join(types) if len(set(types)) > 1 else first.type
        label = f"{first.index} {kind}" if first.depth == 1 else f"{first.name} {kind}"
        layers.append(MatchedLayer(stats, label + (" (incl.)" if inclusive else ""), inclusive))
    return LayerMatch(layers, line, types_differ=differ)


def _children(table: Sequence[LayerStat]) -> dict[str, frozenset[str]]:
    """Each layer's nested layers (by name: model.1 holds model.1.cv1 and model.1.cv1.conv)."""
    names = [s.name for s in table]
    return {n: frozenset(x for x in names if x.startswith(n + ".")) for n in names}


def _unmatched_line(names: list[list[str]], common: set[str]) -> str | None:
    order: dict[str, list[str]] = {}
    for i, run in enumerate(names):
        for n in run:
            if n not in common:
                order.setdefault(n, []).append(letter(i))
    if not order:
        return None
    shown = [f"{n} ({' '.join(runs)})" for n, runs in list(order.items())[:NAMES_SHOWN]]
    more = f" and {len(order) - NAMES_SHOWN} more" if len(order) > NAMES_SHOWN else ""
    return (
        f"{len(order)} layer{'s are' if len(order) > 1 else ' is'} not in every run and not compared "
        f"(in the runs named): {', '.join(shown)}{more}"
    )


def row_time(layer: MatchedLayer, i: int) -> float | None:
    """Run i's time of a matched layer: self, or inclusive where the runs nest different layers in it."""
    stat = layer.stats[i]
    return stat.time_incl_ms if layer.inclusive else stat.time_ms


def row_instructions(layer: MatchedLayer, i: int, table: Sequence[LayerStat]) -> float | None:
    """Run i's instructions of a matched layer: its own, or with its nested layers' where it is inclusive."""
    stat = layer.stats[i]
    if not layer.inclusive:
        return stat.instructions
    counts = [s.instructions for s in table if s.name == stat.name or s.name.startswith(stat.name + ".")]
    return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)
