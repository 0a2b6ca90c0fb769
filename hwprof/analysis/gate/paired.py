"""The performance gate's paired mode (`hwprof compare BASE NEW --fail-above 5% --paired N`): BASE's and NEW's
configurations measured in one process, in ABBA blocks (hwprof.advisor.paired_worker, as `hwprof advise` measures
a variant against its baseline), judged on the blocks' NEW/BASE ratios, so that a shift of the whole machine
between two processes (which separate runs cannot tell from a regression) hits both sides alike."""

from __future__ import annotations

from hwprof.analysis.gate.verdict import (
    FAIL,
    MIN_SAMPLES,
    PAIRED,
    PASS,
    UNRESOLVED,
    Figure,
    GateError,
    GateOptions,
    Verdict,
    verdict_of,
)


def block_ratios(base: dict[int, float], new: dict[int, float]) -> list[float]:
    """NEW / BASE per ABBA block (side iterations 2b and 2b+1 of each side: A B B A), blocks both sides finished."""
    out = []
    for b in sorted({k // 2 for k in base} & {k // 2 for k in new}):
        a, n = (base.get(2 * b), base.get(2 * b + 1)), (new.get(2 * b), new.get(2 * b + 1))
        if None not in a and None not in n:
            out.append((n[0] + n[1]) / (a[0] + a[1]))  # type: ignore[operator]
    return out


def paired_figure(name: str, base: dict[int, float], new: dict[int, float], opts: GateOptions) -> Figure | None:
    """The median of the blocks' ratios, with the percentile bootstrap interval of that median (blocks
    resampled); None with fewer than MIN_SAMPLES blocks."""
    import statistics

    import numpy as np

    ratios = block_ratios(base, new)
    if len(ratios) < MIN_SAMPLES:
        return None
    r = np.asarray(ratios)
    rng = np.random.default_rng(opts.seed)
    meds = np.median(r[rng.integers(0, len(r), (opts.resamples, len(r)))], axis=1)
    tail = (1 - opts.confidence) / 2 * 100
    low, high = (float(x) for x in np.percentile(meds, [tail, 100 - tail]))
    limit = 1 + opts.fail_above
    outcome = FAIL if low > limit else PASS if high < limit else UNRESOLVED
    medians = statistics.median(base.values()), statistics.median(new.values())
    return Figure(name, PAIRED, *medians, float(np.median(r)), outcome, low, high, (len(ratios), len(ratios)))


IN_PROCESS = "BASE's and NEW's configurations in one process"
BY_PROCESS = (
    "BASE's and NEW's programs run whole, each run a fresh process (two programs cannot share one), in ABBA "
    "order; a run's figure is the median of its measured calls"
)


def judge_paired(
    base: str,
    new: str,
    sides: dict[str, tuple[dict[int, float], dict[int, float]]],
    opts: GateOptions,
    how: str = IN_PROCESS,
) -> Verdict:
    """The verdict on figures measured in ABBA blocks of both sides ("forward", "iteration" -> BASE and NEW ms by
    side iteration): in one process (IN_PROCESS), or by whole runs in ABBA order (BY_PROCESS): shifts of the
    machine that last longer than a block hit both sides alike."""
    figures = [f for name, (a, b) in sides.items() if (f := paired_figure(name, a, b, opts)) is not None]
    if not figures:
        raise GateError(f"the paired measure finished fewer than {MIN_SAMPLES} ABBA blocks: nothing to gate")
    notes = [f"paired: {figures[0].n[0]} ABBA blocks (A B B A) of {how}"]
    v = verdict_of(figures, notes, opts, base, new, 0)
    v.method = (
        f"paired: {how}, ABBA blocks; per figure the median of the blocks' "
        f"NEW/BASE ratios with its {opts.confidence:.0%} percentile bootstrap interval ({opts.resamples} resamples "
        f"of the blocks, seed {opts.seed}); fail when the whole interval is above x{1 + opts.fail_above:.3f} "
        f"(--fail-above {opts.fail_above:.1%}), pass when it is below, not resolved when it straddles"
    )
    return v
