"""The performance gate's judgement of two separately collected runs (`hwprof compare BASE NEW --fail-above 5%`):
pure functions from each run's own samples to a verdict (hwprof.analysis.gate.verdict states it; the paired mode,
hwprof.analysis.gate.paired, judges ABBA blocks of one process instead).

Timed figures (the forward, the whole iteration, each layer above a share of forward) are judged on a
bootstrap confidence interval of the ratio of medians NEW / BASE over each run's measured iterations: both
runs' iterations are resampled independently (seeded), and the interval is the central `confidence` part of
the resampled ratios. A figure fails when the whole interval lies above 1 + threshold (NEW resolved slower
by more than the threshold), passes when the whole interval lies below it, and is "not resolved" when the
interval straddles it: the runs' spreads cannot tell. Counted figures (callgrind's simulated instructions
and, with a miss threshold, cache misses) are exact: they fail when NEW's count exceeds BASE's by more than
the threshold.

Layers are matched by their qualified name ("model.7") and type; a layer in one run only, or of another
type, is listed and not gated (the comparison tables match layers their own way).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hwprof.analysis.gate.verdict import (
    COUNT_FLOOR,
    FAIL,
    MIN_SAMPLES,
    PASS,
    SHARE,
    UNRESOLVED,
    Figure,
    GateError,
    GateOptions,
    verdict_of,
)

if TYPE_CHECKING:
    from hwprof.analysis.gate.verdict import Verdict

WAY_TO_A_VERDICT = (
    "for a verdict, measure both sides in one process (--paired N: a load on the host then hits both alike) or gate "
    "callgrind's exact counts (collect with --counters callgrind, then --gate-on counts)"
)
"""What to do when a run's pass was unfit for a timed verdict (hwprof.analysis.health)."""

INSTRUCTIONS = "instructions"
MISS_EVENTS = ("LLC-load-misses", "L1-dcache-load-misses")
"""Simulated cache misses: gated only with a miss threshold (--miss-threshold). They move with the memory layout:
two collects of one yolov8n configuration at 64 differing only in the timing pass's --iters had identical
layers' instructions to 0.4% but L1D misses up to 1.6% and the forward's LLC misses 85% apart."""
"""Counted figures the exact gate compares, where both runs recorded them."""


@dataclass
class LayerSamples:
    type: str
    ms: list[float]
    """Self time per measured iteration of the run's layer-time pass."""
    share: float | None
    kernel: str = ""
    shares: list[float] = field(default_factory=list)
    """Self time / that iteration's forward, per measured iteration of the layer-time pass."""
    """The kernel that ran most of the layer ("" where the run does not record it)."""


@dataclass
class GateRun:
    """What the gate reads of one run (hwprof.analysis.gate.inputs builds it from a run directory)."""

    label: str
    forward_ms: list[float] = field(default_factory=list)
    iteration_ms: list[float] = field(default_factory=list)
    layers: dict[str, LayerSamples] = field(default_factory=dict)
    layer_pass: str | None = None
    counts: dict[str, dict[str, float]] | None = None
    """Callgrind counts per measured iteration: "forward" and each layer name -> event -> count."""
    identity: dict[str, str] = field(default_factory=dict)
    """model, imgsz, batch, runtime, precision, threads: what must match for a like-for-like gate."""
    unfit: dict[str, str] = field(default_factory=dict)
    """The run's passes whose figures may not carry a verdict, with why (hwprof.analysis.health.RunHealth)."""

    def why_unfit(self, figure: str) -> str | None:
        """Why the pass that measured this timed figure (the timing pass for the forward and the iteration, the
        layer pass for a layer) may not carry a verdict, or None."""
        source = "timing" if figure in ("forward", "iteration") else self.layer_pass
        return self.unfit.get(source or "")


def bootstrap_ratio(
    base: list[float], new: list[float], confidence: float, resamples: int, seed: int
) -> tuple[float, float, float]:
    """median(new) / median(base), and the percentile bootstrap interval of that ratio."""
    import numpy as np

    a, b = np.asarray(base, dtype=float), np.asarray(new, dtype=float)
    rng = np.random.default_rng(seed)
    meds_a = np.median(a[rng.integers(0, len(a), (resamples, len(a)))], axis=1)
    meds_b = np.median(b[rng.integers(0, len(b), (resamples, len(b)))], axis=1)
    ratios = meds_b / meds_a
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(np.median(b) / np.median(a)), float(low), float(high)


def time_figure(name: str, base: list[float], new: list[float], opts: GateOptions) -> Figure:
    """The ratio of medians and its bootstrap interval, judged; with fewer than MIN_SAMPLES in either run the
    ratio alone, not resolved."""
    import statistics

    medians = statistics.median(base), statistics.median(new)
    n = (len(base), len(new))
    if min(n) < MIN_SAMPLES:
        return Figure(name, "time", *medians, medians[1] / medians[0], UNRESOLVED, n=n)
    ratio, low, high = bootstrap_ratio(base, new, opts.confidence, opts.resamples, opts.seed)
    limit = 1 + opts.fail_above
    outcome = FAIL if low > limit else PASS if high < limit else UNRESOLVED
    return Figure(name, "time", *medians, ratio, outcome, low, high, n)


def unjudged(figure: str, base: GateRun, new: GateRun, n: tuple[int, int]) -> tuple[str, str]:
    """Why a timed figure may not be judged whatever its spread, and the way to a verdict (("", "") where it may):
    fewer than MIN_SAMPLES measured iterations in a run, or a run's pass that measured it unfit for a verdict (the
    same health the report's findings ask, hwprof.analysis.health)."""
    if min(n) < MIN_SAMPLES:
        return (
            f"{n[0]} and {n[1]} measured iterations, at least {MIN_SAMPLES} in each run needed",
            f"collect with --iters {MIN_SAMPLES} or more",
        )
    reasons = [f"{side}'s run: {why}" for side, run in (("BASE", base), ("NEW", new)) if (why := run.why_unfit(figure))]
    return ("; ".join(reasons), WAY_TO_A_VERDICT) if reasons else ("", "")


def count_figures(base: GateRun, new: GateRun, opts: GateOptions) -> list[Figure]:
    """Exact: the instructions of the forward and of every layer both runs counted (and their simulated cache
    misses, with a miss threshold); growth beyond the threshold fails."""
    if base.counts is None or new.counts is None:
        return []
    out = []
    names = ["forward", *[n for n in base.counts if n != "forward" and n in new.counts]]
    for name in names:
        if name not in base.counts or name not in new.counts:
            continue
        events = [(INSTRUCTIONS, opts.count_threshold)]
        events += [(e, opts.miss_threshold) for e in MISS_EVENTS if opts.miss_threshold is not None]
        for event, threshold in events:
            a, b = base.counts[name].get(event), new.counts[name].get(event)
            if a is None or b is None or a <= 0 or max(a, b) < COUNT_FLOOR:
                continue
            outcome = FAIL if b > a * (1 + threshold) else PASS
            label = name if name == "forward" else _layer_label(name, base)
            out.append(Figure(label, event, a, b, b / a, outcome))
    return out


def _layer_label(name: str, run: GateRun) -> str:
    layer = run.layers.get(name)
    return f"{name} {layer.type}" if layer else name


def gated_layers(base: GateRun, new: GateRun, share: float) -> tuple[list[str], list[str]]:
    """Layer names to gate on time (share of forward >= share in either run, same type in both), and notes on
    the layers that could not be matched."""
    names, notes = [], []
    for name, a in base.layers.items():
        b = new.layers.get(name)
        if b is None:
            notes.append(f"layer {name} ({a.type}) is in BASE only: not gated")
        elif b.type != a.type:
            notes.append(f"layer {name} is {a.type} in BASE and {b.type} in NEW: not gated")
        elif max(a.share or 0, b.share or 0) >= share and a.ms and b.ms:
            names.append(name)
    notes += [f"layer {n} ({b.type}) is in NEW only: not gated" for n, b in new.layers.items() if n not in base.layers]
    return names, notes


def differences(base: GateRun, new: GateRun) -> list[str]:
    return [
        f"{key} {base.identity.get(key)} vs {new.identity.get(key)}"
        for key in ("model", "imgsz", "batch", "runtime", "precision", "threads")
        if base.identity.get(key) != new.identity.get(key)
    ]


REFUSED_DIFFERENCES = ("model", "imgsz", "batch", "runtime", "precision")


def refuse_differences(differ: list[str], opts: GateOptions) -> None:
    """GateError where the runs differ in what a like-for-like gate needs and --gate-different was not given."""
    refused = [d for d in differ if d.split()[0] in REFUSED_DIFFERENCES]
    if refused and not opts.allow_different:
        raise GateError(
            f"the runs differ in {'; '.join(refused)}: the gate compares like with like "
            "(pass --gate-different to gate them anyway)"
        )


def check_inputs(base: GateRun, new: GateRun, opts: GateOptions) -> list[str]:
    """Notes on how the runs differ; GateError where the gate has nothing to compare or the runs differ in
    what a like-for-like gate needs and --gate-different was not given."""
    differ = differences(base, new)
    refuse_differences(differ, opts)
    counted = base.counts is not None and new.counts is not None
    if opts.gate_on == "counts" and not counted:
        side, run = ("BASE", base) if base.counts is None else ("NEW", new)
        raise GateError(
            f"--gate-on counts: {side} ({run.label}) has no callgrind counts (collect with --counters callgrind)"
        )
    if opts.gate_on == "time":
        counted = False
    for side, run in (("BASE", base), ("NEW", new)):
        if not run.forward_ms and not counted and opts.gate_on != "counts":
            raise GateError(
                f"{side} ({run.label}) has no measured forward (no timing pass) and the runs have no callgrind counts "
                "to gate on"
            )
    if bool(base.layers) != bool(new.layers) and opts.gate_on != "counts":
        side, run = ("BASE", base) if not base.layers else ("NEW", new)
        raise GateError(f"{side} ({run.label}) has no per-layer times (no layers pass): its layers cannot be gated")
    return [f"the runs differ in {d}" for d in differ]


def _timed(
    base: GateRun, new: GateRun, names: list[str], layer_stat: str
) -> list[tuple[str, list[float], list[float], tuple[str, str], str]]:
    """(figure, BASE samples, NEW samples, kernels, kind) of every timed figure both runs have."""
    out = [
        ("forward", base.forward_ms, new.forward_ms, ("", ""), "time"),
        ("iteration", base.iteration_ms, new.iteration_ms, ("", ""), "time"),
    ]
    for n in names:
        a, b = base.layers[n], new.layers[n]
        by_share = layer_stat == SHARE and bool(a.shares) and bool(b.shares)
        samples = (a.shares, b.shares) if by_share else (a.ms, b.ms)
        out.append((f"{n} {a.type}", *samples, (a.kernel, b.kernel), SHARE if by_share else "time"))
    return [t for t in out if t[1] and t[2]]


def judge(base: GateRun, new: GateRun, opts: GateOptions) -> Verdict:
    """The gate's verdict on NEW against BASE (see the module's docstring)."""
    notes = check_inputs(base, new, opts)
    names, layer_notes = gated_layers(base, new, opts.share) if base.layers else ([], [])
    tables = [{(n, s.type) for n, s in run.layers.items()} for run in (base, new)]
    if base.identity.get("model") != new.identity.get("model") and tables[0] != tables[1]:
        names, layer_notes = [], ["the runs are of different models whose layer tables differ: no layer is gated"]
    timed = _timed(base, new, names, opts.layer_stat) if opts.gate_on != "counts" else []
    figures: list[Figure] = []
    for name, a, b, kernels, kind in timed:
        figure = time_figure(name, a, b, opts)
        figure.kernels, figure.kind = kernels, kind
        figure.why, figure.way = unjudged(figure.name.split(" ")[0], base, new, figure.n)
        if figure.why:
            figure.outcome = UNRESOLVED
        figures.append(figure)
    n_layers = len(figures) - sum(f.name in ("forward", "iteration") for f in figures)
    figures += count_figures(base, new, opts) if opts.gate_on != "time" else []
    if not figures:
        raise GateError("the runs have no figure in common to gate (forward, iteration, layers or callgrind counts)")
    if opts.gate_on == "counts":
        notes.append("--gate-on counts: only callgrind's counts are gated, no time")
    elif (base.counts is None) != (new.counts is None):
        notes.append("only one run has callgrind counts: the exact gate did not run")
    if (
        base.counts is not None
        and new.counts is not None
        and {base.identity.get("threads"), new.identity.get("threads")} != {"1"}
    ):
        notes.append(
            "callgrind counts of runs with more than one thread include the OpenMP workers' waits (single layers "
            "differed by up to 1.7% between identical runs here): collect with --threads 1 for an exact gate"
        )
    notes += layer_notes
    if not base.layers and opts.gate_on != "counts":
        notes.append("neither run has per-layer times (no layers pass): no layer is gated on time")
    return verdict_of(figures, notes, opts, base.label, new.label, n_layers)
