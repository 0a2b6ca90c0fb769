"""Collectors switched on and off by iteration in one process, in ABBA blocks: their cost on the
forward stage measured where drift and other work on a shared machine hit both sides alike.

The layers pass's set-up (layer markers on; with `toggle_hooks`, on only in the "on" iterations,
so that "off" is the clean timing pass's model and "on" the whole collector pass); iterations run
off, on, on, off, ... Collectors are
opened before the model is built (counters must exist before torch starts its threads), started
and subscribed to the marker bus for the "on" iterations, stopped and unsubscribed after them.
Ratio per block = forward time with the collectors / without; the median over blocks is the
figure to trust on a busy host. Used by scripts/bench_counters_overhead.py and
scripts/bench_sampler_overhead.py.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hwprof.analysis.spans import forward_ms_by_iteration
from hwprof.collectors.base import Collector, PassContext
from hwprof.config import RunConfig
from hwprof.workload.images import discover
from hwprof.workload.markers import MarkerBus, MarkerLog


def is_on(iteration: int) -> bool:
    """ABBA: the 2nd and 3rd iteration of every block of four."""
    return iteration % 4 in (1, 2)


def abba_forward(
    config: RunConfig, make: Callable[[RunConfig], list[Collector]], pairs: int, toggle_hooks: bool = False
) -> dict[str, Any]:
    """Forward times with `make(config)`'s collectors on and off, over 2 * pairs measured iterations."""
    import torch

    from hwprof.workload.markers import attach_layer_markers
    from hwprof.workload.pipeline import Pipeline
    from hwprof.workload.zoo import build_model

    torch.set_num_threads(config.threads)
    bus = MarkerBus()
    log = MarkerLog()
    with tempfile.TemporaryDirectory(prefix="hwprof-paired-") as tmp:
        ctx = PassContext(config, Path(tmp), "layers", bus)
        ctx.out_dir.mkdir(parents=True)
        chosen = sorted(make(config), key=lambda c: c.order)
        for c in chosen:
            c.open(ctx)
        built = build_model(config.model, config.weights, config.seed)
        ctx.pipeline = Pipeline(config, bus, discover(None).paths, built)
        bus.subscribe(log)
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
                    bus.subscribe(c.on_marker)
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
    out["hooks"] = "on in the 'on' iterations only" if toggle_hooks else "on throughout"
    return out


def summarize(forward: dict[int, float], names: list[str], statuses: dict[str, str]) -> dict[str, Any]:
    on = [v for i, v in forward.items() if is_on(i)]
    off = [v for i, v in forward.items() if not is_on(i)]
    blocks = []
    for b in range(0, max(forward, default=-1) - 2, 4):
        block = [i for i in range(b, b + 4) if i in forward]
        if len(block) == 4:
            blocks.append(sum(forward[i] for i in block if is_on(i)) / sum(forward[i] for i in block if not is_on(i)))
    return {
        "collectors": names,
        "statuses": statuses,
        "forward_p50_on_ms": statistics.median(on),
        "forward_p50_off_ms": statistics.median(off),
        "ratio_p50": statistics.median(on) / statistics.median(off),
        "ratio_blocks": blocks,
        "ratio_median_block": statistics.median(blocks) if blocks else None,
    }
