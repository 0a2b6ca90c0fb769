"""Whether a pass's figures may carry a verdict: the one place the gate, the findings, the advice's "answers"
column and compare ask before they speak.

A figure is only as good as the pass that measured it. A pass is unfit for a verdict when
- other work took more than DISTURBED_SHARE of the run's CPUs during it (the processes named:
  hwprof.analysis.neighbours), or, for the timing pass, its forward p50 ran more than DISTURBED_P50_RATIO x a
  paired pass's clean iterations;
- it is the pass the layer times come from and its process ran at another speed than the clean timing pass:
  its own clean iterations (paired in it, the hooks taken out) more than PROCESS_RATIO_LIMIT x apart from the
  timing pass's forward, or, where it ran no clean iterations, its forward more than PASS_RATIO_LIMIT x the timing
  pass's (no layer hook costs that much: the process was slowed by something else).

A verdict names the passes its figures come from (Finding.passes, the gate's figure sources) and asks
`RunHealth.why(passes)`: None lets it speak; a reason makes it "unconfirmed" / "not resolved" with that reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hwprof.analysis.finding import CAVEAT, COUNTERS, KERNELS, LAYER_TIME, TIMING, TRACE, Finding
from hwprof.analysis.layers.times import PROCESS_RATIO_LIMIT
from hwprof.analysis.neighbours import pass_disturbance, timing_disturbance

if TYPE_CHECKING:
    from hwprof.analysis.layers.stats import LayerReport
    from hwprof.schema.run import RunDoc

PASS_RATIO_LIMIT = 2.0
"""A layer-time pass without clean iterations whose forward ran more than this many times the timing pass's ran
in a slowed process: the layer hooks cost a few % to tens of % (perf_events' reads, torch.profiler's ops), not 2x."""


@dataclass(frozen=True)
class RunHealth:
    """The passes of one run whose figures may not carry a verdict, each with why."""

    unfit: dict[str, str] = field(default_factory=dict)
    """Pass name -> why its figures are not fit for a verdict (absent: fit)."""
    passes: dict[str, str] = field(default_factory=dict)
    """Each measurement a finding can rest on (hwprof.analysis.finding's TIMING, LAYER_TIME, ...) -> the pass of
    this run that made it (absent: not made): evidence_passes."""

    def why(self, passes: Iterable[str]) -> str | None:
        """Why figures from these passes may not carry a verdict (their reasons joined), or None: they may."""
        reasons = [self.unfit[p] for p in dict.fromkeys(passes) if p in self.unfit]
        return "; ".join(reasons) or None

    def unfit_under(self, sources: Iterable[str]) -> list[str]:
        """The unfit passes that made these measurements (Finding.sources), in the run's pass order."""
        made = {self.passes[s] for s in sources if s in self.passes}
        return [p for p in self.unfit if p in made]


def run_health(run: RunDoc, layers: LayerReport | None = None) -> RunHealth:
    """Each pass's fitness for a verdict (see the module's docstring); `layers` adds the layer-time pass's speed."""
    unfit: dict[str, str] = {}
    for name in run.passes:
        why = timing_disturbance(run) if name == "timing" else pass_disturbance(run, name)
        if why:
            unfit[name] = why
    speed = _speed(layers) if layers is not None else None
    if speed is not None and layers is not None and layers.time_pass is not None:
        name = layers.time_pass
        unfit[name] = f"{unfit[name]}; {speed}" if name in unfit else speed
    return RunHealth(unfit, evidence_passes(run, layers))


def _speed(layers: LayerReport) -> str | None:
    """Why the layer-time pass's process ran at another speed than the clean timing pass, or None."""
    name = layers.time_pass
    process = layers.process_ratio
    if process is not None:
        if 1 / PROCESS_RATIO_LIMIT <= process <= PROCESS_RATIO_LIMIT:
            return None
        return (
            f"the {name} pass's clean iterations ran {process:.2f}x the timing pass's forward (more than "
            f"{PROCESS_RATIO_LIMIT:g}x apart: the two processes ran at different speeds)"
        )
    r = layers.pass_ratio
    if r is None or r <= PASS_RATIO_LIMIT:
        return None
    return (
        f"the {name} pass's forward ran {r:.2f}x the timing pass's, with no clean iterations to take its hooks out "
        f"(more than {PASS_RATIO_LIMIT:g}x: its process was slowed by more than its hooks)"
    )


SOURCE_COLLECTORS = {COUNTERS: ("perf_events", "papi"), KERNELS: ("perf_sampling",), TRACE: ("torch_profiler",)}
"""The collectors whose pass makes each measurement a finding can rest on."""


def evidence_passes(run: RunDoc, layers: LayerReport | None) -> dict[str, str]:
    """Each measurement a finding can rest on (hwprof.analysis.finding's TIMING, LAYER_TIME, ...) -> the pass of
    this run that made it (absent: not made)."""
    out = {TIMING: "timing"} if "timing" in run.passes else {}
    if layers is not None and layers.time_pass is not None:
        out[LAYER_TIME] = layers.time_pass
    for source, names in SOURCE_COLLECTORS.items():
        made = [run.collectors[n].pass_name for n in names if n in run.collectors and run.collectors[n].ran]
        if made and made[0]:
            out[source] = made[0]
    return out


def follow_health(found: list[Finding], health: RunHealth) -> list[Finding]:
    """The findings in order with those that rest on an unfit pass marked unconfirmed (with the reason) and put
    after the ranked ones. Every finding that is not a caveat must say what it rests on (Finding.sources):
    AssertionError otherwise, so that a new rule cannot skip its evidence's health."""
    for f in found:
        assert f.sources or f.kind == CAVEAT, f"finding without sources: {f.title!r}"
        unfit = health.unfit_under(f.sources)
        why = health.why(unfit)
        if why and f.kind != CAVEAT:
            f.unconfirmed, f.unfit = why, tuple(unfit)
    return [f for f in found if not f.unconfirmed] + [f for f in found if f.unconfirmed]
