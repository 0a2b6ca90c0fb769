"""The time column of the per-layer table: which pass's layer markers give the times, the clean forward they
are scaled to, and the note that says how (the why is in analysis/layers/report.py's docstring)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hwprof.analysis.layers.stats import IterationTimes, iteration_times, time_pass
from hwprof.analysis.neighbours import others_text, pass_load, timing_disturbance
from hwprof.analysis.paired_cost import blocks_text, cost_words, paired_cost
from hwprof.core.spans import clean_forward_ms_by_iteration, forward_ms_by_iteration, forward_p50, measured_spans

if TYPE_CHECKING:
    from hwprof.analysis.paired_cost import PassCostFigure
    from hwprof.rundir.reader import RunData

HOST_TIME_ON_GPU = (
    "on {device} a layer's time is host time: the layer hooks do not synchronise, so it is the time "
    "spent launching the layer's kernels (and waiting wherever the host synchronises); the GPU's own "
    "time per layer is in 'layers by GPU time'"
)


PROCESS_RATIO_LIMIT = 1.5
"""Two processes whose clean forwards differ by more than this ran at different speeds (the host's load changed
between them): a layer's rate then comes from its own pass's times (TimeScale.rate_forward_ms)."""


@dataclass
class TimeScale:
    """Where the per-layer times come from and the forward they are scaled to (see the module's docstring)."""

    source: str | None
    """The pass whose layer markers give the times."""
    times: IterationTimes
    source_fwd: float | None
    """That pass's forward p50 (ms)."""
    timing_fwd: float | None = None
    """The timing pass's forward p50 (ms): the forward the layers add up to, when there is a timing pass."""
    paired: PassCostFigure | None = None
    """The source pass's own cost, paired in it."""
    scale: float | None = None
    forward_ms: float | None = None

    @property
    def its(self) -> list[int]:
        return self.times.iterations

    def mean_share(self, values: Mapping[int, float]) -> float:
        """A layer's mean share of forward over the measured iterations (self ns / that iteration's forward)."""
        return statistics.fmean(values.get(i, 0.0) / self.times.forward_ns[i] for i in self.its)

    @property
    def process_ratio(self) -> float | None:
        """The source pass's own clean forward (its forward p50 / its paired cost: the hooks taken out, in its own
        process) over the timing pass's: how differently fast the two processes ran; None where not measured."""
        if not (self.timing_fwd and self.source_fwd and self.paired is not None and self.paired.ratio):
            return None
        return self.source_fwd / self.paired.ratio / self.timing_fwd

    @property
    def rate_forward_ms(self) -> float | None:
        """The forward the layers' GFLOP/s and GB/s are taken against: the one the times are scaled to, unless the
        two processes ran at speeds more than PROCESS_RATIO_LIMIT apart (their clean forwards compared): then the
        source pass's own clean forward, so that a rate is one the CPU reached in one process (a host whose load
        changed between the passes made scaled rates of 3,855 GFLOP/s on a 2-core VM whose probe peaked at 461)."""
        ratio = self.process_ratio
        if ratio is not None and not 1 / PROCESS_RATIO_LIMIT <= ratio <= PROCESS_RATIO_LIMIT:
            assert self.source_fwd is not None and self.paired is not None
            return self.source_fwd / self.paired.ratio
        return self.forward_ms

    @property
    def rates_unscaled(self) -> bool:
        return self.rate_forward_ms is not None and self.rate_forward_ms != self.forward_ms

    @property
    def scale_paired(self) -> bool:
        return not self.timing_fwd and self.paired is not None and self.source_fwd is not None


def time_scale(data: RunData) -> TimeScale:
    """The source pass, its per-iteration layer times, and the clean forward they are scaled to."""
    source, spans = time_pass(data)
    out = TimeScale(source, iteration_times(spans), forward_p50(spans) if source is not None else None)
    if source is not None and source != "timing":
        markers = data.markers(source)
        entry = data.doc.passes.get(source)
        shapes = entry.inputs.by_iteration() if entry is not None and entry.inputs is not None else None
        # like with like, as run.json's passes.<source>.overhead: the blocks that mixed input shapes left out
        out.paired = paired_cost(forward_ms_by_iteration(markers), clean_forward_ms_by_iteration(markers), shapes)
        if "timing" in data.pass_names:
            out.timing_fwd = forward_p50(measured_spans(data.markers("timing")))
    out.scale = out.timing_fwd / out.source_fwd if (out.timing_fwd and out.source_fwd) else None
    out.forward_ms = out.timing_fwd if out.timing_fwd else out.source_fwd
    if not out.timing_fwd and out.paired is not None and out.source_fwd:
        out.scale = 1 / out.paired.ratio
        out.forward_ms = out.source_fwd * out.scale
    return out


def time_note(data: RunData, ts: TimeScale, device: str) -> str:
    """How the time column was derived, in words, for the run at hand."""
    source, its, paired = ts.source, ts.its, ts.paired
    cost = (
        f"the {source} pass's own cost, paired in it: "
        f"{cost_words(paired, lambda: others_text(pass_load(data.doc, source)))} (median of "
        f"{blocks_text(paired.blocks, 'ABBA block')} of clean and measured iterations in one process)"
        if paired is not None and source is not None
        else f"the {source} pass ran no clean iterations: its cost is a pass-level estimate"
    )
    if not its:
        note = "no per-layer times"
    elif ts.timing_fwd:
        disturbed = timing_disturbance(data.doc)
        note = (
            f"layer time = its mean share of forward over {len(its)} iterations of the {source} pass "
            f"(self time / that iteration's forward) x the forward the report states, the "
            f"{'disturbed' if disturbed else 'clean'} timing pass's p50 {ts.timing_fwd:.2f} ms (scaled "
            f"x{ts.scale:.3f} from the {source} pass's {ts.source_fwd:.2f} ms: the shares are scale-free, so this "
            f"factor is the two processes' difference, not a cost); {cost}; the hooks' cost is spread over the "
            "layers in proportion to their time"
        )
        if disturbed:  # by what: the stages' note, just above
            note = f"The timing pass was disturbed (see the stages): every layer time below is scaled to it. {note}"
    elif paired is not None and ts.source_fwd:
        note = (
            f"layer time = its mean share of forward over {len(its)} iterations of the {source} pass "
            f"(self time / that iteration's forward) x that pass's clean forward {ts.forward_ms:.2f} ms (no timing "
            f"pass): its forward p50 {ts.source_fwd:.2f} ms / the median of its blocks' ratios {paired.ratio:.3f}; "
            f"{cost}; the hooks' cost is spread over the layers in proportion to their time"
        )
    else:
        note = (
            f"layer time = its mean share of forward over {len(its)} iterations of the {source} pass x "
            f"that pass's forward p50 {ts.source_fwd:.2f} ms: NOT scaled (no clean timing pass), the hooks' "
            "overhead is included"
        )
    if ts.rates_unscaled and its:
        note += (
            f"; GFLOP/s and GB/s against the {source} pass's own clean forward ({ts.rate_forward_ms:.2f} ms), not the "
            f"timing pass's: its clean iterations ran {ts.process_ratio:.2f}x the timing pass's forward, so the two "
            "processes ran at different speeds and a rate scaled across them would be one the CPU never reached"
        )
    if device != "cpu" and its:
        note = f"{HOST_TIME_ON_GPU.format(device=device)}; {note}"
    return note
