"""What a pass costs over a clean forward, and by which method the figure was measured.

- paired: the pass ran clean and measured iterations interleaved in ABBA blocks in one process
  (hwprof.session.paired: off, on, on, off). Block b holds the measured iterations 2b and 2b+1 and the
  clean ones 2b and 2b+1 (each kind numbered from 0), so drift and other work on a shared host hit
  both sides of a block alike. The figure is the median over blocks of (sum of the measured
  forwards / sum of the clean ones), with the blocks' range and quartiles as its spread.
- pass-level estimate: where a collector cannot be switched off inside the process (py-spy
  attached from outside, a process run under Scalene or Valgrind, a runtime's own profiler), the
  pass's forward p50 over the timing pass's, each from its own process. Pass-to-pass noise is
  in it; its spread is that of the timing pass's own iterations (the ratio against their
  quartiles), which is the least noise such a figure carries.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from hwprof.core.markers import Marker
from hwprof.core.spans import clean_forward_ms_by_iteration, forward_ms_by_iteration

if TYPE_CHECKING:
    from hwprof.schema.pass_files import PairedInfo

UNRESOLVED_IQR = 0.10
"""A paired cost whose blocks' quartiles lie further apart than this does not resolve a few-% cost:
the worker adds ABBA blocks while it is so (hwprof.session.paired), and the report shows no ratio for it."""
MIN_BLOCKS = 4
"""A paired cost from fewer ABBA blocks than this (those its figure uses: blocks left out for mixed input shapes
do not count) is not resolved, whatever its spread: the spread of 1 block is its one value (an IQR of 0 that
says nothing), and the quartiles of 2 or 3 blocks are not quartiles but points interpolated between their
lowest and highest (the spread the report shows switches from the range to the IQR at this count too). With
4, each quartile has a block on either side of it. The built-in pipeline's worker adds blocks while below it,
as it does for noise (hwprof.session.paired.extend); a program's pass has only the program's calls."""
PAIRED = "paired"
PASS_LEVEL = "pass-level estimate"
METHOD_TEXT = {
    PAIRED: "paired in the pass: clean and measured iterations interleaved in ABBA blocks in one process; "
    "median of the blocks' forward ratios",
    PASS_LEVEL: "pass-level estimate: the pass's forward p50 / the timing pass's, separate processes "
    "(pass-to-pass noise included); spread from the timing pass's own iterations",
}


@dataclass
class PassCostFigure:
    """One pass's cost as a forward-time ratio (measured / clean) with its spread and method."""

    method: str
    ratio: float
    low: float | None
    """Lower end of the spread: the lowest block ratio (paired), or the ratio against the timing
    pass's third quartile (pass-level); None where the run recorded no spread (older runs)."""
    high: float | None
    q1: float | None = None
    q3: float | None = None
    blocks: int = 0
    """ABBA blocks (paired); 0 for a pass-level estimate."""
    block_ratios: list[float] = field(default_factory=list)
    forward_on_ms: float | None = None
    """Forward p50 of the measured iterations."""
    forward_off_ms: float | None = None
    """Forward p50 of the clean iterations (paired) or of the timing pass (pass-level)."""
    covers: list[str] = field(default_factory=list)
    """Collectors whose cost the figure holds (paired: those switched off in the clean iterations)."""
    always_on: list[str] = field(default_factory=list)
    """Collectors of the pass left on in the clean iterations too: their cost is not in a paired figure."""
    added_blocks: int = 0
    """ABBA blocks the worker added after the planned ones because the figure did not resolve."""
    extension: str = ""
    """Why blocks were added and why the adding stopped ('' when none were)."""
    shapes: str = ""
    """Where the forwards had more than one input shape: the blocks that mixed shapes, left out of the figure where
    others did not, or kept and said ('' when every block held one shape)."""

    @property
    def resolved(self) -> bool:
        """False for a paired figure from fewer than MIN_BLOCKS blocks, or whose blocks' quartiles lie more than
        UNRESOLVED_IQR apart (unresolved_why). Worked out from the blocks on every read: a run.json written before
        MIN_BLOCKS, which said `resolved: true` of 1 block, reads as not resolved."""
        return not self.unresolved_why

    @property
    def too_few_blocks(self) -> str:
        """'N block(s): too few to resolve a cost, at least MIN_BLOCKS needed' for a paired figure below
        MIN_BLOCKS ('' otherwise): the reason that stands whoever else used the CPUs."""
        n = self.blocks or 0
        if self.method != PAIRED or n >= MIN_BLOCKS:
            return ""
        return f"{blocks_text(n)}: too few to resolve a cost, at least {MIN_BLOCKS} needed"

    @property
    def unresolved_why(self) -> str:
        """Why the figure is not resolved, in words ('' where it is): too few blocks (too_few_blocks), or quartiles
        too far apart. A pass-level estimate records no quartiles: it is never unresolved here."""
        if self.too_few_blocks:
            return self.too_few_blocks
        if self.q1 is None or self.q3 is None or self.q3 - self.q1 <= UNRESOLVED_IQR:
            return ""
        return (
            f"the quartiles of its {self.blocks} ABBA blocks' ratios, {self.q1:.3f}-{self.q3:.3f}, lie more than "
            f"{UNRESOLVED_IQR:.2f} apart"
        )

    @property
    def method_text(self) -> str:
        return METHOD_TEXT.get(self.method, self.method)

    def ratio_text(self) -> str:
        """Three decimals where the method resolves them (paired), two for a pass-level estimate."""
        return f"{self.ratio:.3f}x" if self.method == PAIRED else f"{self.ratio:.2f}x"

    def spread_text(self) -> str:
        figures = self.spread_figures()
        if self.low is None or self.high is None:
            return "not recorded"
        if self.method != PAIRED:
            return f"{figures} (timing IQR)"
        if figures is None:  # one block's range is its one value: not a spread
            return f"none ({self._blocks_text()})"
        return f"{'IQR ' if self._quartiles_shown else ''}{figures} ({self._blocks_text()})"

    def spread_figures(self) -> str | None:
        """The spread's figures alone, for a table cell (None: not recorded, or one block, whose range is its one
        value): a paired figure's quartiles from MIN_BLOCKS blocks, else its range; a pass-level estimate's
        timing IQR."""
        if self.low is None or self.high is None:
            return None
        if self.method != PAIRED:
            return f"{self.low:.2f}-{self.high:.2f}"
        if self._quartiles_shown:
            return f"{self.q1:.3f}-{self.q3:.3f}"
        return f"{self.low:.3f}-{self.high:.3f}" if (self.blocks or 0) >= 2 else None

    @property
    def _quartiles_shown(self) -> bool:
        return self.q1 is not None and self.q3 is not None and (self.blocks or 0) >= MIN_BLOCKS

    def _blocks_text(self) -> str:
        return blocks_text(self.blocks) + (f", {self.added_blocks} added" if self.added_blocks else "")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.shapes:  # one input shape: the figure reads as it always did
            del out["shapes"]
        out["method_text"] = self.method_text
        out["resolved"] = self.resolved
        if not self.resolved:
            out["unresolved_why"] = self.unresolved_why
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PassCostFigure:
        """The figure from its recorded fields; "resolved" and "unresolved_why" as recorded are not read (they are
        worked out again from the blocks: a run recorded before MIN_BLOCKS may say `resolved: true` of 1 block)."""
        keys = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in keys})


def blocks_text(n: int, noun: str = "block") -> str:
    """'1 block', '2 blocks' (or of another noun: 'ABBA block')."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def cost_words(figure: PassCostFigure, others: Callable[[], str]) -> str:
    """The figure's ratio where it resolved, else what a report shows instead: 'not resolved (<why>)', why being
    too few blocks where that is so (it stands however quiet the host was), else others() (who took the CPUs, in
    hwprof.analysis.neighbours' words)."""
    if figure.resolved:
        return figure.ratio_text()
    return f"not resolved ({figure.too_few_blocks or others()})"


def quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def best_case_iqr(ratios: list[float], more: int) -> float:
    """The narrowest the blocks' quartiles could come after `more` blocks: every added block at one same ratio,
    the best placed (the quartiles are piecewise linear in it, so the best is at one of the ratios seen). Above
    UNRESOLVED_IQR, no `more` blocks can resolve the cost, whatever they measure: the noise already seen
    decides (hwprof.session.paired.extend)."""
    if not ratios:
        return 0.0
    if more <= 0:
        return _iqr(ratios)
    return min(_iqr([*ratios, *[x] * more]) for x in {statistics.median(ratios), *ratios})


def _iqr(values: list[float]) -> float:
    q1, q3 = quartiles(sorted(values))
    return q3 - q1


def block_ratios(on: dict[int, float], off: dict[int, float]) -> list[float]:
    """Per ABBA block: sum of its measured forwards / sum of its clean ones (blocks with both sides)."""
    out = []
    for b in sorted({i // 2 for i in on} & {i // 2 for i in off}):
        on_ms = [on[i] for i in (2 * b, 2 * b + 1) if i in on]
        off_ms = [off[i] for i in (2 * b, 2 * b + 1) if i in off]
        # a last block cut short: compare means, so an uneven count does not weigh one side
        out.append(statistics.fmean(on_ms) / statistics.fmean(off_ms))
    return out


def like_with_like(
    on: dict[int, float], off: dict[int, float], shapes: tuple[dict[int, str], dict[int, str]] | None
) -> tuple[dict[int, float], dict[int, float], str]:
    """The iterations of the ABBA blocks that held one input shape (measured and clean alike), where some did
    and some mixed shapes, and what was done ('' where every block held one shape, or no shapes are recorded).
    `shapes`: (measured, clean) iteration index -> input shape."""
    if not shapes or not shapes[0]:
        return on, off, ""
    measured, clean = shapes
    blocks = sorted({i // 2 for i in on} & {i // 2 for i in off})

    def kinds(b: int) -> set[str]:
        pair = (2 * b, 2 * b + 1)
        seen = {measured[i] for i in pair if i in on and i in measured}
        return seen | {clean[i] for i in pair if i in off and i in clean}

    mixed = [b for b in blocks if len(kinds(b)) > 1]
    if not mixed:
        return on, off, ""
    if len(mixed) == len(blocks):
        return on, off, f"mixed shapes: each of its {len(blocks)} ABBA blocks held forwards of different input shapes"
    keep = {i for b in blocks if b not in mixed for i in (2 * b, 2 * b + 1)}
    note = (
        f"{len(mixed)} of its {len(blocks)} ABBA blocks mixed input shapes and are left out: the figure compares "
        "like with like"
    )
    return {i: v for i, v in on.items() if i in keep}, {i: v for i, v in off.items() if i in keep}, note


def paired_cost(
    on: dict[int, float], off: dict[int, float], shapes: tuple[dict[int, str], dict[int, str]] | None = None
) -> PassCostFigure | None:
    """Measured and clean forward ms by their own iteration index (0, 1, ...); None without a block. `shapes`:
    each iteration's input shape (like_with_like)."""
    on, off, note = like_with_like(on, off, shapes)
    ratios = block_ratios(on, off)
    if not ratios:
        return None
    q1, q3 = quartiles(ratios)
    return PassCostFigure(
        PAIRED,
        statistics.median(ratios),
        min(ratios),
        max(ratios),
        q1,
        q3,
        len(ratios),
        ratios,
        statistics.median(on.values()),
        statistics.median(off.values()),
        shapes=note,
    )


def pass_level_cost(pass_forward_ms: list[float], timing_forward_ms: list[float]) -> PassCostFigure | None:
    """The pass's forward p50 over the timing pass's, spread by the timing pass's own quartiles."""
    if not pass_forward_ms or not timing_forward_ms:
        return None
    p50 = statistics.median(pass_forward_ms)
    base = statistics.median(timing_forward_ms)
    q1, q3 = quartiles(sorted(timing_forward_ms))
    return PassCostFigure(PASS_LEVEL, p50 / base, p50 / q3, p50 / q1, forward_on_ms=p50, forward_off_ms=base)


@dataclass
class PassFigures:
    """A pass's cost figures as run.json's passes.<name> holds them (see pass_figures)."""

    overhead: PassCostFigure | None
    overhead_pass_level: PassCostFigure | None


def pass_figures(
    markers: list[Marker],
    timing: list[Marker] | None,
    paired: PairedInfo | None,
    collectors: list[str],
    shapes: tuple[dict[int, str], dict[int, str]] | None = None,
) -> PassFigures:
    """run.json passes.<name> entries: "overhead" (the pass's own figure: paired where it interleaved
    clean iterations, else the pass-level estimate) and "overhead_pass_level" (always, given a timing pass).

    paired: the worker's result.json "paired" ({switched, always_on}), None when it did not interleave.
    """
    on = forward_ms_by_iteration(markers)
    level = pass_level_cost(list(on.values()), list(forward_ms_by_iteration(timing).values())) if timing else None
    if level is not None:
        level.covers = list(collectors)
    figure = paired_cost(on, clean_forward_ms_by_iteration(markers), shapes)
    if figure is not None:
        figure.covers = list(paired.switched or []) if paired else []
        figure.always_on = list(paired.always_on or []) if paired else []
        extension = paired.extension if paired else None
        if extension:
            figure.added_blocks = int(extension.added_blocks or 0)
            figure.extension = str(extension.text or "")
    else:
        figure = level
    return PassFigures(figure, level)
