"""Slices made properly nested on their track (Perfetto requires it): clamped into their parents, and sampled
stacks drawn as runs cut at every layer boundary.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from hwprof.core.cppnames import elide_cpp
from hwprof.trace.model import LEVEL_RECORD, STACK_SEGMENT, Slice


def slice_order(s: Slice) -> tuple[int, int, int]:
    return (s.start, -s.end, s.level)


def _clamp(s: Slice, end: int) -> None:
    """Cut a slice short, saying by how much (args may be shared by slices: copied, not changed)."""
    s.args = {**s.args, "clamped_ns": s.args.get("clamped_ns", 0) + (s.end - end)}
    s.end = end


def nest(slices: Iterable[Slice]) -> list[Slice]:
    """Sort for emission and make the slices of one track nest properly.

    A slice that starts inside another and ends after it is cut: the one of lower authority
    (higher level) yields. Ties keep input order, so a recorded parent written before its
    child at the same start and end stays the parent.
    """
    ordered = sorted(slices, key=slice_order)
    stack: list[Slice] = []
    clamped = False
    for s in ordered:
        while stack and stack[-1].end <= s.start:
            stack.pop()
        while stack and s.end > stack[-1].end:
            clamped = True
            top = stack[-1]
            if s.level < top.level:
                _clamp(top, s.start)
                stack.pop()
            else:
                _clamp(s, top.end)
        stack.append(s)
    if clamped:
        ordered.sort(key=slice_order)
    return ordered


def stack_levels(slices: list[Slice]) -> None:
    """Rank the frames of a sampled-stack track so that nest() puts callers above callees.

    A frame and its callee open and close together whenever the callee ran for the caller's
    whole run, so their intervals tie. `args["depth"]` (root 0) settles it where the collector
    wrote it; otherwise records are taken to be written callee first within a tie (as the
    pyspy collector writes them: it closes a stack from the innermost frame out).
    """
    n = len(slices)
    for i, s in enumerate(slices):
        depth = s.args.get("depth")
        s.level = LEVEL_RECORD + (int(depth) if isinstance(depth, int) else n - i)


def stack_runs(slices: Sequence[Slice]) -> list[Slice]:
    """Nested frames -> one flat slice per run of an unchanged stack, named by its innermost
    frame, with the whole stack (root first) in args and the innermost frame's own args."""
    runs: list[Slice] = []
    stack: list[Slice] = []
    names: list[str] = []
    t = 0

    def emit(until: int) -> None:
        top = stack[-1]
        own = top.args.get("stack") if len(stack) == 1 else None
        frames = own if own is not None else tuple(names)
        name = names[-1]
        if name == UNSYMBOLIZED and top.args.get("library"):
            name = f"{UNSYMBOLIZED} in {Path(str(top.args['library'])).name}"
        runs.append(Slice(t, until, name, top.category, LEVEL_RECORD, {**top.args, "stack": frames}))

    for s in (*slices, None):
        start = s.start if s is not None else None
        while stack and (start is None or stack[-1].end <= start):
            end = stack[-1].end
            if end > t:
                emit(end)
                t = end
            stack.pop()
            names.pop()
        if s is None:
            break
        if stack and s.start > t:
            emit(s.start)
        t = max(t, s.start)
        stack.append(s)
        names.append(UNSYMBOLIZED if _ADDRESS.match(s.name) else s.name)
    for run in runs:
        run.args.pop("depth", None)
        frames = run.args["stack"]
        if isinstance(frames, tuple):
            run.args["stack"] = _segments(frames)
    return runs


_ADDRESS = re.compile(r"^0x[0-9a-fA-F]+$")
UNSYMBOLIZED = "0x…"
"""A native frame py-spy could not name (it writes its address): an address without its mapping
tells a reader nothing, and keeping it would split one run of samples into many."""


@functools.lru_cache(maxsize=1 << 14)
def _segments(frames: tuple[str, ...]) -> tuple[str, ...]:
    short = [elide_cpp(f) for f in frames]
    return tuple(" > ".join(short[i : i + STACK_SEGMENT]) for i in range(0, len(short), STACK_SEGMENT))


def coalesce_runs(slices: list[Slice], count: str | None = "samples") -> list[Slice]:
    """Merge back-to-back identical slices of a flat track (samples of one stack) into one,
    counting the merged slices in args[count]."""
    if any(b.start < a.end for a, b in itertools.pairwise(slices)):
        return slices
    out: list[Slice] = []
    for s in slices:
        prev = out[-1] if out else None
        if (
            prev is not None
            and prev.name == s.name
            and {k: v for k, v in prev.args.items() if k != count} == s.args
            and s.start - prev.end <= min(prev.end - prev.start, s.end - s.start) // 2
        ):
            if count:
                prev.args[count] = prev.args.get(count, 1) + 1
            prev.end = s.end
        else:
            out.append(s)
    return out


def split_at(slices: list[Slice], bounds: list[int]) -> list[Slice]:
    """Split the slices of a flat track at every boundary strictly inside one; a split piece
    keeps its args but not a count of merged samples, which no longer says which piece had them."""
    out: list[Slice] = []
    for s in slices:
        i = bisect.bisect_right(bounds, s.start)
        if i == len(bounds) or bounds[i] >= s.end:
            out.append(s)
            continue
        args = {k: v for k, v in s.args.items() if k != "samples"}
        start = s.start
        for cut in (*bounds[i : bisect.bisect_left(bounds, s.end)], s.end):
            out.append(Slice(start, cut, s.name, s.category, s.level, dict(args)))
            start = cut
    return out


def attach_layers(slices: list[Slice], layers: list[Slice], starts: list[int]) -> None:
    """Name on each stack run the model layer that was running when it began."""
    if not layers:
        return
    for s in slices:
        if "stack" not in s.args:
            continue
        i = bisect.bisect_right(starts, s.start) - 1
        if i >= 0 and layers[i].end > s.start:
            s.args.setdefault("layer", layers[i].name)
