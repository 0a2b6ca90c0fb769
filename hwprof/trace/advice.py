"""advice.json's ABBA blocks in the trace: one process "advise", one track per variant, nested slices.

Each block of a paired variant is a slice "<key> block <b>" spanning its iterations; inside it a slice per
iteration "<side> iteration <i>" (side: baseline or variant), and inside that "forward". The times are
advice.json's own (CLOCK_MONOTONIC ns, like every record of the run), so the blocks sit on the run's
timeline after the passes they were measured against.
"""

from __future__ import annotations

from collections import defaultdict

from hwprof.analysis.advice.table import Advice, AdviceBlock
from hwprof.trace.model import (
    LEVEL_ITERATION,
    LEVEL_LAYER,
    LEVEL_STAGE,
    SYNTHETIC_PID_BASE,
    PassTimeline,
    Slice,
    SliceTrack,
)
from hwprof.trace.nesting import nest

ADVISE = "advise"
CATEGORY = "advise"
PID_SOURCE = "advice.json records no pid: a made-up pid above pid_max"


def block_slices(key: str, block: int, iterations: list[AdviceBlock]) -> list[Slice]:
    """One block's slice, its iterations' and their forwards'."""
    start = min(b.start_ns for b in iterations)
    end = max(b.end_ns for b in iterations)
    sides = " ".join(b.side for b in sorted(iterations, key=lambda b: b.start_ns))
    out = [Slice(start, end, f"{key} block {block}", CATEGORY, LEVEL_ITERATION, {"key": key, "order": sides})]
    for b in iterations:
        args = {"key": key, "side": b.side, "block": block, "iteration": b.iteration}
        out.append(Slice(b.start_ns, b.end_ns, f"{b.side} iteration {b.iteration}", CATEGORY, LEVEL_STAGE, args))
        out.append(Slice(b.forward_start_ns, b.forward_end_ns, "forward", CATEGORY, LEVEL_LAYER, args))
    return out


def advice_timeline(advice: Advice, index: int) -> PassTimeline | None:
    """The advise process (pid made up from `index`), or None when advice.json holds no blocks."""
    if not advice.blocks:
        return None
    by_block: dict[str, dict[int, list[AdviceBlock]]] = defaultdict(lambda: defaultdict(list))
    for b in advice.blocks:
        by_block[b.key][b.block].append(b)
    tracks = [
        SliceTrack(
            f"{ADVISE}:{key}",
            f"{ADVISE}: {key}",
            None,
            nest(s for block, its in sorted(blocks.items()) for s in block_slices(key, block, its)),
        )
        for key, blocks in by_block.items()
    ]
    start = min(b.start_ns for b in advice.blocks)
    end = max(b.end_ns for b in advice.blocks)
    pid = SYNTHETIC_PID_BASE + index
    title = f"{ADVISE}: {len(tracks)} paired variants in ABBA blocks (advice.json)"
    return PassTimeline(ADVISE, pid, PID_SOURCE, title, pid, {}, tracks, [], start, end)
