"""Event groups that fit the PMU, rotated over iterations, and the share of iterations each event was counted."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence


def plan_groups(
    events: Sequence[str], fits: Callable[[list[str]], bool], anchors: Sequence[str] = ()
) -> tuple[list[list[str]], list[str]]:
    """Split events into groups the PMU can schedule at once; returns (groups, unschedulable).

    All events in one group if they fit. Otherwise greedy in the given order, and every group
    starts with the `anchors` present (cycles, instructions), so that CPI and the MPKI metrics
    come from counts of the same iteration whichever group measured the misses.
    """
    events = list(dict.fromkeys(events))
    if not events:
        return [], []
    if fits(events):
        return [events], []
    base = [a for a in anchors if a in events]
    if base and not fits(base):
        base = []
    groups: list[list[str]] = []
    unschedulable: list[str] = []
    current = list(base)
    for event in events:
        if event in base:
            continue
        if fits([*current, event]):
            current.append(event)
            continue
        if len(current) > len(base):
            groups.append(current)
            current = list(base)
            if fits([*current, event]):
                current.append(event)
                continue
        if fits([event]):
            groups.append([event])
        else:
            unschedulable.append(event)
    if len(current) > len(base) or (current and not groups):
        groups.append(current)
    return groups, unschedulable


def rotation(n_groups: int, iterations: Sequence[int]) -> dict[int, int]:
    """Measured iteration -> the group that counts during it (round robin)."""
    if n_groups <= 0:
        return {}
    return {it: k % n_groups for k, it in enumerate(iterations)}


def coverage(schedule: Mapping[int, int]) -> dict[int, list[int]]:
    """Group -> the iterations it measured."""
    out: dict[int, list[int]] = defaultdict(list)
    for iteration, group in sorted(schedule.items()):
        out[group].append(iteration)
    return dict(out)
