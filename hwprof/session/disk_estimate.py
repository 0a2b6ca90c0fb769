"""How much disk a collection will at least write, and the refusal to start one that clearly cannot fit.

The estimate is a lower bound, built so that it never refuses a run that would fit: collect refuses only
when the free space is below it. It sums, over the planned passes, what each pass writes (markers.jsonl,
model.json, command.json, result.json, runtime.json: a constant plus a term per warm-up or measured
iteration) and what each of its collectors writes (files named <collector>.*: a constant plus a term per
measured iteration; warm-up iterations are not profiled), times SAFETY.

Where the figures come from: two default-plan collects of yolov8n at imgsz 64 on this project's 2-core VM,
--warmup 1 --iters 2 and --warmup 3 --iters 20 (apparent file sizes; the measurements and the script are in
the issue-24 note of the "writes" branch). Each term is the straight line through the two runs; where that
line's constant came out negative (the run grows faster than linearly), the constant is 0 and the slope is
the small run's bytes per iteration, which stays below the line for more iterations. yolov8n has 23
top-level layers, the fewest of any model hwprof knows: a bigger model writes more per iteration, so no
per-layer term is needed for a lower bound. What grows with wall time rather than iterations (the
samplers: sysstat, perf sampling, py-spy, Scalene; the kernels pass, whose iteration count follows a time
budget) counts only its files' constant part, or nothing: a faster machine samples less. Passes and
collectors not measured (other runtimes, GPU, callgrind, PAPI, RAPL) count nothing, nor do the rendered
files (trace.pftrace, plots), which the default yolov8n run adds about 4.8 MB of.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwprof.core.atomic import RESERVE_BYTES, free_bytes, human_bytes, mount_of
from hwprof.core.config import RunConfig
from hwprof.session.plan import Plan

RUN_FILES_BYTES = 8_900
"""run.json as first written (8,069 B for yolov8n), config.json (553 B), images.json (296 B)."""

SAFETY = 0.8
"""Room for what varies between runs of one plan: the digits of measured figures, thread counts."""

PASS_BYTES: dict[str, tuple[int, int]] = {
    "timing": (12_459, 540),
    "layers": (10_688, 3_452),  # with flops alone (perf_events adds ~14 KB of paired figures to result.json)
    "kernels": (10_906, 0),  # model.json, command.json, result.json, runtime.json; markers follow time
    "trace": (12_397, 3_456),
    "scalene": (10_725, 3_456),
}
"""pass -> (constant, bytes per warm-up or measured iteration) of the files every pass writes."""

COLLECTOR_BYTES: dict[str, tuple[int, int]] = {
    "timing": (645, 80),  # timing.pyperf.json
    "flops": (4_935, 0),
    "perf_events": (76_531, 16_090),  # readings and records: one line per layer marker
    "torch_profiler": (135_273, 757_307),  # the Kineto trace (kept raw) and its records
}
"""collector -> (constant, bytes per measured iteration) of its own files; samplers are absent (0)."""


@dataclass
class SizeEstimate:
    bytes: int
    """At least this many bytes, reserve included."""
    iterations: int
    passes: dict[str, int] = field(default_factory=dict)
    reserve: int = RESERVE_BYTES
    method: str = (
        "lower bound: per-pass and per-collector bytes measured on yolov8n, times warmup+iters or iters, "
        "times 0.8; samplers and rendered files not counted (hwprof.session.disk_estimate)"
    )

    def to_dict(self) -> dict[str, Any]:
        return {
            "bytes": self.bytes,
            "iterations": self.iterations,
            "passes": self.passes,
            "reserve": self.reserve,
            "method": self.method,
        }


def estimate(plan: Plan, config: RunConfig) -> SizeEstimate:
    """The least a collection of this plan writes (see the module's docstring for what counts)."""
    iterations = config.warmup + config.iters
    measured = config.device == "cpu" and config.runtime == "torch"
    passes: dict[str, int] = {}
    for p in plan.passes:
        if not measured:
            passes[p.name] = 0
            continue
        const, per_iter = PASS_BYTES.get(p.name, (0, 0))
        size = const + per_iter * iterations
        for c in p.collectors:
            const, per_iter = COLLECTOR_BYTES.get(c.name, (0, 0))
            size += const + per_iter * config.iters
        passes[p.name] = int(size * SAFETY)
    total = RUN_FILES_BYTES + sum(passes.values()) + RESERVE_BYTES
    return SizeEstimate(total, iterations, passes)


class DiskSpaceError(ValueError):
    """The run clearly cannot fit where it would be written: a bad input (exit 2), refused before it starts."""


def check_free(where: Path, est: SizeEstimate) -> None:
    """Refuse when the free space on `where`'s filesystem is below the (lower-bound) estimate."""
    free = free_bytes(where)
    if free is not None and free < est.bytes:
        raise DiskSpaceError(
            f"this run needs at least {human_bytes(est.bytes)} (estimate for {est.iterations} iterations of "
            f"{', '.join(est.passes)}) but {mount_of(where)} has {human_bytes(free)} free (writing {where})"
        )
