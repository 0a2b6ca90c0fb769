"""Collectors switched on and off by iteration in one process, in ABBA blocks: their cost on the
forward stage measured where drift and other work on a shared machine hit both sides alike.

The layers pass's set-up (layer markers on; with `toggle_hooks`, on only in the "on" iterations,
so that "off" is the clean timing pass's model and "on" the whole collector pass); iterations run
off, on, on, off, ... Collectors are
opened before the model is built (counters must exist before torch starts its threads), started
and subscribed to the marker bus for the "on" iterations, stopped and unsubscribed after them.
Ratio per block = forward time with the collectors / without; the median over blocks is the
figure to trust on a busy host. Used by scripts/bench_*_overhead.py, and by the worker itself:
every pass with collectors that switch on and off (Collector.switchable) runs its measured
iterations in this order (`schedule`), with clean iterations between them, and so states its own
cost (hwprof.analysis.paired_cost).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hwprof.analysis.paired_cost import MIN_BLOCKS, UNRESOLVED_IQR, PassCostFigure, best_case_iqr, paired_cost
from hwprof.collectors.base import Collector, PassContext
from hwprof.core.config import RunConfig
from hwprof.core.markers import MarkerBus, MarkerLog
from hwprof.core.spans import forward_ms_by_iteration
from hwprof.schema.pass_files import PairedExtension
from hwprof.workload.images import discover


def is_on(iteration: int) -> bool:
    """ABBA: the 2nd and 3rd iteration of every block of four."""
    return iteration % 4 in (1, 2)


def schedule(measured: int, start: int = 0) -> list[tuple[bool, int]]:
    """(on, index) for a pass's measured iterations start..measured-1 and as many clean ones, each kind
    numbered from 0, in blocks of four: on 2b, clean 2b, clean 2b+1, on 2b+1 (a last odd block: on,
    clean; `start` odd completes it). The mirror image of is_on's order, so that the first iteration
    after start() is a measured one (collectors that measure only the first iterations, e.g. oneDNN's
    verbose log, see no clean one)."""
    out: list[tuple[bool, int]] = []
    for i in range(start, measured):
        out += [(True, i), (False, i)] if i % 2 == 0 else [(False, i), (True, i)]
    return out


RESOLVED, TIME, NOISE, ITERATIONS = "resolved", "time", "noise", "iterations"
"""Why an extension stopped (Extension.stopped_by)."""


@dataclass
class Extension:
    """ABBA blocks added after the planned ones because their ratios did not resolve the cost
    (result.json paired.extension; run.json shows it under passes.<pass>.overhead)."""

    planned_blocks: int
    planned_s: float
    limit_s: float
    """The planned blocks' own measured time x config.paired_extend_ratio, at most config.paired_extend_max_s."""
    reason: str
    added_blocks: int = 0
    used_s: float = 0.0
    stopped: str = ""
    stopped_by: str = ""
    """RESOLVED, TIME (no time left for the next block, or pair, at the pace of the last one, or for enough blocks
    to reach paired_cost.MIN_BLOCKS), NOISE (even every block the time left allows, all at one ratio, could not
    bring the quartiles within UNRESOLVED_IQR) or ITERATIONS (a collector's limit, reached or too near for
    MIN_BLOCKS). Added blocks that mixed input shapes are left out of the figure as planned ones are: the words
    then say how many."""
    resolved: bool = False

    @property
    def text(self) -> str:
        return (
            f"{self.added_blocks} ABBA block(s) added to the {self.planned_blocks} planned: {self.reason}; "
            f"stopped: {self.stopped} ({self.used_s:.1f} s of a {self.limit_s:.1f} s limit)"
        )

    def record(self) -> PairedExtension:
        """As result.json's paired.extension holds it: the fields, then the sentence."""
        return PairedExtension.of(**asdict(self), text=self.text)


@dataclass
class _Budget:
    """What the extension may still spend: time against its limit, and a collector's iteration limit."""

    limit_s: float
    started: float
    max_measured: int | None
    clock: Callable[[], float]

    def used(self) -> float:
        return self.clock() - self.started

    def fits(self, seconds: float) -> bool:
        return self.used() + seconds <= self.limit_s

    def blocks_in_time(self, block_s: float) -> int:
        """Blocks that fit in the time left at block_s each."""
        return int((self.limit_s - self.used()) // block_s) if block_s > 0 else 1 << 20

    def blocks_left(self, block_s: float, measured: int) -> int:
        """Blocks that fit in the time left at block_s each, and under the iteration limit."""
        left = self.blocks_in_time(block_s)
        if self.max_measured is not None:
            left = min(left, (self.max_measured - measured) // 2)
        return max(left, 0)


def extend(
    figure: Callable[[], PassCostFigure | None],
    step: Callable[[bool, int], None],
    measured: int,
    planned_s: float,
    config: RunConfig,
    max_measured: int | None = None,
    clock: Callable[[], float] = time.monotonic,
    deadline: float | None = None,
) -> tuple[int, Extension | None]:
    """After a paired pass's planned blocks (`measured` measured iterations, which took planned_s): while
    `figure()` does not resolve (too few blocks, paired_cost.MIN_BLOCKS, or quartiles too far apart), one more
    ABBA block through `step(on, index)`, within config.paired_extend_ratio x planned_s (at most
    config.paired_extend_max_s). Before each block it stops when the block would not fit at the last one's pace
    (TIME), past a collector's iteration limit (ITERATIONS), when the blocks within reach of either could not
    make MIN_BLOCKS (TIME or ITERATIONS, in words), or when even every block the time left allows, all at one
    ratio, could not bring the quartiles within UNRESOLVED_IQR (NOISE: best_case_iqr);
    between a block's two pairs it checks the time again (a host that slows mid-block overruns by one pair at
    most). `deadline` (time.monotonic() s: the pass's share of --budget) bounds the time too. Returns the measured
    count and the extension (None: the planned blocks resolved, or no figure)."""
    now = figure()
    if now is None or now.resolved:
        return measured, None
    first = now
    limit_s = min(planned_s * config.paired_extend_ratio, config.paired_extend_max_s)
    if deadline is not None:  # the pass's share of --budget (hwprof.session.budget)
        limit_s = min(limit_s, max(deadline - clock(), 0.0))
    budget = _Budget(limit_s, clock(), max_measured, clock)
    ext = Extension(now.blocks, round(planned_s, 3), round(budget.limit_s, 3), _why_extend(now))
    pair_s = planned_s / max(measured, 1)  # each measured iteration with its clean one (all, left out ones too)
    while not now.resolved:
        stop = _why_stop(now, budget, 2 * pair_s, measured)
        if stop:
            ext.stopped_by, ext.stopped = stop
            break
        steps = schedule(measured + 2, measured)
        done = 0
        for pair in (steps[:2], steps[2:]):  # each pair one measured and one clean iteration
            if done and not budget.fits(pair_s):  # the host slowed down mid-block: keep the first pair
                ext.stopped_by, ext.stopped = TIME, _time_words(budget, "pair")
                break
            pair_start = clock()
            for on, i in pair:
                step(on, i)
            pair_s = clock() - pair_start
            done += 1
        measured += done
        ext.added_blocks += 1
        now = figure() or now
        if ext.stopped:
            break
    if now.resolved:
        ext.stopped_by, ext.stopped = RESOLVED, "resolved"
    else:
        ext.stopped += _left_out_words(ext.added_blocks, now.blocks - first.blocks)
        if now.too_few_blocks and not ext.stopped.startswith("too few"):
            ext.stopped += f"; still {now.too_few_blocks}"
    ext.used_s = round(budget.used(), 3)
    ext.resolved = now.resolved
    return measured, ext


def _time_words(budget: _Budget, what: str) -> str:
    return (
        f"time bound (the next {what} would pass {budget.limit_s:.1f} s, the planned blocks' time x the extension "
        "ratio, at the pace of the last one)"
    )


def _why_extend(now: PassCostFigure) -> str:
    """Why the planned blocks did not resolve the cost (Extension.reason)."""
    if now.too_few_blocks:
        return f"the planned blocks were too few to resolve the cost ({now.too_few_blocks})"
    return (
        f"the planned blocks' ratios did not resolve the cost (quartiles {now.q1:.3f}-{now.q3:.3f}, more than "
        f"{UNRESOLVED_IQR:.2f} apart)"
    )


def _left_out_words(added: int, counted: int) -> str:
    """Where the added blocks did not all count (they mixed input shapes, as the figure's own blocks may): how many
    were left out, for the stop's words."""
    left_out = added - max(counted, 0)
    if added <= 0 or left_out <= 0:
        return ""
    return f"; {left_out} of the {added} added block(s) mixed input shapes and are left out of the figure"


def _why_stop(now: PassCostFigure, budget: _Budget, block_s: float, measured: int) -> tuple[str, str] | None:
    """(stopped_by, words) where another block should not run; None where it should."""
    if not budget.fits(block_s):
        return TIME, _time_words(budget, "block")
    if budget.max_measured is not None and measured + 2 > budget.max_measured:
        return ITERATIONS, f"a collector's limit of {budget.max_measured} measured iterations"
    left = budget.blocks_left(block_s, measured)
    if now.blocks + left < MIN_BLOCKS:  # not even every block within reach makes enough
        by_time = budget.blocks_in_time(block_s)
        bound = (
            f"a collector's limit of {budget.max_measured} measured iterations"
            if budget.max_measured is not None and left < by_time
            else f"the time left of a {budget.limit_s:.1f} s limit"
        )
        return (ITERATIONS if left < by_time else TIME), (
            f"too few blocks within reach ({now.blocks} of the {MIN_BLOCKS} a cost needs; {bound} allows {left} more)"
        )
    best = best_case_iqr(now.block_ratios, left)
    if best > UNRESOLVED_IQR:
        return NOISE, (
            f"noise (the {now.blocks} blocks' ratios, quartiles {now.q1:.3f}-{now.q3:.3f}, are so spread that even "
            f"the {left} block(s) the time left allows, all at one ratio, could not bring the quartiles within "
            f"{UNRESOLVED_IQR:.2f}: at best {best:.3f})"
        )
    return None


@dataclass
class AbbaFigures:
    """Forward ms with a set of collectors on and off, by ABBA block (summarize), for the overhead benchmarks."""

    collectors: list[str]
    statuses: dict[str, str]
    """Collector -> the status its close() gave."""
    forward_p50_on_ms: float
    forward_p50_off_ms: float
    ratio_p50: float
    ratio_blocks: list[float]
    ratio_median_block: float | None
    hooks: str = ""
    """abba_forward only: whether the layer markers' hooks were on throughout or in the 'on' iterations."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.hooks:
            del out["hooks"]
        return out


def abba_forward(
    config: RunConfig, make: Callable[[RunConfig], list[Collector]], pairs: int, toggle_hooks: bool = False
) -> AbbaFigures:
    """Forward times with `make(config)`'s collectors on and off, over 2 * pairs measured iterations."""
    import torch

    from hwprof.core.markers import attach_layer_markers
    from hwprof.workload.init_scale import build_for_run
    from hwprof.workload.pipeline import Pipeline

    torch.set_num_threads(config.threads)
    bus = MarkerBus()
    log = MarkerLog()
    with tempfile.TemporaryDirectory(prefix="hwprof-paired-") as tmp:
        ctx = PassContext(config, Path(tmp), "layers", bus)
        ctx.out_dir.mkdir(parents=True)
        chosen = sorted(make(config), key=lambda c: c.order)
        for c in chosen:
            c.open(ctx)
        images = discover(None).paths
        built = build_for_run(config, images, None)
        ctx.pipeline = Pipeline(config, bus, images, built)
        bus.keep_spans(log)
        remove_hooks = attach_layer_markers(built.module, bus, config.depth)
        for c in chosen:
            c.prepare(ctx)
        for i in range(config.warmup):
            ctx.pipeline.run_iteration(i - config.warmup, warmup=True)
        if toggle_hooks:
            remove_hooks()
        for i in range(2 * pairs):
            if is_on(i):
                if toggle_hooks:
                    remove_hooks = attach_layer_markers(built.module, bus, config.depth)
                for c in chosen:
                    bus.subscribe(c.on_marker, c.wants_layer_markers())
                    c.start(ctx)
            ctx.pipeline.run_iteration(i, warmup=False)
            if is_on(i):
                for c in chosen:
                    c.stop(ctx)
                    bus.unsubscribe(c.on_marker)
                if toggle_hooks:
                    remove_hooks()
        results = {c.name: c.close(ctx) for c in chosen}
    forward = forward_ms_by_iteration(log.markers)
    out = summarize(forward, [c.name for c in chosen], {n: r.status for n, r in results.items()})
    out.hooks = "on in the 'on' iterations only" if toggle_hooks else "on throughout"
    return out


def summarize(forward: dict[int, float], names: list[str], statuses: dict[str, str]) -> AbbaFigures:
    """Forward ms by ABBA position (0, 1, 2, ...) summarised as paired_cost does for a pass."""
    on = {(i // 4) * 2 + (i % 4 - 1): v for i, v in forward.items() if is_on(i)}
    off = {(i // 4) * 2 + (i % 4) // 3: v for i, v in forward.items() if not is_on(i)}
    cost = paired_cost(on, off)
    return AbbaFigures(
        collectors=names,
        statuses=statuses,
        forward_p50_on_ms=statistics.median(on.values()),
        forward_p50_off_ms=statistics.median(off.values()),
        ratio_p50=statistics.median(on.values()) / statistics.median(off.values()),
        ratio_blocks=cost.block_ratios if cost else [],
        ratio_median_block=cost.ratio if cost else None,
    )
