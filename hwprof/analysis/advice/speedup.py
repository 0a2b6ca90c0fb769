"""A variant's speed-up over its baseline, by the method that measured it.

Methods (AdviceRow.method):
- paired: baseline (A) and variant (B) in one process on the same input, in ABBA blocks (A B B A);
  the speed-up is the median over blocks of (A's forwards / B's forwards), its spread the blocks'
  quartiles. Drift and neighbours hit both sides of a block alike.
- pass-level estimate: a change that needs a new process (an environment variable such as
  OMP_WAIT_POLICY, an allocator), or a pairing that moved either side, runs baseline, variant and
  baseline again as three processes, one after the other; the ratio of their forward p50s, with the
  baseline's own quartiles as spread (as paired_cost's pass-level figures). Nothing cancels other work
  between processes, so each process's neighbours are recorded (hwprof.analysis.advice.table).
- recorded: figures read from a recording (the H100 experiments), not run by hwprof here.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from hwprof.analysis.paired_cost import PAIRED, PASS_LEVEL, block_ratios, quartiles
from hwprof.schema.advice_file import SpeedupDoc

RECORDED = "recorded"
METHOD_TEXT = {
    PAIRED: "paired: baseline and variant interleaved in ABBA blocks in one process on the same images; "
    "median of the blocks' ratios, spread = their quartiles",
    PASS_LEVEL: "pass-level estimate: baseline, variant and baseline again each in its own process (the change "
    "needs a new process, or pairing moved a side); ratio of forward p50s, spread from the baseline's own "
    "quartiles; not resolved where other work disturbed a process",
    RECORDED: "recorded: figures from a recording made elsewhere, not run by hwprof on this host",
}

RECORDED_NOISE = 1.5
"""A recorded figure carries no spread; in the H100 recordings eager latency at batch 1 moved by 50% from one
run to the next (shared/recordings/h100-2026-11-22/README.md), so a recorded ratio within 1.5x either way is
not resolved (not advice)."""


@dataclass
class Speedup:
    """Baseline time / variant time (above 1: the variant is faster), with its spread and method."""

    method: str
    ratio: float
    q1: float | None = None
    q3: float | None = None
    low: float | None = None
    high: float | None = None
    blocks: int = 0
    before_ms: float | None = None
    """Baseline p50 (per image where the variant changes the batch)."""
    after_ms: float | None = None

    def _spread_ends(self) -> tuple[float | None, float | None]:
        """The spread a verdict reads: the blocks' quartiles, else the low-high range (None: not measured)."""
        lo = self.q1 if self.q1 is not None else self.low
        hi = self.q3 if self.q3 is not None else self.high
        return lo, hi

    @property
    def interval(self) -> tuple[float, float]:
        """The spread a verdict reads (_spread_ends), the ratio where it has none."""
        lo, hi = self._spread_ends()
        return (self.ratio if lo is None else lo, self.ratio if hi is None else hi)

    @property
    def resolved(self) -> bool:
        """The spread excludes 1.0: the change is measured faster (or slower), not lost in noise."""
        lo, hi = self._spread_ends()
        if lo is None or hi is None:
            return self.method == RECORDED and not 1 / RECORDED_NOISE < self.ratio < RECORDED_NOISE
        return lo > 1.0 or hi < 1.0

    def spread_text(self) -> str:
        if self.q1 is not None and self.q3 is not None:
            return f"{self.q1:.2f}-{self.q3:.2f}"
        if self.low is not None and self.high is not None:
            return f"{self.low:.2f}-{self.high:.2f}"
        return "n/a"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "resolved": self.resolved}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Speedup:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

    @classmethod
    def from_doc(cls, doc: SpeedupDoc) -> Speedup:
        """From advice.json's record of it."""
        blocks = doc.blocks if doc.blocks is not None else 0
        return cls(doc.method, doc.ratio, doc.q1, doc.q3, doc.low, doc.high, blocks, doc.before_ms, doc.after_ms)


def paired_speedup(before: dict[int, float], after: dict[int, float]) -> Speedup | None:
    """Per-iteration ms of the baseline and the variant, each numbered 0, 1, ... in ABBA order
    (block b holds 2b and 2b+1 of each side): the median over blocks of before / after."""
    return pooled_speedup([(before, after)])


def speedup_ratios(before: dict[int, float], after: dict[int, float]) -> list[float]:
    """Each ABBA block's before / after (paired_speedup's blocks)."""
    return [1.0 / r for r in block_ratios(after, before)]


def pooled_speedup(processes: Sequence[tuple[dict[int, float], dict[int, float]]]) -> Speedup | None:
    """paired_speedup over the blocks of several paired processes of one candidate, pooled (advise's race gives a
    contender more blocks in a process of its own: analysis.advice.race): each block's ratio is taken within its
    process, the statistics are the same over all of them."""
    ratios = [r for before, after in processes for r in speedup_ratios(before, after)]
    if not ratios:
        return None
    q1, q3 = quartiles(ratios)
    return Speedup(
        PAIRED,
        statistics.median(ratios),
        q1,
        q3,
        min(ratios),
        max(ratios),
        len(ratios),
        statistics.median(v for before, _ in processes for v in before.values()),
        statistics.median(v for _, after in processes for v in after.values()),
    )


def process_speedup(before: list[float], after: list[float]) -> Speedup | None:
    """Two processes: baseline p50 / variant p50, spread from the baseline's quartiles (pass-level)."""
    if not before or not after:
        return None
    b, a = statistics.median(before), statistics.median(after)
    q1, q3 = quartiles(sorted(before))
    return Speedup(PASS_LEVEL, b / a, None, None, q1 / a, q3 / a, 0, b, a)
