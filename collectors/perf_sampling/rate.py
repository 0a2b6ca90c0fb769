"""How fast perf samples and for how many iterations: enough samples for a thin layer, from the timing pass's
forward, within the kernel's rate ceiling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hwprof.core.config import RunConfig


DEFAULT_RATE = 1000
"""Without a timing pass to size it from."""
MIN_AUTO_RATE = 250
MAX_AUTO_RATE = 500
"""At 35-45 us per sample (plan_sampling) 1 kHz cost yolov7-tiny at 320 about 6% of its forward
(the pass's own paired figure, 1.06 over 76 ABBA blocks); 500 Hz halves that, for twice the
iterations on a short forward."""
RATE_MARGIN = 1.3
SHARE_MARGIN = 1.6
"""The margin where the plan is sized from the layers pass's measured shares: the kernels pass's forward and the
layer's share there differ from the timing and layers passes' (yolov8n at 64: the smallest ranked layer got 53
samples for the 65 a 1.3 margin planned; sized for a layer at exactly 1%, the smallest ranked one is larger and
gets the surplus)."""
MAX_PASS_S = 60.0
"""The most forward time the auto plan gives the kernels pass's iterations, measured and clean."""
PAIRED = 2
"""Iterations the pass runs per measured one: the paired pass puts a clean one beside each (session.paired)."""
RESOLVING_BASE = 8
"""The measured iterations the plan starts from where the passes stop once resolved (no --iters): the fewest such a
pass runs (hwprof.session.pass_stop.floor, 4 ABBA blocks; test_pass_stop holds the two equal). With --iters the
plan starts from --iters. The rate then rises toward MAX_AUTO_RATE before iterations are added: at yolov7 640 (a
0.69 s forward, 2 threads) a layer at 1% gets its samples from 10 measured iterations at 500 Hz instead of 20 at
250 Hz."""


def max_sample_rate() -> int:
    try:
        return int(Path("/proc/sys/kernel/perf_event_max_sample_rate").read_text().strip())
    except (OSError, ValueError):
        return MAX_AUTO_RATE


@dataclass(frozen=True)
class SamplingPlan:
    rate: int
    """Samples/s per thread."""
    iterations: int
    """Measured iterations of the kernels pass."""
    how: str


def smallest_ranked_share(run_dir: Path) -> float | None:
    """The smallest share of forward (self time) among the layers the report ranks (the RANKED_LAYERS largest) at or
    above MIN_LAYER_SHARE in the layers pass, which runs before the kernels pass in a default collect; None where it
    did not run or timed no forward.

    Why: the plan sizes the kernels pass for a layer at exactly MIN_LAYER_SHARE, while the smallest layer the
    report must resolve is often larger (yolov8n at 256: its smallest layer above 1% got 109 samples for the 65
    planned), and iterations scale with the inverse of that share. Shares are scale-free, so the layers pass's
    own cost does not enter them. Only the ranked layers (issue 66): yolov7-tiny at 320 has 29 layers at or above
    1%, the smallest at 1.04%, where its 15th largest takes 1.83%; sized for the 29th, the kernels pass ran 114-120
    measured iterations (12 of the collect's 50 s) for layers the report does not rank. A layer at or above 1%
    outside them still says when it got too few samples (kernels.json's layers_with_too_few_samples)."""
    from hwprof.core.kernels import MIN_LAYER_SHARE, RANKED_LAYERS
    from hwprof.core.markers import read_markers
    from hwprof.core.spans import layer_self_ns, measured_spans

    path = run_dir / "passes" / "layers" / "markers.jsonl"
    if not path.is_file():
        return None
    try:
        spans = measured_spans(read_markers(path))
    except (OSError, ValueError):
        return None
    forward_ns = sum(s.dur_ns for s in spans if s.kind == "stage" and s.name == "forward")
    if forward_ns <= 0:
        return None
    shares = sorted((sum(v) / forward_ns for v in layer_self_ns(spans).values()), reverse=True)
    ranked = [share for share in shares[:RANKED_LAYERS] if share >= MIN_LAYER_SHARE]
    return min(ranked) if ranked else None


def samplers(config: RunConfig) -> int:
    """How many of torch's threads perf samples at the plan's rate: config.threads, one at least."""
    return max(1, config.threads)


def plan_sampling(
    config: RunConfig, forward_s: float | None, iteration_s: float | None = None, smallest_share: float | None = None
) -> SamplingPlan:
    """Rate and iterations for MIN_LAYER_SAMPLES samples in a layer at MIN_LAYER_SHARE of forward, or in the
    smallest layer at or above it where the layers pass measured the shares (`smallest_share`,
    smallest_ranked_share): every layer the report ranks by its kernels gets its samples, no more iterations.

    The cost of sampling grows with the rate (each sample is a timer interrupt: about 35-45 us on
    this project's VMs, i.e. ~4% of a CPU at 1 kHz, 12% at 4 kHz, 25% at 6.7 kHz on yolov7-tiny),
    while more iterations cost only time. So the rate stays at or under MAX_AUTO_RATE and a
    short forward gets more measured iterations instead, up to MAX_PASS_S of forward, or of whole iterations
    when the timing pass's iteration_s is given (a video's decode and encode, a program's own work between
    forwards: the pass pays for every stage of each added iteration). The cap counts the clean iteration the
    paired pass runs beside each measured one.

    perf samples each of torch's threads at the rate, and a layer's window collects the samples of every
    thread (those that compute and those that spin in OpenMP's barrier alike: on yolov8n at 256 with 2
    threads here, 2.27 samples per thread-period of forward), so the plan counts on config.threads samplers:
    planned for one, the smallest layer above 1% got 186 samples for the 65 planned.
    """
    from hwprof.core.kernels import MIN_LAYER_SAMPLES, MIN_LAYER_SHARE, RANKED_LAYERS

    ceiling = max_sample_rate()
    if config.perf_rate:
        return SamplingPlan(min(config.perf_rate, ceiling), config.iters, "--perf-rate")
    if not forward_s:
        return SamplingPlan(min(DEFAULT_RATE, ceiling), config.iters, "default (no timing pass to size it from)")
    threads = samplers(config)
    base = min(config.iters, RESOLVING_BASE) if config.extra.get("timing_resolve") else config.iters
    share, margin = MIN_LAYER_SHARE, RATE_MARGIN
    # sized for the smallest ranked layer where that asks fewer iterations than the plan for a layer at 1%
    if smallest_share and SHARE_MARGIN / smallest_share < RATE_MARGIN / MIN_LAYER_SHARE:
        share, margin = smallest_share, SHARE_MARGIN
    sized = margin == SHARE_MARGIN
    sample_iterations = margin * MIN_LAYER_SAMPLES / (share * forward_s * threads)
    rate = min(max(math.ceil(sample_iterations / base), MIN_AUTO_RATE), MAX_AUTO_RATE, ceiling)
    iterations = max(base, math.ceil(sample_iterations / rate))
    per_iteration_s = max(forward_s, iteration_s or 0.0)
    iterations = min(iterations, max(base, int(MAX_PASS_S / (PAIRED * per_iteration_s))))
    whole = f" of {per_iteration_s * 1e3:.1f} ms iterations" if per_iteration_s > forward_s else ""
    layer = (
        f"the smallest of the {RANKED_LAYERS} largest layers at or above {MIN_LAYER_SHARE:.0%} of the layers pass's "
        f"forward ({share:.1%})"
        if sized
        else f"a layer at {MIN_LAYER_SHARE:.0%}"
    )
    how = (
        f"auto: {MIN_LAYER_SAMPLES} samples (x{margin} margin) for {layer} of the "
        f"timing pass's forward ({forward_s * 1e3:.1f} ms) on {threads} thread{'s' * (threads > 1)}: {rate} Hz "
        f"(within [{MIN_AUTO_RATE}, {MAX_AUTO_RATE}]: sampling costs per sample) over {iterations} iterations "
        f"(at least {'--iters' if base == config.iters else base}, at most {MAX_PASS_S:.0f} s{whole} with their "
        "clean twins)"
    )
    return SamplingPlan(int(rate), int(iterations), how)
